"""The session store, instrumented for tests against real Valkey."""

from __future__ import annotations

from typing import Any

from sessionstore import SessionStore


class CountedStore(SessionStore):
    """The real store, counting its round trips (each ``write`` is one, of ``len(calls)`` calls)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.writes: list[int] = []
        super().__init__(*args, **kwargs)

    def write(self, calls: list[Any], raise_on_error: bool = True, also_fenced_by: Any = ()) -> list[Any]:
        self.writes.append(len(calls))
        return super().write(calls, raise_on_error, also_fenced_by)
