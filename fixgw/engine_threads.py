"""Python's state for QuickFIX's threads, kept between their callbacks.

QuickFIX's threads (one per connection) are not Python's: the bindings call into Python with
``PyGILState_Ensure`` and leave with ``PyGILState_Release``, and on a thread Python did not
start the last release deletes the thread's Python state. So every callback made it anew: an
``mmap`` and a ``munmap`` of its frame stack, a ``gettid``, fresh thread-locals (strace of a
session thread at 400 requests/s: one of each per inbound message).

``keep()``, called in a callback, takes one more hold of that state, so the bindings' release
no longer deletes it; ``let_go()``, in the callback that ends the connection's work on that
thread (the session's logout, on its own thread), gives the hold back, and the state is
deleted with that callback's release as before. A connection whose thread ends without such a
callback on it leaves its state (a few kilobytes) until the process ends.
"""

from __future__ import annotations

import ctypes
import threading

_api = ctypes.pythonapi
_api.PyGILState_Ensure.restype = ctypes.c_int
_api.PyGILState_Release.argtypes = [ctypes.c_int]
_api.PyGILState_Release.restype = None

_held = threading.local()  # per thread: the hold's state, while kept


def keep() -> None:
    """(In a callback, holding the GIL.) Keep this thread's Python state after it returns."""
    if getattr(_held, "state", None) is None:
        _held.state = _api.PyGILState_Ensure()  # (the GIL is held: a count, no wait)


def let_go() -> None:
    """(In a callback.) Give this thread's hold back, if it took one."""
    state = getattr(_held, "state", None)
    if state is not None:
        _held.state = None
        _api.PyGILState_Release(state)
