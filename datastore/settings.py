"""Datastore settings every process shares: one Redis/Valkey endpoint (standalone, Sentinel or
Cluster, credentials by reference, pool), addresses written on one line, durations, and the
one-line reading of a validation error. Anything that cannot be honoured stops startup with a
message naming the setting. Secrets never come from a file of settings.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator


class ConfigError(Exception):
    """Configuration that cannot be honoured; the message names the setting."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """``"2s"``, ``"500ms"``, ``"1m"`` → seconds. Bare numbers are refused: the unit matters."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f"duration {value!r} needs a unit: write e.g. 500ms, 2s, 1m")
    if not isinstance(value, str):
        raise ValueError(f"duration must be text such as '2s', got {value!r}")
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"bad duration {value!r}: write e.g. 500ms, 2s, 1m, 1h")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _parse_max_wait(value: Any) -> float | None:
    # Apache Commons Pool's convention, kept from the seed: -1 waits forever.
    if value in (-1, "-1", None):
        return None
    return parse_duration(value)


Duration = Annotated[float, BeforeValidator(parse_duration)]
MaxWait = Annotated[float | None, BeforeValidator(_parse_max_wait)]


class PoolSettings(BaseModel):
    """One pool serves every session of the process (seed 004's pool.* settings)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    maxTotal: int = Field(8, ge=1)
    maxIdle: int = Field(8, ge=0)
    minIdle: int = Field(0, ge=0)
    maxWait: MaxWait = None  # seconds to wait for a free connection; None = forever

    @model_validator(mode="after")
    def _idle_bounds(self) -> PoolSettings:
        if self.minIdle > self.maxIdle:
            raise ValueError(f"pool.minIdle ({self.minIdle}) must not exceed pool.maxIdle ({self.maxIdle})")
        if self.maxIdle > self.maxTotal:
            raise ValueError(f"pool.maxIdle ({self.maxIdle}) must not exceed pool.maxTotal ({self.maxTotal})")
        return self


class RedisEndpoint(BaseModel):
    """Where a Redis/Valkey datastore is and how to talk to it.

    Exactly one topology: ``url`` (standalone), ``sentinels`` + ``sentinelGroup``, or
    ``nodes`` (Cluster seed nodes).
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    url: str | None = None
    nodes: list[str] = Field(default_factory=list)
    sentinels: list[str] = Field(default_factory=list)
    sentinelGroup: str | None = None
    username: str | None = None  # ACL user (Redis 6+/Valkey); none = the default user
    passwordEnv: str | None = None
    passwordFile: Path | None = None
    connectionTimeout: Duration = "2s"  # type: ignore[assignment]  # parsed like the file's text
    socketTimeout: Duration = "2s"  # type: ignore[assignment]
    maxAttempts: int = Field(5, ge=1)
    pool: PoolSettings = Field(default_factory=PoolSettings)

    @model_validator(mode="before")
    @classmethod
    def _no_plain_password(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("password") not in (None, ""):
            raise ValueError(
                "password: a plain-text password in configuration is refused; "
                "set passwordEnv (name of an environment variable) or passwordFile instead"
            )
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "password"}
        return data

    @model_validator(mode="after")
    def _one_topology(self) -> RedisEndpoint:
        if bool(self.sentinels) != bool(self.sentinelGroup):
            raise ValueError("sentinels and sentinelGroup must be set together")
        chosen = [name for name, on in (("url", self.url), ("nodes", self.nodes), ("sentinels", self.sentinels)) if on]
        if len(chosen) > 1:
            raise ValueError(f"choose one topology, not {' and '.join(chosen)}")
        if not chosen:
            raise ValueError("no datastore: set url, nodes (cluster) or sentinels + sentinelGroup")
        if self.url and urlsplit(self.url).password:
            # A URL is printed, logged and stored (the partition map, relocation markers): never a secret.
            raise ValueError("url must not carry a password: set passwordEnv (name of an environment variable) or "
                             "passwordFile instead")
        for node in [*self.nodes, *self.sentinels]:
            host, _, port = node.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"node {node!r} must be host:port")
        return self

    @property
    def topology(self) -> str:
        return "cluster" if self.nodes else "sentinel" if self.sentinels else "standalone"

    @property
    def address(self) -> str:
        """The datastore in one line (``parse_address``'s forms): what a CLI flag, the partition
        map and a relocation marker hold. Credentials are never part of it."""
        if self.sentinels:
            return f"sentinel://{','.join(self.sentinels)}/{self.sentinelGroup}"
        if self.nodes:
            return f"cluster://{','.join(self.nodes)}"
        assert self.url is not None
        return self.url

    def at(self, address: str) -> RedisEndpoint:
        """The same client settings (credentials, timeouts, pool) for the datastore at ``address``."""
        return self.model_copy(update={"url": None, "nodes": [], "sentinels": [], "sentinelGroup": None,
                                       **parse_address(address)})

    def resolve_password(self) -> str | None:
        """The password from the named environment variable or secret file, if any."""
        if self.passwordEnv:
            value = os.environ.get(self.passwordEnv)
            if value is None:
                raise ConfigError(f"passwordEnv: environment variable {self.passwordEnv} is not set")
            return value
        if self.passwordFile:
            try:
                return self.passwordFile.read_text().strip()
            except OSError as exc:
                raise ConfigError(f"passwordFile: cannot read {self.passwordFile}: {exc.strerror}") from exc
        return None


