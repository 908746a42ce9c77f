"""Redis clients from settings: standalone, Sentinel, or Cluster through redis-py's own clients.

Owns the mapping of seed 004's settings onto redis-py: connectionTimeout → connect
timeout, socketTimeout → socket timeout, maxAttempts → total tries per command (retries
with backoff on connection errors, timeouts, and a demoted primary's READONLY), pool.* →
the connection pool. Knows nothing about what the keys mean.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, cast

import hiredis
import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from .settings import ConfigError, RedisEndpoint

try:  # the hiredis parser's "need more bytes" marker (see read_replies)
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
except ImportError:  # pragma: no cover (another redis-py layout: read_replies falls back)
    _NOT_ENOUGH_DATA = object()

RedisClient = redis.Redis | RedisCluster


class IdleBoundedPool(redis.BlockingConnectionPool):
    """Blocking pool (maxTotal, maxWait) that keeps at most ``max_idle`` idle sockets open.

    redis-py keeps every released connection open; Commons Pool's maxIdle closes the
    surplus, which matters when many processes share one Redis.
    """

    def __init__(self, *, max_idle: int, **kwargs: Any) -> None:
        self.max_idle = max_idle
        super().__init__(**kwargs)

    def release(self, connection: Any) -> None:
        super().release(connection)
        if len(self._connections) <= self.max_idle:
            return  # no more sockets than may idle: nothing to close (skip the scan on the hot path)
        with self._lock:
            idle_open = [c for c in list(self.pool.queue) if c is not None and c._sock is not None]
            for surplus in idle_open[self.max_idle :]:
                surplus.disconnect()

    def warm(self, count: int) -> None:
        """Open ``count`` connections now (pool.minIdle), so the first messages pay no connect."""
        taken = []
        try:
            for _ in range(count):
                conn = self.get_connection()
                conn.connect()
                taken.append(conn)
        finally:
            for conn in taken:
                super().release(conn)


class IdleBoundedSentinelPool(SentinelConnectionPool, IdleBoundedPool):
    """The same pool behaviour (maxTotal, maxWait, maxIdle, minIdle) for a Sentinel-managed
    primary: redis-py's own Sentinel pool does not block and raises "Too many connections"."""


def _retry(endpoint: RedisEndpoint) -> Retry:
    return Retry(
        ExponentialBackoff(cap=min(1.0, endpoint.socketTimeout), base=0.02),
        retries=endpoint.maxAttempts - 1,
        supported_errors=(RedisConnectionError, RedisTimeoutError, ReadOnlyError),
    )


def _host_port(node: str) -> tuple[str, int]:
    host, _, port = node.rpartition(":")
    return host, int(port)


