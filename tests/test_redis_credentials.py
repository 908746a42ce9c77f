"""A Valkey that requires an ACL user and password (issue 12 item 3): the gateway's session
store and a partition's conductor work with the right credentials; wrong or missing ones stop
startup with a message naming the settings, never a stack trace."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from datastore.connection import check_credentials, connect
from datastore.embedded import free_port, standalone
from datastore.settings import ConfigError
from matching.conductor import Conductor
from matching.config import Durability, load_cell_settings
from matching.contracts import OrderPayload, OrderType, PlaceOrder, Side
from matching.keys import PartitionKeys
from matching.producer import submit
from tests.flows import TEST_INSTRUMENTS
from tests.gateway_helpers import GatewayProc, RawFixClient, parse

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

ACL = {"requirepass": "default-secret", "user": "alice on >alice-secret ~* &* +@all"}


def gateway(tmp: Path, url: str, name: str, store_extra: str, password: str) -> GatewayProc:
    return GatewayProc(tmp, url, name=name, fix_port=free_port(), store_extra=store_extra,
                       env={"TEST_ACL_PW": password}).start()


def test_the_gateway_runs_on_an_acl_user_and_refuses_bad_credentials_clearly(tmp_path: Path) -> None:
    with standalone(**ACL) as server:
        for name, extra, password, said in [
            ("wrong", 'username = "alice"\npasswordEnv = "TEST_ACL_PW"', "nope", "(username, passwordEnv)"),
            ("missing", "", "", "none set: username, passwordEnv or passwordFile"),
        ]:
            gw = gateway(tmp_path, server.url, name, extra, password)
            assert gw.proc is not None and gw.proc.wait(30) == 2, gw.output()
            out = gw.output()
            assert "[session_store]: the datastore refused our credentials" in out and said in out, out
            assert "Traceback" not in out and "nope" not in out
        gw = gateway(tmp_path, server.url, "right", 'username = "alice"\npasswordEnv = "TEST_ACL_PW"',
                     "alice-secret").wait_active(30)
        try:
            c = RawFixClient(gw.fix_port, sender="CLIENT1", seq=1)
            c.send("35=A\x0198=0\x01108=30")
            assert parse(c.read(timeout=10))[35] == b"A"
            c.close()
            as_alice = redis.Redis(port=server.port, username="alice", password="alice-secret")
            assert as_alice.exists("{t/fsg/CLIENT1}/state"), "the session is stored through the ACL user"
            assert "alice-secret" not in gw.output()
        finally:
            gw.stop()


def test_a_partition_conductor_runs_on_an_acl_user(monkeypatch: pytest.MonkeyPatch) -> None:
    with standalone(**ACL) as server:
        monkeypatch.setenv("TEST_ACL_PW", "alice-secret")
        settings = load_cell_settings(redis_url=server.url, redis_username="alice", redis_password_env="TEST_ACL_PW",
                                      partition=0, partition_count=2)
        client = connect(settings.endpoint())
        check_credentials(client, settings.endpoint(), "matching")
        c = Conductor(client, partition=0, partition_count=2, instruments=TEST_INSTRUMENTS,
                      durability=Durability.named("memory"))
        c.boot()
        submit(client, PlaceOrder("acl-1", 0, 0, OrderPayload("o-acl", Side.BUY, OrderType.LIMIT, 1, 200, owner="x")), 2)
        assert c.step(block_ms=100) == 1 and client.xlen(PartitionKeys(0).events) == 1
        monkeypatch.setenv("TEST_ACL_PW", "nope")
        with pytest.raises(ConfigError, match="matching: the datastore refused our credentials"):
            check_credentials(connect(settings.endpoint()), settings.endpoint(), "matching")
