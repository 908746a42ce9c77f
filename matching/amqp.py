"""Seed 000's broker: commands through RabbitMQ quorum queues, events to a topic exchange.

Owns: the AMQP names (``matching:commands.pN``, declared quorum, durable, single active
consumer), the connection (``AmqpLink``: aio-pika on an event loop of its own thread, so the
conductor, the outbox and the gateway stay plain threads), the command publisher (gateway),
the command source (conductor), the event publisher (outbox) and the inbox bridge (gateway).

Why aio-pika: its publisher confirms are futures, so a batch goes out as a bounded window of
outstanding confirms and waits once (pika's BlockingConnection waits for each message's confirm
in turn, one round trip a message); it is maintained (aiormq underneath) and typed.

Guarantees, as with Redis Streams: a command is acknowledged only after its batch's commit
(and WAITAOF in aof-replicated mode), so a redelivery after a crash finds the
processed-command record; an event is acknowledged in the partition's stream only when the
broker confirmed every message of its batch. A nack, a returned (unroutable) message or a lost
connection fails the whole batch, which is published again, in order (counted, never dropped);
consumers deduplicate by messageId. Connections are not "robust": a lost connection raises,
the caller's loop reconnects with backoff, and /ready says 503 meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import aio_pika
import aiormq

from .broker_url import redacted
from .contracts import Command, Event, encode_command
from .outbox import Delivery, PublishError

log = logging.getLogger("matching.amqp")

T = TypeVar("T")

COMMAND_QUEUE_ARGUMENTS: dict[str, Any] = {"x-queue-type": "quorum", "x-single-active-consumer": True}
DEFAULT_EXCHANGE = "matching.events"
CONFIRM_WINDOW = 256  # outstanding publisher confirms per channel
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 30.0


class AmqpUnavailable(Exception):
    """The broker cannot be reached, or refused us; the message says which and why."""


def command_queue(partition: int) -> str:
    return f"matching:commands.p{partition}"


def event_routing_key(event: Event) -> str:
    """``<event type>.p<partition>``: bind ``deal.#`` for one type, ``#.p3`` for one partition."""
    return f"{event.type.value}.p{event.partition}"


def inbox_queue(namespace: str, gateway: str) -> str:
    """The queue feeding one gateway kind's inbox (bound to the event exchange, every key)."""
    return f"fixgw.{namespace}.{gateway}.inbox"


class AmqpLink:
    """One AMQP connection, driven by an asyncio loop on a daemon thread of its own.

    ``call`` runs a coroutine there and waits for it. ``connect`` raises ``AmqpUnavailable``
    with the reason; after a loss ``healthy`` is False until ``reconnect`` succeeds.
    """

    def __init__(self, url: str, name: str) -> None:
        self.url = url
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"amqp {name}", daemon=True)
        self._thread.start()
        self.connection: aio_pika.abc.AbstractConnection | None = None
        self.lost: str | None = "not connected"
        self._closing = False
        self._lock: asyncio.Lock | None = None  # made on the loop

    def call(self, coro: Awaitable[T], timeout: float = CALL_TIMEOUT_S) -> T:
        async def run() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    @property
    def healthy(self) -> bool:
        return self.connection is not None and not self.connection.is_closed and self.lost is None

    def connect(self) -> None:
        try:
            self.call(self._connect(), CONNECT_TIMEOUT_S + 1)
        except AmqpUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 (every way of failing is "unavailable", with its reason)
            raise AmqpUnavailable(f"RabbitMQ at {redacted(self.url)}: {type(exc).__name__}: {exc}") from None

    async def _connect(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one connection: a caller and the reconnector may both try
            if self.healthy:
                return
            await self._open()

    async def _open(self) -> None:
        try:
            connection = await asyncio.wait_for(
                aio_pika.connect(self.url, client_properties={"connection_name": self.name}), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, aiormq.exceptions.AMQPError) as exc:
            raise AmqpUnavailable(f"RabbitMQ at {redacted(self.url)} is unreachable or refused us: "
                                  f"{type(exc).__name__}: {exc}") from None
        connection.close_callbacks.add(self._on_close)
        self.connection = connection
        self.lost = None

    def ensure(self) -> None:
        """Connected, now (a channel of a closed connection reports itself closed, so its user
        opens a new one): ``AmqpUnavailable`` when the broker still cannot be reached."""
        if not self.healthy:
            self.connect()

    def _on_close(self, _sender: Any, exc: BaseException | None = None) -> None:
        self.lost = f"{type(exc).__name__}: {exc}" if exc is not None else "closed"
        if not self._closing:
            log.error("%s: connection to RabbitMQ lost (%s); reconnecting", self.name, self.lost)
            self.loop.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        """Connect again with backoff (0.2 s doubling to 5 s) until it works or we close; the
        users open new channels when they find theirs closed."""
        wait = 0.2
        while not self._closing and not self.healthy:
            await asyncio.sleep(wait)
            try:
                await self._connect()
                log.info("%s: reconnected to RabbitMQ", self.name)
            except AmqpUnavailable as exc:
                log.warning("%s: %s; again in %.1fs", self.name, exc, wait)
                wait = min(wait * 2, 5.0)

    def close(self) -> None:
        self._closing = True
        if self.connection is not None and not self.connection.is_closed:
            try:
                self.call(self.connection.close(), 5)
            except Exception:  # noqa: BLE001 (closing: nothing to do about it)
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)