def connect(endpoint: RedisEndpoint, *, client_name: str | None = None) -> RedisClient:
    """A client for the endpoint's topology. Raises ConfigError for an unreadable secret."""
    password = endpoint.resolve_password()
    common: dict[str, Any] = dict(
        socket_connect_timeout=endpoint.connectionTimeout,
        socket_timeout=endpoint.socketTimeout,
        password=password,
        username=endpoint.username,
        client_name=client_name,
    )
    if endpoint.topology == "cluster":
        # redis-py's cluster client keeps a plain pool per node: it cannot wait for a free
        # connection or close idle ones. Refuse what it cannot honour rather than ignore it.
        limits = endpoint.pool
        unsupported = [name for name, honoured in (("pool.maxIdle", limits.maxIdle >= limits.maxTotal),
                                                    ("pool.minIdle", limits.minIdle == 0),
                                                    ("pool.maxWait", limits.maxWait is None)) if not honoured]
        if unsupported:
            raise ConfigError(f"{', '.join(unsupported)}: not supported with Redis Cluster (redis-py's cluster client "
                              "keeps a non-blocking pool per node; pool.maxTotal bounds it per node): remove them")
        return RedisCluster(
            startup_nodes=[ClusterNode(*_host_port(n)) for n in endpoint.nodes],
            max_connections=endpoint.pool.maxTotal,  # per node
            retry=_retry(endpoint),  # also bounds MOVED/ASK redirect follows
            **common,
        )
    if endpoint.topology == "sentinel":
        sentinel = Sentinel(
            [_host_port(n) for n in endpoint.sentinels],
            socket_timeout=endpoint.connectionTimeout,
            socket_connect_timeout=endpoint.connectionTimeout,
            sentinel_kwargs={"password": password} if password else None,
        )
        # The Sentinel pool discovers the current primary on every (re)connect, so after a
        # failover the retry lands on the promoted replica.
        client = sentinel.master_for(
            endpoint.sentinelGroup,
            connection_pool_class=IdleBoundedSentinelPool,
            retry=_retry(endpoint),
            max_connections=endpoint.pool.maxTotal,
            timeout=endpoint.pool.maxWait,
            max_idle=endpoint.pool.maxIdle,
            **common,
        )
        if endpoint.pool.minIdle:
            client.connection_pool.warm(endpoint.pool.minIdle)
        return client
    assert endpoint.url is not None
    parsed = redis.ConnectionPool.from_url(endpoint.url)
    conn_kwargs = parsed.connection_kwargs
    url_username = conn_kwargs.get("username")  # (a password in the URL is refused by the settings)
    conn_kwargs.update(common, retry=_retry(endpoint))
    if endpoint.username is None:
        conn_kwargs["username"] = url_username
    pool = IdleBoundedPool(
        max_idle=endpoint.pool.maxIdle,
        max_connections=endpoint.pool.maxTotal,
        timeout=endpoint.pool.maxWait,
        connection_class=parsed.connection_class,  # rediss:// → TLS (the class is not among the kwargs)
        **conn_kwargs,
    )
    if endpoint.pool.minIdle:
        pool.warm(endpoint.pool.minIdle)
    # With a pool given, redis-py takes the retry policy from the pool's connection kwargs.
    return redis.Redis(connection_pool=pool)


def check_credentials(client: RedisClient, endpoint: RedisEndpoint, section: str) -> None:
    """At startup: a server that refuses our credentials stops the process with a clear
    message naming the settings (ConfigError), never a stack trace. A server that cannot be
    reached is not judged here: standbys wait for it, and writes fail fast."""
    try:
        client.ping()
    except (redis.AuthenticationError, redis.exceptions.NoPermissionError) as exc:
        given = [name for name, value in (("username", endpoint.username), ("passwordEnv", endpoint.passwordEnv),
                                          ("passwordFile", endpoint.passwordFile)) if value]
        raise ConfigError(f"{section}: the datastore refused our credentials "
                          f"({', '.join(given) if given else 'none set: username, passwordEnv or passwordFile'}): "
                          f"{exc}") from None
    except (RedisConnectionError, RedisTimeoutError):
        return
    except redis.ResponseError as exc:  # e.g. NOAUTH from servers that answer it as a plain error
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise ConfigError(f"{section}: the datastore requires credentials (username, passwordEnv or "
                              f"passwordFile): {exc}") from None
        raise


def is_cluster(client: RedisClient) -> bool:
    # By the client's class, remembered: redis-py's RedisCluster has typing's Protocol
    # metaclass, whose isinstance took 2.4 µs, and the hot loops ask on every cycle.
    kind = type(client)
    known = _CLUSTER_CLASSES.get(kind)
    if known is None:
        known = _CLUSTER_CLASSES[kind] = issubclass(kind, RedisCluster)
    return known


_CLUSTER_CLASSES: dict[type, bool] = {}


def standalone_pool(client: RedisClient) -> redis.ConnectionPool:
    """The pool of a standalone or Sentinel client (callers checked ``is_cluster`` first)."""
    assert isinstance(client, redis.Redis), "a cluster client has one pool per node"
    return client.connection_pool


# A hot loop's own connections, per thread: id(pool) → connection. See own_connection.
_owned = threading.local()


def _owned_by_this_thread() -> dict[int, Any]:
    owned: dict[int, Any] | None = getattr(_owned, "connections", None)
    if owned is None:
        owned = _owned.connections = {}
    return owned


