"""``[gateway]`` settings: where the acceptor listens and which FIX sessions it serves.

Owns turning them into QuickFIX's own SessionSettings text. Every session is marked
``fsg`` (order entry) or ``dc`` (drop copy): that is the gateway part of its Redis key,
``{namespace/kind/name}``. Bad settings stop startup with a message naming the setting.
"""

from __future__ import annotations

import functools
import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from datastore.settings import ConfigError, Duration, RedisEndpoint, describe, read_toml
from matching.linger import MAX_LINGER_S
from sessionstore.keys import SessionKey
from sessionstore.settings import SessionStoreSettings, load_session_store

from .credentials import check_hash_format
from .schedule import Schedule

ROOT = Path(__file__).resolve().parent.parent
DICTIONARIES = ROOT / "config" / "dictionaries"
BEGIN_STRINGS = ("FIX.4.2", "FIX.4.4", "FIXT.1.1")
MAX_COPY_DELAY_S = 1.0  # drop_copy_every: longer and the drop copy is no longer a live copy


class ScheduleSettings(BaseModel):
    """``[gateway.schedule]`` (every session) or a session's ``schedule``: when a FIX session is
    open, in QuickFIX's vocabulary (``fixgw/schedule.py``). None: always open, never a new period."""

    model_config = ConfigDict(extra="forbid")

    start_time: str = "00:00:00"
    end_time: str = "00:00:00"
    start_day: str | None = None
    end_day: str | None = None
    time_zone: str = "UTC"
    # a period's stored messages are kept this many periods after it ended (for audit: read them
    # with fixgw-inspect), then dropped; 0: dropped when the next period starts
    keep_periods: int = Field(0, ge=0, le=366)

    @model_validator(mode="after")
    def _valid(self) -> ScheduleSettings:
        self.schedule()
        return self

    def schedule(self) -> Schedule:
        return Schedule.parse(self.start_time, self.end_time, self.start_day, self.end_day, self.time_zone)