async def declare_command_queue(channel: aio_pika.abc.AbstractChannel, partition: int) -> aio_pika.abc.AbstractQueue:
    """``matching:commands.pN`` as seed 000 declares it (publishers and consumers alike)."""
    return await channel.declare_queue(command_queue(partition), durable=True, arguments=COMMAND_QUEUE_ARGUMENTS)


async def _publish_confirmed(exchange: aio_pika.abc.AbstractExchange, messages: Sequence[tuple[str, aio_pika.Message]],
                             window: int) -> None:
    """Publish in order with at most ``window`` confirms outstanding; raise on any nack, return
    or loss (the caller publishes the whole batch again: consumers deduplicate)."""
    slots = asyncio.Semaphore(window)

    async def one(routing_key: str, message: aio_pika.Message) -> None:
        try:
            await exchange.publish(message, routing_key, mandatory=True)
        finally:
            slots.release()

    pending = []
    for routing_key, message in messages:
        await slots.acquire()  # frames leave in this order: one channel, in call order
        pending.append(asyncio.ensure_future(one(routing_key, message)))
    results = await asyncio.gather(*pending, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]


class AmqpCommandPublisher:
    """The gateway's side: commands to ``matching:commands.pN`` (default exchange, routed by
    queue name), persistent, each confirmed by the broker before it counts as appended."""

    def __init__(self, link: AmqpLink, partition_count: int, window: int = CONFIRM_WINDOW) -> None:
        self.link = link
        self.partition_count = partition_count
        self.window = window
        self._channel: aio_pika.abc.AbstractChannel | None = None

    async def _ready_channel(self) -> aio_pika.abc.AbstractChannel:
        if self._channel is None or self._channel.is_closed:
            assert self.link.connection is not None
            self._channel = await self.link.connection.channel(publisher_confirms=True, on_return_raises=True)
            for p in range(self.partition_count):
                await declare_command_queue(self._channel, p)
        return self._channel

    def declare(self) -> None:
        """Every partition's queue exists (declared as the cells declare it)."""
        self.link.ensure()
        self.link.call(self._ready_channel())

    def publish(self, commands: Sequence[Command]) -> None:
        """Every command appended (confirmed), or an exception: then none counts as appended."""
        self.link.ensure()
        self.link.call(self._publish(commands))

    async def _publish(self, commands: Sequence[Command]) -> None:
        channel = await self._ready_channel()
        messages = [(command_queue(c.partition), aio_pika.Message(
            encode_command(c), message_id=c.command_id, delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            content_type="application/msgpack", type=c.kind)) for c in commands]
        await _publish_confirmed(channel.default_exchange, messages, self.window)


