"""Redis/Valkey storage of FIX sessions (seed 004), fenced by the dispatcher lock.

Knows nothing of QuickFIX or matching: the gateway speaks to it in FIX terms.
"""


from .codec import OutboundRecord, SessionState, StoreCorruption
from .errors import FencedWrite, NotReplicated, PartitionRelocating, SequenceReuse, StoreError, StoreUnavailable
from .keys import DROP_COPY, ORDER_ENTRY, GatewayKey, SessionKey
from .lock import DispatcherLock
from .settings import SessionStoreSettings, load_session_store
from .store import FixedEpoch, LoadedSession, OrderIndex, SessionStore

__all__ = [
    "DispatcherLock", "DROP_COPY", "FencedWrite", "FixedEpoch", "GatewayKey",
    "LoadedSession", "NotReplicated", "PartitionRelocating", "ORDER_ENTRY", "OrderIndex", "OutboundRecord", "SequenceReuse",
    "SessionKey", "SessionState", "SessionStore", "SessionStoreSettings", "StoreCorruption",
    "StoreError", "StoreUnavailable", "load_session_store",
]