@contextmanager
def own_connection(client: RedisClient) -> Iterator[None]:
    """Inside the block, the calling thread's packed exchanges with ``client`` (``round_trip``,
    ``checked_out``, the session store's writes, the cell's reads and commits) go over one
    connection of its own instead of a pool checkout each: redis-py 8's checkout and return
    (a readiness poll, observability counters) cost ~70 µs a round trip, more than the round
    trip itself on loopback. For the loops that run for the life of a process: the intake,
    the dispatcher, the conductor, the outbox. The connection is opened on first use with the
    pool's own settings (TLS, credentials, the Sentinel's current primary), outside the pool's
    ``maxTotal`` (one more socket per loop), reopened after any error, closed at the end."""
    if is_cluster(client):
        yield  # a cluster client routes per node: nothing to hold
        return
    pool = standalone_pool(client)
    owned = _owned_by_this_thread()
    if id(pool) in owned:
        yield  # already held by an enclosing block
        return
    conn = new_connection(client)
    owned[id(pool)] = conn
    try:
        yield
    finally:
        del owned[id(pool)]
        conn.disconnect()


def owned_connection(client: RedisClient) -> Any | None:
    """The calling thread's own connection to ``client`` (``own_connection``), or None."""
    if is_cluster(client):
        return None
    return _owned_by_this_thread().get(id(standalone_pool(client)))


def node_of(conn: Any) -> tuple[Any, ...]:
    """The node a connection reached (a Sentinel-managed one sets its address when it connects)."""
    return getattr(conn, "host", None), getattr(conn, "port", None), getattr(conn, "path", None)


def new_connection(client: RedisClient) -> Any:
    """A connection of a standalone or Sentinel client outside its pool, with the pool's own
    settings (TLS, credentials, the Sentinel's primary), opened on first use. The caller
    disconnects it."""
    pool = standalone_pool(client)
    return pool.connection_class(**pool.connection_kwargs)


@contextmanager
def own_connections(clients: Iterable[RedisClient]) -> Iterator[None]:
    """``own_connection`` to each of ``clients`` for the block (a client named twice is held once)."""
    with ExitStack() as owned:
        for client in {id(c): c for c in clients}.values():
            owned.enter_context(own_connection(client))
        yield


def checked_out(client: RedisClient) -> _CheckedOut:
    """A connection of a standalone or Sentinel client for one exchange: the thread's own
    (``own_connection``) or one from the pool. After any error it is disconnected, so the next
    exchange starts on a clean socket, never behind an unread reply. (A class, not a generator:
    every round trip of the hot loops goes through it, and contextlib's machinery showed.)"""
    return _CheckedOut(client)


class _CheckedOut:
    __slots__ = ("_pool", "_held", "_conn")

    def __init__(self, client: RedisClient) -> None:
        self._pool = standalone_pool(client)
        self._held = _owned_by_this_thread().get(id(self._pool))
        self._conn: Any = None

    def __enter__(self) -> Any:
        held = self._held
        if held is None:
            self._conn = self._pool.get_connection()
            return self._conn
        self._conn = held
        try:
            # (Re)connect through the connection's own connect(): a no-op when connected, and the
            # one that asks Sentinel for the primary. send_packed_command would connect by itself,
            # but through the base class, which ignores Sentinel (it dialled localhost:6379).
            held.connect()
        except BaseException:
            held.disconnect()
            raise
        return held

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._conn.disconnect()
        if self._held is None:
            self._pool.release(self._conn)


