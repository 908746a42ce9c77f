"""Configuration at the edge: seed 004's ``redisSessionStorage`` stanza as ``[session_store]``.

Read from a TOML file, overridden by environment variables (``FIXGW_SESSION_STORE_<NAME>``,
``FIXGW_SESSION_STORE_POOL__<NAME>`` for pool settings). Anything that cannot be honoured
stops startup with a message naming the setting. Secrets never come from the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from datastore.settings import ConfigError, Duration, RedisEndpoint, describe, read_toml


class SessionStoreSettings(BaseSettings, RedisEndpoint):
    """``[session_store]``: seed 004's redisSessionStorage settings, plus the topology."""

    model_config = SettingsConfigDict(
        env_prefix="FIXGW_SESSION_STORE_",
        env_nested_delimiter="__",
        case_sensitive=False,
        extra="forbid",
    )

    namespace: str = "fixgw"
    lockTtl: Duration = "30s"  # type: ignore[assignment]
    lockRenewalInterval: Duration = "10s"  # type: ignore[assignment]
    dispatchBatchSize: int = 256
    replicaAcks: int = Field(0, ge=0)  # WAIT for this many replicas after every write (0 = primary only)
    replicaAckTimeout: Duration = "1s"  # type: ignore[assignment]
    # How long a write or read waits for the datastore to have a primary again (a Sentinel or
    # Cluster failover) before it fails; never longer than the lock stays ours (lockTtl).
    failoverWait: Duration = "20s"  # type: ignore[assignment]
    # New orders are refused, with the reason, while the datastore's used memory is above this
    # share of its maxmemory (datastore/memory.py); 0: never. Not with a Cluster (per node).
    memoryHighWater: float = Field(0.9, ge=0, le=1)

    @model_validator(mode="after")
    def _store_rules(self) -> SessionStoreSettings:
        if self.lockRenewalInterval >= self.lockTtl:
            raise ValueError(
                f"lockRenewalInterval ({self.lockRenewalInterval:g}s) must be shorter than "
                f"lockTtl ({self.lockTtl:g}s)"
            )
        if self.replicaAcks and self.nodes:
            raise ValueError("replicaAcks is supported with standalone and Sentinel, not yet with Cluster")
        if self.replicaAcks and self.replicaAckTimeout >= self.socketTimeout:
            # The WAIT rides in the write's round trip: a socket timeout shorter than it cuts the
            # answer off, and every slow acknowledgement would be a dropped connection and a retry.
            raise ValueError(f"replicaAckTimeout ({self.replicaAckTimeout:g}s) must be shorter than "
                             f"socketTimeout ({self.socketTimeout:g}s): the WAIT's answer arrives within the "
                             "write's socket timeout")
        if self.dispatchBatchSize < 1:
            raise ValueError(f"dispatchBatchSize must be at least 1, got {self.dispatchBatchSize}")
        for bad in "{}/":
            if bad in self.namespace or not self.namespace:
                raise ValueError(f"namespace {self.namespace!r} must be non-empty, without {{ }} or /")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment overrides the file; the file's table arrives as init kwargs.
        return (env_settings, init_settings)


def load_session_store(source: str | Path | dict[str, Any] | None = None) -> SessionStoreSettings:
    """Settings from a TOML file's ``[session_store]`` table (or a dict of it), env on top."""
    if source is None:
        table: dict[str, Any] = {}
    elif isinstance(source, dict):
        table = source
    else:
        table = read_toml(source).get("session_store", {})
    try:
        return SessionStoreSettings(**table)
    except ValidationError as exc:
        raise ConfigError(describe(exc, "session_store")) from None