class QueueConsumer:
    """One durable quorum queue, consumed with a prefetch window on a channel of its own.
    Deliveries wait in a buffer until ``read``; ``ack`` acknowledges up to a delivery (multiple).
    ``declare`` makes the queue (and its bindings) exist before consuming."""

    def __init__(self, link: AmqpLink, queue_name: str, prefetch: int,
                 declare: Callable[[aio_pika.abc.AbstractChannel], Awaitable[aio_pika.abc.AbstractQueue]]) -> None:
        self.link = link
        self.queue_name = queue_name
        self.prefetch = prefetch
        self._declare = declare
        self._buffer: queue.Queue[tuple[int, aio_pika.abc.AbstractIncomingMessage]] = queue.Queue()
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self._generation = 0  # a new channel's delivery tags start again: the old ones are void

    @property
    def healthy(self) -> bool:
        return self.link.healthy and self._channel is not None and not self._channel.is_closed

    def start(self) -> None:
        self.link.call(self._start())

    async def _start(self) -> None:
        assert self.link.connection is not None
        self._generation += 1
        generation = self._generation
        self._channel = await self.link.connection.channel()
        await self._channel.set_qos(prefetch_count=self.prefetch)
        q = await self._declare(self._channel)

        async def deliver(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            self._buffer.put((generation, message))

        await q.consume(deliver, no_ack=False)

    def restart(self) -> None:
        """(Re)subscribe, connecting first if the connection is gone; whatever an old channel
        delivered and we did not acknowledge, the broker delivers again, in order."""
        self.stop()
        while True:
            try:
                self._buffer.get_nowait()
            except queue.Empty:
                break
        self.link.ensure()
        self.start()

    def read(self, count: int, block_ms: int) -> list[tuple[bytes, dict[bytes, bytes] | None, Any]]:
        """Up to ``count`` deliveries, waiting up to ``block_ms`` for the first: (entry id, the
        message as a stream entry's fields, the delivery to acknowledge)."""
        out: list[tuple[bytes, dict[bytes, bytes] | None, Any]] = []
        deadline = time.monotonic() + block_ms / 1000
        while len(out) < count:
            try:
                wait = max(0.0, deadline - time.monotonic()) if not out else 0.0
                generation, message = self._buffer.get(timeout=wait) if wait else self._buffer.get_nowait()
            except queue.Empty:
                break
            if generation != self._generation:
                continue  # delivered on a channel that is gone: the broker delivers it again
            out.append((f"amqp-{message.delivery_tag}".encode(), self.fields(message), message))
        return out

    def fields(self, message: aio_pika.abc.AbstractIncomingMessage) -> dict[bytes, bytes]:
        return {b"body": message.body}

    def ack(self, deliveries: Sequence[Any]) -> None:
        """Acknowledge every delivery up to the last one (multiple=True: one frame)."""
        if deliveries:
            self.link.call(deliveries[-1].ack(multiple=True))

    def stop(self) -> None:
        if self._channel is not None and not self._channel.is_closed:
            try:
                self.link.call(self._channel.close(), 5)
            except Exception:  # noqa: BLE001 (closing a channel that is going anyway)
                pass
        self._channel = None


class AmqpCommandSource(QueueConsumer):
    """The conductor's side: the partition's quorum queue, consumed only while the conductor
    holds the partition's lease (the lease says who writes; the broker's single active consumer
    only keeps two consumers from both receiving). A new holder subscribes and the broker hands
    it what the old one left unacknowledged first, in order, once the old one's channel is gone.
    Acknowledged after the commit and its durability."""

    def __init__(self, link: AmqpLink, partition: int, prefetch: int) -> None:
        async def declare(channel: aio_pika.abc.AbstractChannel) -> aio_pika.abc.AbstractQueue:
            return await declare_command_queue(channel, partition)

        super().__init__(link, command_queue(partition), prefetch, declare)
        self.partition = partition

    def fields(self, message: aio_pika.abc.AbstractIncomingMessage) -> dict[bytes, bytes]:
        return {b"command": message.body}


class AmqpInboxBridge:
    """Events from the exchange into one gateway kind's inbox stream, so the dispatcher works
    the same over either transport: a durable quorum queue bound to every routing key; each
    batch is written to the stream (``write``: one round trip) and then acknowledged. A crash
    in between writes a batch twice; the sessions' inboxes absorb it (messageId)."""

    def __init__(self, link: AmqpLink, exchange: str, queue_name: str,
                 write: Callable[[list[dict[str, bytes | str]]], None], prefetch: int = 500) -> None:
        async def declare(channel: aio_pika.abc.AbstractChannel) -> aio_pika.abc.AbstractQueue:
            ex = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
            q = await channel.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
            await q.bind(ex, "#")
            return q

        self.consumer = QueueConsumer(link, queue_name, prefetch, declare)
        self.write = write
        self.problem: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"inbox-bridge {queue_name}", daemon=True)

    def start(self) -> None:
        self.consumer.restart()  # declared and bound before the first event is published
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.consumer.stop()

    def _run(self) -> None:
        wait = 0.2
        while not self._stop.is_set():
            try:
                if not self.consumer.healthy:
                    self.consumer.restart()
                batch = self.consumer.read(self.consumer.prefetch, 200)
                if batch:
                    self.write([stream_fields(delivery) for *_, delivery in batch])
                    self.consumer.ack([delivery for *_, delivery in batch])
                self.problem, wait = None, 0.2
            except Exception as exc:  # noqa: BLE001 (a lost broker or datastore: again, with backoff)
                self.problem = f"inbox bridge {self.consumer.queue_name}: {type(exc).__name__}: {exc}"
                log.error("%s; retrying in %.1fs", self.problem, wait)
                self._stop.wait(wait)
                wait = min(wait * 2, 5.0)


