"""The group commit's send path in C++ (``fixgw/_sendpath.cpp``), chosen by ``[gateway]
order_path = "native"``: each committed message sent, and checked against its committed
bytes, without a call into the interpreter (docs/decisions/
2026-12-07-halving-the-cpu-an-order-needs-a-native-order-path.md).

The extension is built at install when a C++ compiler is there (``setup.py``: optional, so an
install without one still succeeds). It uses QuickFIX's own library, which ``import quickfix``
loads with its symbols private to it: they are made global first, then the extension is loaded
against them.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
from types import ModuleType

from datastore.settings import ConfigError

# The QuickFIX release whose headers the extension is compiled against (third_party/quickfix):
# its classes are used across the library's boundary, so the wheel must be that release.
HEADERS = "1.16.0"


def _load() -> tuple[ModuleType | None, str]:
    wheel = importlib.metadata.version("quickfix-tls")
    if not wheel.startswith(HEADERS + "."):
        return None, (f"quickfix-tls {wheel} is not QuickFIX {HEADERS}, whose headers (third_party/quickfix) "
                      "the extension is built against")
    try:
        import _quickfix  # the bindings' library: every QuickFIX symbol the extension uses

        ctypes.CDLL(_quickfix.__file__, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        from . import _sendpath  # type: ignore[attr-defined]
    except (ImportError, OSError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return _sendpath, ""


native, why_not = _load()


def chosen(order_path: str) -> ModuleType | None:
    """The send path ``[gateway] order_path`` asks for: the extension ("native", or "auto" where
    it is built), or None (QuickFIX's bindings). "native" without the extension is refused with
    the reason and what to do."""
    if order_path == "python" or (order_path == "auto" and native is None):
        return None
    if native is None:
        raise ConfigError(f"[gateway] order_path = \"native\": the extension fixgw._sendpath is not built ({why_not}); "
                          "install g++ and the Python headers and reinstall (make), or set order_path = \"auto\"")
    return native


def described(module: ModuleType | None) -> str:
    """What the gateway's start-up line says of its send path."""
    if module is not None:
        return "native (C++)"
    return "python" + (f" (the extension is not built: {why_not})" if native is None else "")
