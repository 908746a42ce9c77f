"""Cell settings from the environment (seed 000's names); anything unhonourable stops boot.

MATCHING_DURABILITY is ``memory`` or ``aof-replicated``; anything else is a startup error.
The datastore is one of REDIS_URL, REDIS_SENTINEL_HOSTS + REDIS_SENTINEL_NAME, or
REDIS_CLUSTER_NODES — the last goes through redis-py's real cluster client, never ignored.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from datastore.settings import ConfigError, RedisEndpoint, describe, parse_address

from .contracts import MATCHING_PARTITION, MATCHING_PARTITION_COUNT
from .domain import StpMode
from .instruments import DEFAULT_TABLE
from .linger import MAX_LINGER_S

# The conductor's and the outbox's lease (seed 000: SET NX PX 10000, renewed every third of it).
LEASE_TTL_MS = 10_000
LEASE_RENEW_S = LEASE_TTL_MS / 3000
# CPython's collector, for our long-running processes (cells and gateway): a young collection
# every 10,000 allocations instead of 700. The conductor allocates ~50 objects a command and
# keeps the book's orders, the gateway's dispatcher builds reports; with the defaults they paid
# for frequent collections that walk a growing old generation. Measured: bench/cell_bench.py's
# memory row ~6.7k → ~7.8k commands/s (6 runs each); the order path's burst throughput
# 1,031–1,085 → 1,114–1,170 orders/s (3 alternating pairs, the gateway's threshold alone).
GC_THRESHOLDS = (10_000, 10, 10)


def tune_gc() -> None:
    """What a cell or gateway process does at start (``fixgw-cell``, ``fixgw gateway``; the
    benchmarks' in-process conductors do the same)."""
    gc.set_threshold(*GC_THRESHOLDS)


def freeze_startup_objects() -> None:
    """Once started, before the work: what the imports and set-up made lives as long as the
    process, so it goes out of the collector's sight (``gc.freeze``) and a full collection walks
    only what the work made since. Measured in the gateway at 1,000 orders/s: a full collection
    of ~104k objects mid-run, 26–54 ms with the GIL held; the cells ~57k objects, 20–78 ms."""
    gc.collect()
    gc.freeze()


def stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (call it on the main thread).

    Not from a Python handler: Python runs one on the main thread between two bytecodes, also
    inside ``Event.wait`` or ``Event.set`` while they hold the event's lock, and a handler that
    sets the same event then waits for that lock forever. Two signals in a row get there: Ctrl-C
    on ``make run`` reaches the process from the terminal and again from make, which passes a
    fatal signal on to its children. So the interpreter's own C handler writes each signal's
    number to a pipe (``signal.set_wakeup_fd``: async-signal-safe, whichever thread the kernel
    chose), and a thread of its own reads the pipe and sets ``stop``."""
    readable, writable = os.pipe()
    os.set_blocking(writable, False)
    signal.set_wakeup_fd(writable, warn_on_full_buffer=False)
    wanted = {signal.SIGTERM, signal.SIGINT}
    for signum in wanted:
        signal.signal(signum, lambda *_: None)  # caught (not the default: ending at once); acted on below

    def watch() -> None:
        while numbers := os.read(readable, 64):
            if wanted.intersection(numbers):
                stop.set()

    threading.Thread(target=watch, name="signals", daemon=True).start()


@dataclass(frozen=True, slots=True)
class Durability:
    """What must hold before a command is acknowledged: WAITAOF <local> <replicas> <timeout>."""

    local_fsyncs: int
    replica_fsyncs: int
    timeout_ms: int

    @property
    def is_memory(self) -> bool:
        return self.local_fsyncs == 0 and self.replica_fsyncs == 0

    @classmethod
    def named(cls, name: str, timeout_ms: int = 2000) -> Durability:
        if name == "memory":
            return cls(0, 0, timeout_ms)
        if name == "aof-replicated":
            return cls(1, 1, timeout_ms)
        raise ConfigError(f"MATCHING_DURABILITY={name!r}: must be memory or aof-replicated")


def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class CellSettings(BaseSettings):
    """One partition's conductor or outbox worker."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", populate_by_name=True)

    partition_count: int = Field(MATCHING_PARTITION_COUNT, validation_alias=_alias("MATCHING_PARTITION_COUNT",
                                                                                    "partition_count"))
    partition: int | None = Field(MATCHING_PARTITION, validation_alias=_alias("MATCHING_PARTITION", "partition"))
    durability: Literal["memory", "aof-replicated"] = Field(
        "memory", validation_alias=_alias("MATCHING_DURABILITY", "durability"))
    durability_timeout_ms: int = Field(2000, ge=1, validation_alias=_alias("MATCHING_DURABILITY_TIMEOUT_MS",
                                                                            "durability_timeout_ms"))
    # The outbox worker's writes into the gateway's inboxes: WAIT for this many replicas of that
    # datastore after each (behind an increment of a mark key, so a replayed publish is covered
    # too), as the gateway's replicaAcks does for its own writes. A publish they do not confirm
    # is not acknowledged and goes again; without it, events published to a primary that is then
    # cut off and demoted (a split brain) are lost with it. 0: the primary's word is enough.
    target_replica_acks: int = Field(0, ge=0, validation_alias=_alias("MATCHING_TARGET_REPLICA_ACKS",
                                                                      "target_replica_acks"))
    target_replica_ack_timeout_ms: int = Field(1000, ge=1, validation_alias=_alias(
        "MATCHING_TARGET_REPLICA_ACK_TIMEOUT_MS", "target_replica_ack_timeout_ms"))
    stp_mode: StpMode = Field(StpMode.CANCEL_TAKER, validation_alias=_alias("MATCHING_STP_MODE", "stp_mode"))
    batch_size: int = Field(100, ge=1, le=10000, validation_alias=_alias("MATCHING_BATCH_SIZE", "batch_size"))
    # outbox: the conductor appends events to the partition's event stream and the outbox worker
    # relays them to the inboxes (seed 000). direct: the conductor appends each event to its
    # inboxes in the batch's own transaction, when they share the partition's datastore
    # (matching/conductor.py); the outbox worker then only relays what an outbox-mode commit left.
    inbox_delivery: Literal["outbox", "direct"] = Field(
        "outbox", validation_alias=_alias("MATCHING_INBOX_DELIVERY", "inbox_delivery"))
    # After a conductor or outbox cycle of more than one entry but less than a full batch, pause
    # this long so the next batch grows (matching/linger.py); 0: never.
    batch_linger_ms: float = Field(1.0, ge=0, le=MAX_LINGER_S * 1000,
                                   validation_alias=_alias("MATCHING_BATCH_LINGER_MS", "batch_linger_ms"))
    lease_ttl_ms: int = Field(LEASE_TTL_MS, ge=300, validation_alias=_alias("MATCHING_LEASE_TTL_MS", "lease_ttl_ms"))
    http_port: int = Field(0, ge=0, validation_alias=_alias("MATCHING_HTTP_PORT", "http_port"))
    command_retention_ms: int = Field(86_400_000, ge=0, validation_alias=_alias("MATCHING_COMMAND_RETENTION_MS",
                                                                                "command_retention_ms"))
    instruments: Path = Field(DEFAULT_TABLE, validation_alias=_alias("MATCHING_INSTRUMENTS", "instruments"))
    redis_url: str | None = Field(None, validation_alias=_alias("REDIS_URL", "redis_url"))
    redis_sentinel_hosts: str | None = Field(None, validation_alias=_alias("REDIS_SENTINEL_HOSTS",
                                                                           "redis_sentinel_hosts"))
    redis_sentinel_name: str | None = Field(None, validation_alias=_alias("REDIS_SENTINEL_NAME", "redis_sentinel_name"))
    redis_cluster_nodes: str | None = Field(None, validation_alias=_alias("REDIS_CLUSTER_NODES", "redis_cluster_nodes"))
    redis_password_env: str | None = Field(None, validation_alias=_alias("REDIS_PASSWORD_ENV", "redis_password_env"))
    redis_username: str | None = Field(None, validation_alias=_alias("REDIS_USERNAME", "redis_username"))
    # Seed 000's broker (docs/architecture.md, transports): commands from the quorum queue matching:commands.pN,
    # events to a topic exchange. The password comes from a variable or a file, never the URL.
    transport: Literal["redis-streams", "rabbitmq"] = Field(
        "redis-streams", validation_alias=_alias("MATCHING_TRANSPORT", "transport"))
    amqp_url: str | None = Field(None, validation_alias=_alias("MATCHING_AMQP_URL", "amqp_url"))
    amqp_password_env: str | None = Field(None, validation_alias=_alias("MATCHING_AMQP_PASSWORD_ENV",
                                                                        "amqp_password_env"))
    amqp_password_file: str | None = Field(None, validation_alias=_alias("MATCHING_AMQP_PASSWORD_FILE",
                                                                         "amqp_password_file"))
    amqp_exchange: str = Field("matching.events", validation_alias=_alias("MATCHING_AMQP_EXCHANGE", "amqp_exchange"))

    @model_validator(mode="after")
    def _check(self) -> CellSettings:
        if self.partition_count < 1:
            raise ValueError(f"MATCHING_PARTITION_COUNT={self.partition_count} must be at least 1")
        if self.partition is not None and not 0 <= self.partition < self.partition_count:
            raise ValueError(f"MATCHING_PARTITION={self.partition} is outside 0..{self.partition_count - 1}")
        if bool(self.redis_sentinel_hosts) != bool(self.redis_sentinel_name):
            raise ValueError("REDIS_SENTINEL_HOSTS and REDIS_SENTINEL_NAME must be configured together")
        if self.transport == "rabbitmq":
            if not self.amqp_url:
                raise ValueError("MATCHING_TRANSPORT=rabbitmq needs MATCHING_AMQP_URL (amqp://user@host:5672/vhost)")
            self.broker_url()  # refuses a password in the URL, an unset variable, an unreadable file
        if self.inbox_delivery == "direct" and (self.transport == "rabbitmq" or self.durability != "memory"):
            raise ValueError("MATCHING_INBOX_DELIVERY=direct needs MATCHING_TRANSPORT=redis-streams and "
                             "MATCHING_DURABILITY=memory (events reach the inboxes at commit: nothing waits for "
                             "WAITAOF or a broker); use outbox")
        return self

    def broker_url(self) -> str:
        from .broker_url import amqp_url_with_password

        assert self.amqp_url is not None
        return amqp_url_with_password(self.amqp_url, self.amqp_password_env, self.amqp_password_file)

    @property
    def durability_policy(self) -> Durability:
        return Durability.named(self.durability, self.durability_timeout_ms)

    def at(self, address: str) -> CellSettings:
        """The same settings for the datastore at ``address`` (a URL, a Sentinel group or Cluster
        seeds: ``datastore.settings.parse_address``), e.g. where a relocated partition went."""
        where = parse_address(address)
        return self.model_copy(update={"redis_url": where.get("url"),
                                       "redis_sentinel_hosts": ",".join(where.get("sentinels", [])) or None,
                                       "redis_sentinel_name": where.get("sentinelGroup"),
                                       "redis_cluster_nodes": ",".join(where.get("nodes", [])) or None})

    def endpoint(self) -> RedisEndpoint:
        """The partition's datastore. Several topologies at once is an error, not a guess."""
        data: dict[str, object] = {"passwordEnv": self.redis_password_env, "username": self.redis_username,
                                   "socketTimeout":
                                   f"{max(5000, self.durability_timeout_ms + 3000)}ms"}
        if self.redis_url:
            data["url"] = self.redis_url
        if self.redis_cluster_nodes:
            data["nodes"] = [n.strip() for n in self.redis_cluster_nodes.split(",") if n.strip()]
        if self.redis_sentinel_hosts:
            data["sentinels"] = [n.strip() for n in self.redis_sentinel_hosts.split(",") if n.strip()]
            data["sentinelGroup"] = self.redis_sentinel_name
        try:
            return RedisEndpoint(**data)
        except ValidationError as exc:
            raise ConfigError(describe(exc, "matching")) from None


def load_cell_settings(**overrides: object) -> CellSettings:
    try:
        return CellSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(describe(exc, "matching")) from None