def stream_fields(message: aio_pika.abc.AbstractIncomingMessage) -> dict[str, bytes | str]:
    """An event message as an inbox stream entry, the fields the Redis publisher writes."""
    headers = message.headers or {}

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value if value is not None else "")

    return {"messageId": message.message_id or "", "causationId": message.correlation_id or "",
            "partition": text(headers.get("partition")), "x-partition-offset": text(headers.get("x-partition-offset")),
            "event": message.body}


class AmqpEventPublisher:
    """The outbox's publisher: every event to a durable topic exchange, with confirms, in stream
    order on one channel; headers ``messageId``, ``causationId``, ``partition``,
    ``x-partition-offset`` (seed 000). Implements ``outbox.Publisher``."""

    def __init__(self, link: AmqpLink, exchange: str = DEFAULT_EXCHANGE, window: int = CONFIRM_WINDOW,
                 bind: Callable[[aio_pika.abc.AbstractChannel, aio_pika.abc.AbstractExchange], Coroutine[Any, Any, None]]
                 | None = None) -> None:
        self.link = link
        self.exchange_name = exchange
        self.window = window
        self._bind = bind
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self._exchange: aio_pika.abc.AbstractExchange | None = None

    def begin_term(self, partition: int, still_holder: Callable[[], bool]) -> None:
        """No epochs at the broker: the outbox lease keeps one publisher per partition; a stalled
        former holder's late copies are duplicates that consumers' inboxes absorb."""

    async def _ready(self) -> aio_pika.abc.AbstractExchange:
        if self._channel is None or self._channel.is_closed or self._exchange is None:
            assert self.link.connection is not None
            self._channel = await self.link.connection.channel(publisher_confirms=True, on_return_raises=True)
            self._exchange = await self._channel.declare_exchange(self.exchange_name, aio_pika.ExchangeType.TOPIC,
                                                                  durable=True)
            if self._bind is not None:
                await self._bind(self._channel, self._exchange)
        return self._exchange

    def publish(self, deliveries: Sequence[Delivery]) -> None:
        try:
            self.link.ensure()
            self.link.call(self._publish(deliveries))
        except Exception as exc:  # noqa: BLE001 (a nack, a return, a lost connection: the batch again)
            raise PublishError(f"RabbitMQ did not confirm the batch: {type(exc).__name__}: {exc}") from exc

    async def _publish(self, deliveries: Sequence[Delivery]) -> None:
        exchange = await self._ready()
        messages = []
        for d in deliveries:
            headers: dict[str, Any] = dict(d.headers)
            messages.append((event_routing_key(d.event), aio_pika.Message(
                d.body, message_id=d.event.event_id, correlation_id=d.event.command_id, headers=headers,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT, content_type="application/msgpack",
                type=d.event.type.value)))
        await _publish_confirmed(exchange, messages, self.window)
