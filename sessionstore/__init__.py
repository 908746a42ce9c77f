"""Redis/Valkey storage of FIX sessions (seed 004), fenced by the dispatcher lock.

Knows nothing of QuickFIX or matching: the gateway speaks to it in FIX terms.
"""

from .codec import OutboundRecord, SessionState, StoreCorruption
from .connection import connect
from .errors import FencedWrite, NotReplicated, SequenceReuse, StoreError, StoreUnavailable
from .keys import DROP_COPY, ORDER_ENTRY, GatewayKey, SessionKey
from .lock import DispatcherLock
from .settings import ConfigError, RedisEndpoint, SessionStoreSettings, load_session_store
from .store import FixedEpoch, LoadedSession, OrderIndex, SessionStore

__all__ = [
    "ConfigError", "DispatcherLock", "DROP_COPY", "FencedWrite", "FixedEpoch", "GatewayKey",
    "LoadedSession", "NotReplicated", "ORDER_ENTRY", "OrderIndex", "OutboundRecord", "RedisEndpoint", "SequenceReuse",
    "SessionKey", "SessionState", "SessionStore", "SessionStoreSettings", "StoreCorruption",
    "StoreError", "StoreUnavailable", "connect", "load_session_store",
]