ADDRESS_FORMS = ("redis://host:port/db", "rediss://host:port/db", "unix:///path/to.sock",
                 "sentinel://host:port,host:port/group", "cluster://host:port,host:port")


def parse_address(address: str) -> dict[str, Any]:
    """A datastore named in one line → the topology fields of a ``RedisEndpoint``: a URL, a
    Sentinel group (``sentinel://h1:26379,h2:26379/group``) or Cluster seeds
    (``cluster://n1:6379,n2:6379``). Raises ConfigError naming the forms it accepts."""
    text = address.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ConfigError(f"datastore address {address!r}: write one of {', '.join(ADDRESS_FORMS)}")
    if scheme in ("redis", "rediss", "unix"):
        return {"url": text}
    if scheme == "sentinel":
        hosts, slash, group = rest.partition("/")
        nodes = [h.strip() for h in hosts.split(",") if h.strip()]
        if not slash or not group or "/" in group or not nodes:
            raise ConfigError(f"datastore address {address!r}: a Sentinel group is sentinel://host:port,host:port/group")
        _check_nodes(nodes, address)
        return {"sentinels": nodes, "sentinelGroup": group}
    if scheme == "cluster":
        nodes = [h.strip() for h in rest.rstrip("/").split(",") if h.strip()]
        if not nodes:
            raise ConfigError(f"datastore address {address!r}: Cluster seeds are cluster://host:port,host:port")
        _check_nodes(nodes, address)
        return {"nodes": nodes}
    raise ConfigError(f"datastore address {address!r}: unknown scheme {scheme!r}; write one of {', '.join(ADDRESS_FORMS)}")


def _check_nodes(nodes: list[str], address: str) -> None:
    for node in nodes:
        host, _, port = node.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"datastore address {address!r}: {node!r} must be host:port")


def endpoint_at(address: str, **settings: Any) -> RedisEndpoint:
    """A ``RedisEndpoint`` for ``address`` (``parse_address``) with further client settings."""
    try:
        return RedisEndpoint(**parse_address(address), **settings)
    except ValidationError as exc:
        raise ConfigError(describe(exc, address)) from None


def describe(error: ValidationError, section: str) -> str:
    """One line per problem, each naming the setting as the operator wrote it."""
    lines = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"])
        setting = f"[{section}] {where}" if where else f"[{section}]"
        msg = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            msg = "unknown setting"
        lines.append(f"{setting}: {msg}")
    return "; ".join(lines)


def read_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file {path} not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"configuration file {path}: {exc}") from exc