class OperatorConfig(BaseModel):
    """``[[gateway.operator]]``: who may use the admin API (``fixgw-admin``), by a token whose
    scrypt hash is here (``fixgw passwd`` makes one). The token itself is never in the file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    token_hash: str

    @model_validator(mode="after")
    def _hash(self) -> OperatorConfig:
        check_hash_format(self.token_hash)
        return self


class SessionConfig(BaseModel):
    """One FIX session the acceptor serves."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Literal["fsg", "dc"] = "fsg"
    # The session group: the gateway part of the session's keys ({namespace/group/name}, seed
    # 004), and the dispatcher lock, fencing epoch and inbox it shares with the sessions of its
    # group. A gateway process serves the groups of the sessions it lists, holding one lock each;
    # groups on separate processes (and hosts) scale order entry out. Default: the kind ("fsg",
    # "dc"). Every group of one kind; a drop copy's group must be one the cells copy to.
    group: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    # Listed so the session can be moved into this group (``fixgw-admin move-session``): served
    # here only once moved. A session is served by the one group its configurations name
    # without this, until it is moved.
    move_target: bool = False
    begin_string: Literal["FIX.4.2", "FIX.4.4", "FIXT.1.1"] = "FIX.4.4"
    default_appl_ver_id: str = "FIX.5.0SP2"  # FIXT.1.1 only
    sender_comp_id: str | None = None  # defaults to [gateway] sender_comp_id
    target_comp_id: str | None = None  # defaults to the session name
    heartbeat: int = Field(30, ge=1)
    reset_on_logon: bool = False
    reset_on_logout: bool = False
    reset_on_disconnect: bool = False
    validate_fields_have_values: bool = True
    accounts: list[str] = Field(default_factory=list)  # drop copy: only these accounts (empty = all)
    # Order entry only. Application messages per second (a token bucket, bursts of one
    # second's worth); over it, a BusinessMessageReject and nothing else. None = no limit.
    max_messages_per_second: float | None = Field(None, gt=0)
    # Order entry only: when the session logs out or its connection drops, every open order
    # of the session is canceled through its cell (reports reach it at its next logon).
    cancel_on_disconnect: bool = False
    # ...also when this gateway takes over (after a crash) and the client has not logged on
    # within this long: its connection died with the previous gateway.
    cancel_on_disconnect_grace: Duration = "30s"  # type: ignore[assignment]
    # Logon authentication: a Logon must carry Username(553) = username (when set) and a
    # Password(554) matching this scrypt hash (`fixgw passwd` prints one). None = no check.
    username: str | None = None
    password_hash: str | None = None
    schedule: ScheduleSettings | None = None  # this session's own, instead of [gateway.schedule]
    # Who may log on as this session, checked by the front before the engine sees the Logon:
    # client certificate names (CN or DNS subjectAltName; needs [gateway.tls] client_ca) and
    # source networks ("10.1.2.0/24", "2001:db8::/32", or one address). Empty: not checked.
    allowed_subjects: list[str] = Field(default_factory=list)
    allowed_addresses: list[str] = Field(default_factory=list)
    # Order entry: the Account(1) values this session may trade under (others are refused with
    # the reason); empty: any account.
    allowed_accounts: list[str] = Field(default_factory=list)

    @field_validator("allowed_addresses")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for text in value:
            try:
                ipaddress.ip_network(text, strict=False)
            except ValueError:
                raise ValueError(f"allowed_addresses: {text!r} is not an address or network (e.g. 10.1.2.0/24)") from None
        return value

    @property
    def authenticated(self) -> bool:
        """A Logon must prove something beyond the CompIDs: a password or a bound certificate."""
        return self.password_hash is not None or bool(self.allowed_subjects)

    @model_validator(mode="after")
    def _credentials(self) -> SessionConfig:
        if self.password_hash is None:
            if self.username is not None:
                raise ValueError(f"session {self.name}: username needs a password_hash")
            return self
        if self.begin_string == "FIX.4.2":
            raise ValueError(f"session {self.name}: a FIX.4.2 Logon has no Username (553) / Password (554): "
                             "leave password_hash unset for it")
        check_hash_format(self.password_hash)
        return self

    @model_validator(mode="after")
    def _order_entry_only(self) -> SessionConfig:
        if self.kind == "dc" and (self.max_messages_per_second is not None or self.cancel_on_disconnect
                                  or self.allowed_accounts):
            raise ValueError(f"session {self.name}: max_messages_per_second, cancel_on_disconnect and allowed_accounts "
                             "are for order-entry sessions (kind = fsg); a drop copy filters with accounts")
        return self

    def with_defaults(self, sender: str) -> SessionConfig:
        return self.model_copy(update={"sender_comp_id": self.sender_comp_id or sender,
                                       "target_comp_id": self.target_comp_id or self.name,
                                       "group": self.group or self.kind})

    @property
    def gateway(self) -> str:
        """The gateway part of its keys: its group (filled in by ``GatewaySettings``)."""
        return self.group or self.kind

    @property
    def session_id_text(self) -> str:
        """QuickFIX's SessionID string: ``BeginString:Sender->Target``."""
        return f"{self.begin_string}:{self.sender_comp_id}->{self.target_comp_id}"

    @property
    def store_prefix(self) -> str:
        """QuickFIX FileStore's file name prefix for this session."""
        return f"{self.begin_string}-{self.sender_comp_id}-{self.target_comp_id}"

    def key(self, namespace: str) -> SessionKey:
        return _session_key(namespace, self.gateway, self.name)


# Asked for on every message; a SessionKey checks its parts when it is made.
_session_key = functools.lru_cache(maxsize=4096)(SessionKey)


class PartitionEndpoint(RedisEndpoint):
    """Where one matching partition's command stream lives (e.g. Sentinel group matching-pN)."""

    index: int = Field(ge=0)


def short_linger(value: float, info: ValidationInfo) -> float:
    """A linger (matching/linger.py) within ``MAX_LINGER_S``: longer would be a misconfiguration."""
    if value > MAX_LINGER_S:
        raise ValueError(f"{info.field_name} {value * 1000:g}ms is longer than {MAX_LINGER_S * 1000:g}ms: it "
                         "pauses the order path after every small batch (write e.g. 1ms, or 0ms for none)")
    return value