def read_replies(conn: Any, count: int) -> list[Any]:
    """The next ``count`` replies on ``conn``, parsed by hiredis straight from its buffer: one
    ``recv`` for many replies, and none of redis-py's per-reply work (~4 µs a reply in
    ``read_response``, which showed in the conductor's and the store's profiles). Error replies
    are returned as ``ResponseError`` instances, in place, so the connection stays in step.

    Leans on redis-py's hiredis parser (``_reader``, ``read_from_socket``; redis and hiredis
    are pinned); any other parser is read one reply at a time through the public call."""
    parser = getattr(conn, "_parser", None)
    reader = getattr(parser, "_reader", None)
    out: list[Any] = []
    if reader is None or not hasattr(parser, "read_from_socket"):
        for _ in range(count):
            try:
                out.append(conn.read_response())
            except ResponseError as exc:
                out.append(exc)
        return out
    gets, fill = reader.gets, parser.read_from_socket  # type: ignore[union-attr]
    while len(out) < count:
        reply = gets()
        if reply is _NOT_ENOUGH_DATA:
            try:
                fill()
            except OSError as exc:  # a reset socket (the server died): what redis-py's own read raises
                raise RedisConnectionError(f"Error while reading from {node_of(conn)[:2]}: {exc}") from exc
        elif isinstance(reply, RedisConnectionError):
            raise reply
        else:
            out.append(reply)
    return out


def send_commands(conn: Any, commands: list[tuple[Any, ...]]) -> int:
    """``commands`` sent on ``conn``, pre-packed by hiredis in one write, replies not read;
    returns how many to read (``read_replies``)."""
    conn.send_packed_command([b"".join(hiredis.pack_command(c) for c in commands)], check_health=False)
    return len(commands)


def exchange(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """``commands`` in one round trip on ``conn`` (a connection ``checked_out`` gave, for an
    exchange that must stay on one connection: a WATCH and its EXEC), pre-packed by hiredis;
    replies in order, error replies in place."""
    return read_replies(conn, send_commands(conn, commands))


def command_on(conn: Any, *command: Any) -> Any:
    """One command on ``conn`` (``exchange``); an error reply is raised."""
    [reply] = exchange(conn, [command])
    if isinstance(reply, Exception):
        raise reply
    return reply


def round_trip(client: RedisClient, commands: list[tuple[Any, ...]], transaction: bool = False) -> list[Any]:
    """``commands`` in one round trip, pre-packed by hiredis on one connection (a third of
    redis-py's per-command pipeline cost); replies in order, error replies in place, never
    retried here. ``transaction``: wrapped in MULTI/EXEC, and the replies are EXEC's. A Cluster
    goes through redis-py's pipeline (its node routing)."""
    if is_cluster(client):
        pipe = client.pipeline(transaction=transaction)
        for c in commands:
            pipe.execute_command(*c)
        return cast(list[Any], pipe.execute(raise_on_error=False))
    if transaction:
        commands = [("MULTI",), *commands, ("EXEC",)]
    with checked_out(client) as conn:
        replies = exchange(conn, commands)
    if not transaction:
        return replies
    result = replies[-1]
    if isinstance(result, Exception):  # EXECABORT: a command was refused while queueing
        raise result
    return cast(list[Any], result)


def round_trips(batches: list[tuple[RedisClient, list[tuple[Any, ...]]]],
                meanwhile: Callable[[], None] | None = None) -> list[list[Any]]:
    """Each client's ``commands`` sent before any reply is read, so two datastores work on
    their batches side by side (one round trip's wait instead of two) while the caller does
    ``meanwhile``; each batch's replies in order, error replies in place, never retried.
    Batches for one datastore go back to back on its one connection (Redis runs them in that
    order). Standalone or Sentinel clients only."""
    with ExitStack() as stack:
        conns: dict[int, Any] = {}
        for client, _ in batches:
            pool = id(standalone_pool(client))
            if pool not in conns:
                conns[pool] = stack.enter_context(checked_out(client))
        on = [conns[id(standalone_pool(client))] for client, _ in batches]
        for conn, (_, commands) in zip(on, batches):
            if commands:
                send_commands(conn, commands)
        if meanwhile is not None:
            meanwhile()
        return [read_replies(conn, len(commands)) for conn, (_, commands) in zip(on, batches)]


def text(value: bytes | str) -> str:
    """A reply value as text (our clients return bytes: decode_responses is off)."""
    return value.decode() if isinstance(value, bytes) else value


def text_or_none(value: bytes | str | None) -> str | None:
    return None if value is None else text(value)


def hash_of_bytes(reply: Any) -> dict[bytes, bytes]:
    """An HGETALL reply as our clients return it (bytes keys and values: decode_responses is off)."""
    return cast(dict[bytes, bytes], reply)
