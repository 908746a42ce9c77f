"""The demo client's hold on QuickFIX's process-wide session registry: one SessionID, one entry,
erased by whichever session of that SessionID is destroyed."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import quickfix as fix

from fixgw.demo import DemoClient


def test_an_earlier_client_nobody_closed_cannot_take_a_later_clients_session(tmp_path: Path) -> None:
    """An initiator and its application refer to each other: a client dropped without ``close``
    is freed only by the cycle collector, and its session's destruction erases the registry entry
    of its SessionID. Collected before the next client registers, it cannot erase that one's
    (sends would fail with SessionNotFound at a random later collection)."""
    forgotten = DemoClient(tmp_path / "a", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    del forgotten
    client = DemoClient(tmp_path / "b", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    try:
        gc.collect()
        assert fix.Session.lookupSession(client.sid) is not None
    finally:
        client.close()


def test_a_second_live_client_of_one_session_id_is_refused_clearly(tmp_path: Path) -> None:
    first = DemoClient(tmp_path / "a", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    try:
        with pytest.raises(RuntimeError, match="FIX.4.4:CLIENT1->FIXGW is still alive in this process"):
            DemoClient(tmp_path / "b", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    finally:
        first.close()


def test_a_refused_client_freed_later_leaves_a_later_clients_session_registered(tmp_path: Path) -> None:
    """The refused client's remains (held here by its exception, as a failed test's traceback
    would hold them) are freed after a later client of the same SessionID has registered: that
    client's sends still find their session."""
    first = DemoClient(tmp_path / "a", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    try:
        with pytest.raises(RuntimeError) as refused:
            DemoClient(tmp_path / "b", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    finally:
        first.close()
    later = DemoClient(tmp_path / "c", "127.0.0.1", 1, "CLIENT1", "FIXGW")
    try:
        del refused
        gc.collect()
        assert fix.Session.lookupSession(later.sid) is not None
    finally:
        later.close()
