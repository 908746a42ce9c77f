"""The datastore users run: the machine's Redis 7.0 (127.0.0.1:6379), beside the embedded Valkey 9.

Redis 7.0 has no WAITAOF (7.2+): ``aof-replicated`` must be refused at boot saying so; the
session store, the matching cell in ``memory`` mode and the whole order path must work. These
tests use a database of that server of their own (``redis70_db``: one per test worker) and
empty it afterwards (nothing else of the machine's is touched). Without that server they are
skipped with the reason; the store tests also run on it through the ``endpoint`` fixture's
``redis-7.0`` parameter (conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from datastore.settings import RedisEndpoint
from matching.conductor import BootRefused
from sessionstore import FixedEpoch, OutboundRecord, SessionKey, SessionStore
from tests.cell_helpers import (
    cell_client,
    conductor,
    p0_flow,
    projected,
    reference_events,
    run_until_idle,
    stream_events,
    submit_all,
)
from tests.conftest import SharedRedis, redis70_db, shared_redis_70
from tests.system_helpers import System, summary, wait_reports

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`


@pytest.fixture
def redis70() -> Iterator[SharedRedis]:
    yield from shared_redis_70()


def test_it_is_the_redis_the_machine_provides(redis70: SharedRedis) -> None:
    info = redis70.client().info("server")
    assert str(info["redis_version"]).startswith("7.0."), info["redis_version"]
    assert redis70.url.endswith(f"/{redis70_db()}") and 11 <= redis70_db() <= 15


def test_aof_replicated_is_refused_at_boot_because_redis_70_has_no_waitaof(redis70: SharedRedis) -> None:
    client = cell_client(RedisEndpoint(url=redis70.url))
    with pytest.raises(BootRefused, match=r"aof-replicated refused: the datastore cannot run WAITAOF \(.*unknown command"):
        conductor(client, durability="aof-replicated")


def test_the_cell_matches_as_the_reference_does_on_redis_70(redis70: SharedRedis) -> None:
    client = cell_client(RedisEndpoint(url=redis70.url))
    flow = p0_flow(70, 1200)[:500]
    submit_all(client, flow)
    run_until_idle(conductor(client, batch_size=50))
    assert projected(stream_events(client)) == reference_events(flow)


def test_the_session_store_keeps_messages_and_fences_on_redis_70(redis70: SharedRedis) -> None:
    client = redis70.client()
    session = SessionKey("r70", "fsg", "C1")
    store = SessionStore(client, FixedEpoch(2))
    store.stamp_owner(session)
    store.commit_outbound_many(session, [OutboundRecord(i, 1, b"8", f"8=FIX.4.4\x0134={i}\x01".encode())
                                         for i in range(1, 1030)])
    loaded = store.load(session)
    assert [m.seq_num for m in loaded.messages] == list(range(1, 1030))
    older = SessionStore(client, FixedEpoch(1))
    with pytest.raises(Exception, match="FENCED"):
        older.commit_outbound(session, OutboundRecord(1030, 1, b"8", b"8=FIX.4.4\x0134=1030\x01"))


def test_the_order_flow_end_to_end_on_redis_70(redis70: SharedRedis, tmp_path: Path) -> None:
    system = System(tmp_path, redis70, [redis70, redis70]).start()  # type: ignore[arg-type]
    try:
        c1, c2 = system.client("CLIENT1"), system.client("CLIENT2")
        c1.order("s70", "2", "5", "10.00", symbol="T1")
        wait_reports(c1, "s70", 1)
        c2.order("b70", "1", "5", "10.00", symbol="T1")
        assert summary(wait_reports(c2, "b70", 2)) == [("8", "0", "0"), ("8", "F", "2")]
        assert summary(wait_reports(c1, "s70", 2)) == [("8", "0", "0"), ("8", "F", "2")]
    finally:
        system.stop()
