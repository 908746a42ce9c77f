"""Every Redis key of the session store is built here, and nowhere else.

Seed 004 fixes the layout: all keys of one FIX session share the hash tag
``{namespace/gateway/name}`` so Redis Cluster keeps them on one shard and one script can
update them atomically. The dispatcher lock and its fencing epoch share the gateway-level
tag ``{namespace/gateway}``.
"""

from __future__ import annotations

from dataclasses import dataclass

CHUNK_SIZE = 1024  # sequence numbers per /store/<chunk> hash (seed 004)

ORDER_ENTRY = "fsg"  # FIX Store Gateway: order-entry sessions
DROP_COPY = "dc"


def _check_part(what: str, value: str) -> None:
    if not value:
        raise ValueError(f"{what} must not be empty")
    for bad in "{}/":
        if bad in value:
            raise ValueError(f"{what} {value!r} must not contain {bad!r}")


@dataclass(frozen=True, slots=True)
class GatewayKey:
    """``namespace/gateway``: one dispatcher (one lock) serves all its sessions."""

    namespace: str
    gateway: str

    def __post_init__(self) -> None:
        _check_part("namespace", self.namespace)
        _check_part("gateway", self.gateway)

    @property
    def tag(self) -> str:
        return f"{{{self.namespace}/{self.gateway}}}"

    @property
    def lock(self) -> str:
        return f"{self.tag}/lock"

    @property
    def epoch(self) -> str:
        """Counter incremented on every lock acquisition: the fencing epoch."""
        return f"{self.tag}/epoch"

    @property
    def replication_mark(self) -> str:
        """A counter every replicated write increments before its WAIT (``replicaAcks``): WAIT
        confirms only the offset of its own connection's last write, and a write replayed on a
        new connection may write nothing (the scripts recognise it); the mark makes every WAIT
        cover everything the primary applied before it."""
        return f"{self.tag}/replication-mark"

    @property
    def inbox_stream(self) -> str:
        """Stream of matching events addressed to this gateway's sessions."""
        return f"{self.tag}/inbox"

    @property
    def inbox_dead_letter(self) -> str:
        """Inbox entries the dispatcher could not turn into messages, with the error."""
        return f"{self.tag}/inbox:dead-letter"

    def session(self, name: str) -> SessionKey:
        return SessionKey(self.namespace, self.gateway, name)


@dataclass(frozen=True, slots=True)
class SessionKey:
    """``namespace/gateway/name``: the identity of one FIX session in Redis."""

    namespace: str
    gateway: str
    name: str

    def __post_init__(self) -> None:
        _check_part("namespace", self.namespace)
        _check_part("gateway", self.gateway)
        _check_part("name", self.name)

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        """Parse ``ns/gw/name`` (braces optional), as operators write it."""
        parts = text.strip().strip("{}").split("/")
        if len(parts) != 3:
            raise ValueError(f"session {text!r} must be written namespace/gateway/name")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.gateway}/{self.name}"

    @property
    def gateway_key(self) -> GatewayKey:
        return GatewayKey(self.namespace, self.gateway)

    @property
    def tag(self) -> str:
        return f"{{{self.namespace}/{self.gateway}/{self.name}}}"

    @property
    def state(self) -> str:
        return f"{self.tag}/state"

    def chunk(self, index: int) -> str:
        return f"{self.tag}/store/{index}"

    def archived_chunk(self, period_start_ns: int, index: int) -> str:
        """A chunk of an ended period, kept for audit (``keep_periods``) until it expires."""
        return f"{self.tag}/period/{period_start_ns}/store/{index}"

    def chunk_of(self, seq_num: int) -> str:
        return self.chunk(chunk_index(seq_num))

    @property
    def owner(self) -> str:
        """Fencing epoch of the dispatcher allowed to write this session."""
        return f"{self.tag}/owner"

    @property
    def inbox(self) -> str:
        """Event ids already turned into outbound messages for this session (sorted set, scored
        by commit time in ms: retention trims it)."""
        return f"{self.tag}/inbox"

    @property
    def closed(self) -> str:
        """Orders of this session that are closed (sorted set: order id → closing time in ms),
        whose views retention removes."""
        return f"{self.tag}/closed"

    @property
    def orders(self) -> str:
        """The gateway's view of this session's orders (order id → last state reported)."""
        return f"{self.tag}/orders"

    @property
    def unsent(self) -> str:
        """Numbers committed ahead of sending (group commit): seqNum → the inbox entry it carries."""
        return f"{self.tag}/unsent"

    @property
    def password(self) -> str:
        """The session's password hash once its counterparty changed it (Logon NewPassword):
        it replaces the configured one."""
        return f"{self.tag}/password"

    def clordid(self, clordid: str) -> str:
        """Idempotency window entry for one ClOrdID (seed 002)."""
        return f"{self.tag}/clordid:{clordid}"

    @property
    def every_key(self) -> str:
        """A SCAN pattern matching every key of this session (and nothing else)."""
        return "".join("\\" + c if c in "*?[]\\^" else c for c in self.tag) + "/*"

    def moved_to(self, group: str) -> SessionKey:
        """The same session under another group: its keys with that group's tag."""
        return SessionKey(self.namespace, group, self.name)


def admin_audit(namespace: str) -> str:
    """Every operator action on the namespace's sessions (stream: who, when, what, before, after,
    and the outcome), written by the gateway that carried it out (``fixgw/admin.py``)."""
    _check_part("namespace", namespace)
    return f"{{{namespace}}}/admin-audit"


def session_groups(namespace: str) -> str:
    """Sessions moved to another group than the one their configuration names (hash: session
    name → the group serving it now, or ``moving`` while a move is under way); written by the
    move (``fixgw-admin move-session``), read by every gateway at a Logon and at takeover."""
    _check_part("namespace", namespace)
    return f"{{{namespace}}}/session-groups"


def partition_map(namespace: str) -> str:
    """Matching partitions relocated away from their configured datastore (hash: partition →
    URL of the datastore that holds it now); written by ``fixgw-cell relocate``, read by the
    gateway at start and every half second after."""
    _check_part("namespace", namespace)
    return f"{{{namespace}}}/partition-map"


def chunk_index(seq_num: int) -> int:
    return seq_num // CHUNK_SIZE


def parse_key(key: str) -> tuple[SessionKey, str] | None:
    """Split a stored key into its session and suffix (``state``, ``store/3``...).

    Returns None for keys that are not session keys (gateway locks, other data).
    """
    if not key.startswith("{") or "}/" not in key:
        return None
    tag, _, suffix = key[1:].partition("}/")
    parts = tag.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return SessionKey(*parts), suffix