class MatchingLink(BaseModel):
    """``[matching]``: how the gateway reaches the cells and prices the instruments."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    partition_count: int = Field(2, ge=1)
    instruments: Path = ROOT / "config" / "instruments.toml"
    idempotency_window: Duration = "24h"  # type: ignore[assignment]
    # Retention (docs/architecture.md): a session's delivered-event records and the views of its closed orders;
    # acknowledged entries of the gateway's inbox streams.
    delivery_retention: Duration = "168h"  # type: ignore[assignment]  # 7 days
    # The entries are already messages in the session store; kept a little while for inspection. Each
    # request leaves ~0.9 KB in the two inboxes (order entry, drop copy): an hour at 400 requests/s
    # was 1.3 GB of Valkey, forked and rewritten with every AOF rewrite (docs/benchmarks.md).
    inbox_retention: Duration = "5m"  # type: ignore[assignment]
    retention_interval: Duration = "60s"  # type: ignore[assignment]  # how often the gateway's retention pass runs
    partition: list[PartitionEndpoint] = Field(default_factory=list)  # default: the session store's datastore
    # How commands reach the cells and events come back (docs/architecture.md, transports). rabbitmq: commands
    # to the quorum queues matching:commands.pN, events from the topic exchange through one
    # queue per gateway kind into the inbox streams. The password never sits in the URL.
    transport: Literal["redis-streams", "rabbitmq"] = "redis-streams"
    # For the cells `fixgw up` starts (docs/architecture.md, the order path): each event appended to its
    # inboxes in the conductor's commit ("direct"), or relayed by the outbox worker ("outbox",
    # seed 000's relay). The rabbitmq transport always relays.
    inbox_delivery: Literal["direct", "outbox"] = "direct"
    # For the cells `fixgw up` starts (MATCHING_BATCH_LINGER_MS): the conductor's and the outbox's
    # pause after a small batch (matching/linger.py), as [gateway] batch_linger and dispatch_linger are
    # the gateway's. Together they set what an order costs against how long it waits
    # (docs/decisions/2026-12-08-lingers-trade-cpu-for-latency.md).
    batch_linger: Duration = "1ms"  # type: ignore[assignment]
    amqp_url: str | None = None  # amqp://user@host:5672/vhost
    amqp_password_env: str | None = None  # the environment variable holding the password
    amqp_password_file: Path | None = None  # or a file holding it
    amqp_exchange: str = "matching.events"

    def broker_url(self) -> str:
        """The AMQP URL with its password from the environment or the file (checked at load)."""
        from matching.broker_url import amqp_url_with_password

        assert self.amqp_url is not None
        return amqp_url_with_password(self.amqp_url, self.amqp_password_env,
                                      str(self.amqp_password_file) if self.amqp_password_file else None)

    @field_validator("batch_linger")
    @classmethod
    def _short_linger(cls, value: float, info: ValidationInfo) -> float:
        return short_linger(value, info)

    @model_validator(mode="after")
    def _partitions(self) -> MatchingLink:
        if self.transport == "rabbitmq":
            if not self.amqp_url:
                raise ValueError('transport = "rabbitmq" needs amqp_url (amqp://user@host:5672/vhost)')
            self.broker_url()  # refuses a password in the URL, an unset variable, an unreadable file
        seen = [p.index for p in self.partition]
        if len(set(seen)) != len(seen):
            raise ValueError(f"[[matching.partition]] index repeats: {seen}")
        if self.delivery_retention < self.idempotency_window:
            # A status request within the window must still find the closed order's view.
            raise ValueError(f"delivery_retention ({self.delivery_retention:g}s) must be at least "
                             f"idempotency_window ({self.idempotency_window:g}s)")
        for p in self.partition:
            if p.index >= self.partition_count:
                raise ValueError(f"[[matching.partition]] index {p.index} is outside 0..{self.partition_count - 1}")
        return self

    def endpoint(self, partition: int, default: RedisEndpoint) -> RedisEndpoint:
        for p in self.partition:
            if p.index == partition:
                return p
        return default


class TlsSettings(BaseModel):
    """``[gateway.tls]``: the FIX port speaks TLS only, ended by the front (``front.tls_context``)."""

    model_config = ConfigDict(extra="forbid")

    certificate: Path  # PEM, the server's certificate (chain)
    key: Path  # PEM, its private key
    client_ca: Path | None = None  # PEM CA bundle: when set, clients must present a certificate it signed (mutual TLS)
    min_version: Literal["TLSv1.2", "TLSv1.3"] = "TLSv1.2"

    @model_validator(mode="after")
    def _files(self) -> TlsSettings:
        for name in ("certificate", "key", "client_ca"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"tls.{name}: no such file {path}")
        return self


class GatewaySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)

    mode: Literal["gateway", "at"] = "gateway"
    host: str = "127.0.0.1"
    port: int = Field(9878, ge=0, le=65535)
    http_port: int = Field(9879, ge=0, le=65535)
    sender_comp_id: str = "FIXGW"
    state_dir: Path = Path("var/gateway")  # disposable local FileStore copies, rebuilt from Redis
    # A standby keeps its FileStore copy in step with what the active gateway commits, reading
    # Redis this often (fixgw/warm_copy.py), so that taking over checks the copy and writes only
    # the last moments instead of every stored message; it also tries the lock this often.
    # 0s: no copy is kept, the standby reads every session whole when it takes over.
    standby_poll: Duration = "100ms"  # type: ignore[assignment]
    # At takeover QuickFIX loads, per session, the entries of at least this many of the last
    # stored messages (whole chunks of 1,024); a ResendRequest reaching further back has the rest
    # of that session loaded first (about 0.4 µs a message). 0: every message, at takeover.
    takeover_preload: int = Field(10_000, ge=0)
    dictionaries: Path = DICTIONARIES
    # QuickFIX's message and event log files under state_dir/log (every message in and out, one
    # write and flush each). The outbound messages are in Redis either way: false saves the writes.
    message_log: bool = True
    tls: TlsSettings | None = None  # [gateway.tls]: TLS only on the FIX port (none: plain TCP)
    check_latency: bool = True
    max_latency: int = Field(120, ge=1)
    # This host's clock against the session store's (datastore/clock.py): further apart than this,
    # the sessions are logged out and Logons refused until they agree (a stepped clock stamps
    # SendingTimes the counterparties reject, and theirs are rejected here); 0s: not watched.
    max_clock_skew: Duration = "2s"  # type: ignore[assignment]
    # /ready turns 503 when a QuickFIX callback has run longer than this (a stuck session thread)
    callback_stall_limit: Duration = "10s"  # type: ignore[assignment]
    # a connection whose Logon is not answered this long after it connected is dropped (the
    # front: TLS handshake and Logon included)
    logon_timeout: Duration = "10s"  # type: ignore[assignment]
    # The front (fixgw/front.py): connections waiting to log on, in all and from one address;
    # the largest message (BodyLength) taken from a client, before or after its Logon.
    max_pending_logons: int = Field(256, ge=1)
    max_pending_logons_per_address: int = Field(64, ge=1)
    max_message_size: int = Field(65536, ge=512, le=64 * 2**20)
    # Listening on a non-loopback address with a session that needs neither a password nor a
    # bound certificate is refused at start; this says you mean it (and is logged loudly).
    insecure_allow_unauthenticated_sessions: bool = False
    # Logon authentication: this many refused Logons in a row lock a session for logon_lockout
    # (every Logon refused meanwhile, the right password included); 0: never locked
    logon_lockout_after: int = Field(5, ge=0)
    logon_lockout: Duration = "60s"  # type: ignore[assignment]
    # After an intake cycle that handled more than one request but less than a full batch, pause
    # this long so the next batch grows (matching/linger.py); 0ms: never.
    batch_linger: Duration = "1ms"  # type: ignore[assignment]
    # The same for the event dispatcher, whose entries are weighed without the paced drop
    # copies (docs/decisions/2026-12-07-the-dispatcher-lingers-above-1000-a-second.md).
    dispatch_linger: Duration = "1ms"  # type: ignore[assignment]
    # While order entry is busy, the drop copy's inbox is read at most this often (its reports
    # go out in batches, after the order-entry reports of their cycle); after a quiet moment a
    # copy goes out at once. 0ms: every cycle (fixgw/dispatcher.py).
    drop_copy_every: Duration = "10ms"  # type: ignore[assignment]
    # How a group commit's messages are sent: "native" (fixgw/sendpath.py: sent and checked in
    # C++, the same bytes and numbers; a miss and every other message go through Python as
    # before), "python" (QuickFIX's bindings, each checked in GatewayApplication.toApp), or
    # "auto": native where the extension is built (at install, with a C++ compiler), else python.
    order_path: Literal["auto", "native", "python"] = "auto"
    # The CPUs every thread of the gateway runs on (``affinity.pin_threads``): "auto" = the
    # first CPU this process may use; a list of CPU numbers; [] = wherever the OS puts them.
    # The gateway's threads share one GIL, so they never run Python on two CPUs at once; kept
    # on one, each hand-over of the GIL between them stays on that CPU (docs/benchmarks.md).
    cpu_affinity: Literal["auto"] | list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    session: list[SessionConfig] = Field(default_factory=list)
    # Who may use the admin API on http_port (/admin: fixgw-admin); none: every admin request is
    # refused (`fixgw up` makes one, "local", its token in var/admin-token).
    operator: list[OperatorConfig] = Field(default_factory=list)
    # When every session is open (a session's own `schedule` instead); none: always, never a new period
    schedule: ScheduleSettings | None = None

    def schedule_of(self, session: SessionConfig) -> ScheduleSettings | None:
        return session.schedule or self.schedule

    @field_validator("cpu_affinity")
    @classmethod
    def _distinct_cpus(cls, value: Any) -> Any:
        if isinstance(value, list) and len(set(value)) != len(value):
            raise ValueError(f"cpu_affinity {value} names a CPU twice")
        return value

    @field_validator("batch_linger", "dispatch_linger")
    @classmethod
    def _short_linger(cls, value: float, info: ValidationInfo) -> float:
        return short_linger(value, info)

    @field_validator("drop_copy_every")
    @classmethod
    def _copies_soon(cls, value: float) -> float:
        if value > MAX_COPY_DELAY_S:
            raise ValueError(f"drop_copy_every {value * 1000:g}ms is longer than {MAX_COPY_DELAY_S * 1000:g}ms: a "
                             "drop-copy report would follow its order's by that long (write e.g. 10ms, or 0ms)")
        return value

    @model_validator(mode="after")
    def _sessions(self) -> GatewaySettings:
        if not self.session:
            raise ValueError("at least one [[gateway.session]] is needed")
        bound = [s.name for s in self.session if s.allowed_subjects]
        if bound and (self.tls is None or self.tls.client_ca is None):
            raise ValueError(f"sessions {bound}: allowed_subjects needs [gateway.tls] client_ca (client certificates)")
        open_sessions = [s.name for s in self.session if not s.authenticated]
        if open_sessions and not self.loopback_only and not self.insecure_allow_unauthenticated_sessions:
            raise ValueError(f"host {self.host!r} is reachable from other machines, and sessions {open_sessions} log "
                             "on with their CompIDs alone: give each a password_hash or allowed_subjects, listen on "
                             "127.0.0.1, or set insecure_allow_unauthenticated_sessions = true")
        self.session = [s.with_defaults(self.sender_comp_id) for s in self.session]
        names = [s.name for s in self.session]
        if len(set(names)) != len(names):
            raise ValueError(f"session names repeat: {sorted(n for n in names if names.count(n) > 1)}")
        ids = [s.session_id_text for s in self.session]
        if len(set(ids)) != len(ids):
            raise ValueError("two sessions share BeginString/SenderCompID/TargetCompID")
        for s in self.session:
            SessionKey("x", s.gateway, s.name)  # the name must be usable in a key
        kinds: dict[str, set[str]] = {}
        for s in self.session:
            kinds.setdefault(s.gateway, set()).add(s.kind)
        mixed = sorted(group for group, of in kinds.items() if len(of) > 1)
        if mixed:
            raise ValueError(f"groups {mixed} hold both order-entry and drop-copy sessions: a group is of one kind")
        return self

    @property
    def loopback_only(self) -> bool:
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"

    def groups(self) -> dict[str, str]:
        """The session groups this gateway serves (one lock each), with their kind."""
        return {s.gateway: s.kind for s in sorted(self.session, key=lambda s: s.gateway)}

    def quickfix_settings(self, store_path: Path, engine_port: int | None = None) -> str:
        """QuickFIX's SessionSettings file for these sessions. ``engine_port``: QuickFIX listens
        there, on loopback, behind the front (which owns ``host:port`` and any TLS); None: on
        ``host:port`` itself, in plain TCP (the benchmark's bare acceptor)."""
        full = self.mode == "at"
        dicts = self.dictionaries / "full" if full and (self.dictionaries / "full").is_dir() else self.dictionaries
        lines = [
            "[DEFAULT]", "ConnectionType=acceptor",
            # (QuickFIX/J's setting: QuickFIX's C++ acceptor ignores it and binds every address, so
            # the gateway confines the port to loopback itself: fixgw/engine_port.py)
            f"SocketAcceptHost={self.host if engine_port is None else '127.0.0.1'}",
            f"SocketAcceptPort={self.port if engine_port is None else engine_port}",
            # The schedules are the gateway's (fixgw/schedule.py): QuickFIX never ends a session by
            # the clock, nor resets its copy behind Redis's back.
            f"FileStorePath={store_path}", "NonStopSession=Y", "UseDataDictionary=Y", "ValidateUserDefinedFields=Y",
            f"CheckLatency={'Y' if self.check_latency else 'N'}", f"MaxLatency={self.max_latency}",
            "PersistMessages=Y", "SocketReuseAddress=Y", "SocketNodelay=Y",
            "",
        ]
        for s in self.session:
            lines += ["[SESSION]", f"BeginString={s.begin_string}", f"SenderCompID={s.sender_comp_id}",
                      f"TargetCompID={s.target_comp_id}", f"HeartBtInt={s.heartbeat}",
                      f"ResetOnLogon={'Y' if s.reset_on_logon else 'N'}",
                      f"ResetOnLogout={'Y' if s.reset_on_logout else 'N'}",
                      f"ResetOnDisconnect={'Y' if s.reset_on_disconnect else 'N'}",
                      f"ValidateFieldsHaveValues={'Y' if s.validate_fields_have_values else 'N'}"]
            if s.begin_string == "FIXT.1.1":
                lines += [f"DefaultApplVerID={s.default_appl_ver_id}",
                          f"TransportDataDictionary={dicts / 'FIXT11.xml'}",
                          f"AppDataDictionary={dicts / 'FIX50SP2.xml'}"]
            else:
                lines.append(f"DataDictionary={dicts / (s.begin_string.replace('.', '') + '.xml')}")
            lines.append("")
        return "\n".join(lines)


def load_gateway(path: str | Path, overrides: dict[str, Any] | None = None
                 ) -> tuple[GatewaySettings, SessionStoreSettings, MatchingLink]:
    """The gateway's TOML file: [gateway], [session_store] and [matching], validated."""
    data = read_toml(path)
    table = {**data.get("gateway", {}), **(overrides or {})}
    try:
        gateway = GatewaySettings(**table)
    except ValidationError as exc:
        raise ConfigError(describe(exc, "gateway")) from None
    try:
        matching = MatchingLink(**data.get("matching", {}))
    except ValidationError as exc:
        raise ConfigError(describe(exc, "matching")) from None
    return gateway, load_session_store(data.get("session_store", {})), matching
