"""``fixgw-cell relocate``: a partition moves to another datastore under a live order flow, and
nothing is lost, duplicated or matched differently (the reference matcher); an interrupted
relocation refuses orders clearly and rolls back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from datastore.connection import text
from datastore.embedded import standalone
from datastore.settings import RedisEndpoint
from matching.contracts import Command, parse_command, parse_event
from matching.instruments import InstrumentTable
from matching.keys import PartitionKeys
from matching.outbox import GROUP as OUTBOX_GROUP
from matching.partition_copy import key_digest, key_digests, partition_key_names
from matching.relocation import Relocation
from sessionstore.keys import partition_map
from tests.cell_helpers import (
    cell_client,
    conductor,
    projected,
    reference_events,
    run_until_idle,
    stream_events,
    submit_all,
)
from tests.flows import TEST_INSTRUMENTS, random_flow
from tests.gateway_helpers import ROOT, wait_until
from tests.reference_matcher import ReferenceMatcher, project
from tests.system_helpers import CellProc, System, broker_missing, rabbitmq_vhost, reports

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

MOVED = 1  # T10 is pair 19 and T12 pair 21: partition 1 of 2; T11 (pair 20) stays on partition 0
P1 = PartitionKeys(MOVED)


def relocate(system: System, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fixgw.cell_cli", "relocate", "--config", str(system.gateway.config),
                           "--partition", str(MOVED), *args], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


class Supervisor:
    """Starts a cell process again whenever it exits, as systemd or Kubernetes would."""

    def __init__(self, cells: list[CellProc]) -> None:
        self.cells = cells
        self.restarts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            for cell in self.cells:
                if cell.proc is not None and cell.proc.poll() is not None:
                    self.restarts[cell.args[3]] += 1
                    cell.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def new_reports(client, clordid: str) -> list[dict[int, str]]:  # type: ignore[no-untyped-def]
    return [r for r in reports(client, clordid) if r.get(11) == clordid and r[35] == "8"]


def test_a_partition_moves_to_another_datastore_under_a_live_flow_and_trades_as_the_reference(tmp_path: Path) -> None:
    with standalone() as store, standalone() as source, standalone() as target:
        system = System(tmp_path, store, [source, source]).start()
        cells = [system.cells[("conductor", MOVED)], system.cells[("outbox", MOVED)]]
        supervisor = Supervisor(cells)
        try:
            c1, c2 = system.client("CLIENT1"), system.client("CLIENT2")
            for i in range(5):  # resting before: they must still be in the book after the move
                c1.order(f"rest{i}", "2", "2", "12.00", symbol="T10")
            assert c1.wait(lambda: all(new_reports(c1, f"rest{i}") for i in range(5)), 20)

            sent: list[tuple[object, str]] = []
            stop = threading.Event()

            def flow() -> None:  # a slow crossing flow: one sell and one buy every 40 ms
                i = 0
                while not stop.is_set() and i < 500:
                    c1.order(f"fs{i}", "2", "1", "10.00", symbol="T10")
                    c2.order(f"fb{i}", "1", "1", "10.00", symbol="T10")
                    sent.extend([(c1, f"fs{i}"), (c2, f"fb{i}")])
                    i += 1
                    time.sleep(0.04)

            flowing = threading.Thread(target=flow, daemon=True)
            flowing.start()
            time.sleep(0.5)

            plan = relocate(system, "--to", target.url, "--dry-run")
            assert plan.returncode == 0, plan.stderr
            assert f"partition {MOVED}: {source.url} → {target.url}" in plan.stdout
            assert "target: reachable, holds nothing of this partition" in plan.stdout
            assert not source.client().exists(P1.relocation), "a dry run changes nothing"

            done = relocate(system, "--to", target.url, "--timeout", "30", "--wait-cells", "30")
            assert done.returncode == 0, done.stdout + done.stderr
            for step in ("freeze:", "drain:", "stop:", "copy:", "verify:", "switch:", "cells:"):
                assert step in done.stdout, done.stdout
            time.sleep(1.0)  # the flow goes on against the new datastore
            stop.set()
            flowing.join(10)

            c2.order("sweep", "1", "10", "12.00", symbol="T10")  # takes what rested before the move
            c1.order("p0after", "2", "1", "10.00", symbol="T11")  # the other partition never moved

            # Every order of the flow was accepted (held while its partition moved, never refused) and filled.
            def all_filled() -> bool:
                return all(any(r.get(39) == "2" for r in new_reports(c, cl)) for c, cl in sent)

            assert c1.wait(all_filled, 60), [cl for c, cl in sent
                                              if not any(r.get(39) == "2" for r in new_reports(c, cl))][:10]
            assert c2.wait(lambda: any(r.get(39) == "2" and r.get(14) == "10" for r in new_reports(c2, "sweep")), 30)
            assert c1.wait(lambda: bool(new_reports(c1, "p0after")), 20)
            assert not any(r.get(39) == "8" for c, cl in sent for r in new_reports(c, cl)), "nothing refused"
            for c in (c1, c2):  # every report once
                ids = Counter(r[17] for r in reports(c) if r[35] == "8")
                assert max(ids.values()) == 1, ids.most_common(3)

            # The move itself: the map, the markers, the cells.
            assert text(store.client().hget(partition_map("e2e"), str(MOVED))) == target.url
            assert text(source.client().hget(P1.relocation, "state")) == "moved"
            assert not target.client().exists(P1.relocation)
            assert target.client().exists(P1.conductor_lease) and not source.client().exists(P1.conductor_lease)
            assert supervisor.restarts["conductor"] >= 1 and supervisor.restarts["outbox"] >= 1

            # Every command of the partition, before, during and after, was applied once, in order, as the
            # reference matcher applies it: its events equal the reference's.
            commands: list[Command] = []
            seen: set[str] = set()
            for _, fields in target.client().xrange(P1.commands):
                cmd = parse_command(fields[b"command"], 2)
                if cmd.command_id not in seen:  # a held command appended twice is applied once
                    seen.add(cmd.command_id)
                    commands.append(cmd)
            assert len(commands) == 5 + len(sent) + 1
            ref = ReferenceMatcher(InstrumentTable.load(system.instruments).by_pair, "cancel-taker")
            expected = [e for cmd in commands for e in ref.apply(cmd)]
            events: dict[str, tuple[tuple[int, int], object]] = {}
            for _, fields in store.client().xrange("{e2e/fsg}/inbox"):
                event = parse_event(fields[b"event"])
                if event.partition == MOVED:
                    ms, _, seq = text(fields[b"x-partition-offset"]).partition("-")
                    events.setdefault(event.event_id, ((int(ms), int(seq)), event.payload))
            got = [project(p) for _, p in sorted(events.values(), key=lambda x: x[0])]  # type: ignore[arg-type]
            assert got == expected
        finally:
            supervisor.stop()
            system.stop()


def test_an_interrupted_relocation_refuses_orders_clearly_and_rolls_back(tmp_path: Path) -> None:
    with standalone() as server, standalone() as target:
        system = System(tmp_path, server, [server, server]).start()  # partitions colocated with the sessions
        try:
            c1 = system.client("CLIENT1")
            c1.order("before", "2", "1", "12.00", symbol="T12")
            assert c1.wait(lambda: bool(new_reports(c1, "before")), 20)
            system.cells[("conductor", MOVED)].stop()  # the drain cannot finish without it
            c1.order("stuck", "2", "1", "12.00", symbol="T12")  # appended, not processed
            wait_until(lambda: server.client().xlen(P1.commands) >= 2, "the append", 10)

            cut = relocate(system, "--to", target.url, "--timeout", "2")
            assert cut.returncode == 1
            assert "not done after 2 s" in cut.stderr and "--rollback" in cut.stderr
            assert text(server.client().hget(P1.relocation, "state")) == "frozen"

            # Frozen: an order for the partition gets a clear temporary reject, nothing claimed.
            c1.order("during", "2", "1", "12.00", symbol="T12")
            assert c1.wait(lambda: bool(new_reports(c1, "during")), 20)
            refused = new_reports(c1, "during")[0]
            assert (refused[39], refused[103]) == ("8", "2")
            assert "being moved to another datastore" in refused[58] and "send the request again" in refused[58]
            assert not server.client().exists("{e2e/fsg/CLIENT1}/clordid:during")
            c1.order("other", "2", "1", "10.00", symbol="T11")  # partition 0 is not affected
            assert c1.wait(lambda: any(r.get(150) == "0" for r in new_reports(c1, "other")), 20)

            back = relocate(system, "--to", target.url, "--rollback")
            assert back.returncode == 0, back.stderr
            assert not server.client().exists(P1.relocation)
            system.cells[("conductor", MOVED)].start()
            assert c1.wait(lambda: any(r.get(150) == "0" for r in new_reports(c1, "stuck")), 30)
            c1.order("during", "2", "1", "12.00", symbol="T12")  # the same ClOrdID, sent again: a new order
            assert c1.wait(lambda: any(r.get(150) == "0" for r in new_reports(c1, "during")), 30)
            assert not target.client().keys("matching:*"), "nothing was copied"
        finally:
            system.stop()


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("step,then", [("_drain", "again"), ("_stop_cells", "again"), ("_copy", "again"),
                                       ("_copy", "rollback"), ("_verify", "again"), ("_switch", "again")])
def test_a_relocation_interrupted_at_any_step_finishes_when_run_again_or_rolls_back(
        step: str, then: str, monkeypatch: pytest.MonkeyPatch) -> None:
    flow = random_flow(7, 300)
    with standalone() as source_server, standalone() as target_server, standalone() as control_server:
        source, target, control = (cell_client(RedisEndpoint(url=s.url))
                                   for s in (source_server, target_server, control_server))
        c = conductor(source)
        submit_all(source, flow)
        run_until_idle(c)
        c.release()  # its cells are stopped: this test is about the procedure's steps
        source.xgroup_create(PartitionKeys(0).events, OUTBOX_GROUP, "$", mkstream=True)
        said: list[str] = []
        relocation = Relocation(0, source, target, control, "e2e", source_server.url, target_server.url,
                                sorted(TEST_INSTRUMENTS), say=said.append, timeout_s=5)
        original = getattr(Relocation, step)

        def interrupted(self: Relocation, *args: object, **kwargs: object) -> None:
            if step == "_copy":  # half the keys copied, then the process dies
                names = partition_key_names(self.source, self.keys)
                self.target.hset(self.keys.relocation, mapping={"state": "incoming", "from": self.source_address})
                for name in names[: len(names) // 2]:
                    self.target.restore(name, 0, self.source.dump(name), replace=True)
            else:
                original(self, *args, **kwargs)
            raise Interrupted(step)

        monkeypatch.setattr(Relocation, step, interrupted)
        with pytest.raises(Interrupted):
            relocation.run()
        monkeypatch.setattr(Relocation, step, original)
        keys = PartitionKeys(0)
        if step != "_switch":
            assert control.hget(partition_map("e2e"), "0") is None, "not switched before the switch"
        if step == "_copy":  # the first copy is the pre-copy: before the freeze, the partition still serves
            assert not source.exists(keys.relocation), "not frozen by a pre-copy that stopped"
        elif step != "_switch":
            assert source.exists(keys.relocation), "still frozen: nothing appends meanwhile"
        if then == "rollback":
            relocation.rollback()
            assert not partition_key_names(target, keys) and not target.exists(keys.relocation)
            assert not source.exists(keys.relocation)
            return
        relocation.run()
        assert text(control.hget(partition_map("e2e"), "0")) == target_server.url
        assert text(source.hget(keys.relocation, "state")) == "moved" and not target.exists(keys.relocation)
        names = partition_key_names(source, keys)
        assert names == partition_key_names(target, keys)
        assert all(key_digest(source, n) == key_digest(target, n) for n in names)
        assert key_digests(target, names) == {n: key_digest(target, n) for n in names}, "pipelined = one by one"
        # The partition carries on from the target as it would have on the source.
        more = random_flow(8, 100)
        moved = conductor(target)
        submit_all(target, more)
        run_until_idle(moved)
        assert projected(stream_events(target)) == reference_events(flow + more)


def test_relocate_refuses_a_password_in_the_target_address(capsys: pytest.CaptureFixture[str]) -> None:
    from fixgw.relocate_cli import main

    assert main(["--config", "unused.toml", "--partition", "0", "--to", "redis://:secret@10.0.0.7:6379/0"]) == 2
    err = capsys.readouterr().err
    assert "--to must not carry a password" in err and "secret" not in err


@pytest.fixture(params=["direct", "outbox", "rabbitmq"])
def delivery(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """Each way the shipped system can carry commands and events, as the TOML lines that choose
    it: the default (direct delivery), the outbox's relay, and the RabbitMQ transport (a virtual
    host of the test's own on the machine's broker)."""
    if request.param == "direct":
        yield "direct", ""
    elif request.param == "outbox":
        yield "outbox", 'inbox_delivery = "outbox"\n'
    else:
        missing = broker_missing("127.0.0.1", 5672)
        if missing:
            if os.environ.get("FIXGW_REQUIRE_RABBITMQ") == "1":
                pytest.fail(f"FIXGW_REQUIRE_RABBITMQ=1 but {missing}")
            pytest.skip(f"{missing}: the RabbitMQ transport needs the broker")
        with rabbitmq_vhost("fixgw-relocate") as broker:
            yield "rabbitmq", (f'transport = "rabbitmq"\namqp_url = "{broker.url}"\n'
                               f'amqp_password_env = "{broker.PASSWORD_ENV}"\n')


def test_a_partition_of_a_running_fixgw_up_system_moves_in_each_delivery_mode(
        tmp_path: Path, delivery: tuple[str, str]) -> None:
    """`make run`'s own system (`fixgw up`, the shipped config/fixgw.toml, the partitions on the
    session store's embedded Valkey) in each delivery mode, and `fixgw-cell relocate` as a user
    runs it, to a second Valkey with the same password, while two traders cross orders on BTC-USD
    (pair 1: partition 1). Every order is answered once — accepted, or (Redis streams) refused
    with the temporary reject while the partition is frozen; over RabbitMQ none is refused, they
    wait in the queue — orders resting before the move fill after it, the frozen window is
    printed, and the partition's events equal the reference matcher's."""
    import shutil
    import signal

    from datastore.embedded import free_port
    from fixgw.demo import DemoClient
    from tests.gateway_helpers import http_status

    shutil.copytree(ROOT / "config", tmp_path / "config")
    vport, fport, hport = free_port(), free_port(), free_port()
    config = tmp_path / "config" / "fixgw.toml"
    mode, lines = delivery
    config.write_text(config.read_text().replace("6479", str(vport)).replace("[matching]\n", "[matching]\n" + lines))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    up = subprocess.Popen([sys.executable, "-m", "fixgw.cli", "up", "--config", "config/fixgw.toml", "--fix-port",
                           str(fport), "--http-port", str(hport)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                          stderr=subprocess.STDOUT, env=env, start_new_session=True)
    clients: list[DemoClient] = []
    try:
        wait_until(lambda: http_status(hport) == 200, "fixgw up to be ready", 60)
        password = (tmp_path / "var" / "valkey" / "password").read_text().strip()
        store = __import__("redis").Redis(port=vport, password=password)
        with standalone(requirepass=password) as target:
            c1, c2 = (DemoClient(tmp_path / "clients", "127.0.0.1", fport, name, "FIXGW") for name in ("CLIENT1", "CLIENT2"))
            clients += [c1, c2]
            for c in clients:
                c.initiator.start()
                assert c.wait(lambda c=c: c.logged_on, 20)
            for i in range(5):  # resting before: they must still be in the book after the move
                c1.order(f"rest{i}", "2", "0.01", "50000.00", symbol="BTC-USD")
            assert c1.wait(lambda: all(new_reports(c1, f"rest{i}") for i in range(5)), 20)
            sent: list[tuple[DemoClient, str]] = []
            stop = threading.Event()

            def flow() -> None:
                i = 0
                while not stop.is_set() and i < 500:
                    c1.order(f"fs{i}", "2", "0.001", "40000.00", symbol="BTC-USD")
                    c2.order(f"fb{i}", "1", "0.001", "40000.00", symbol="BTC-USD")
                    sent.extend([(c1, f"fs{i}"), (c2, f"fb{i}")])
                    i += 1
                    time.sleep(0.04)

            flowing = threading.Thread(target=flow, daemon=True)
            flowing.start()
            time.sleep(0.5)
            fixgw_cell = str(Path(sys.executable).parent / "fixgw-cell")  # the installed console script
            done = subprocess.run([fixgw_cell, "relocate", "--config", "config/fixgw.toml", "--partition", "1",
                                   "--to", target.url, "--timeout", "30", "--wait-cells", "30"], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120, env=env)
            assert done.returncode == 0, done.stdout + done.stderr
            window = next(line for line in done.stdout.splitlines() if line.startswith("frozen for"))
            print(f"fixgw up, {mode}: {window}")
            time.sleep(1.0)  # the flow goes on against the new datastore
            stop.set()
            flowing.join(10)
            c2.order("sweep", "1", "0.05", "50000.00", symbol="BTC-USD")  # takes what rested before the move

            def answered(c: DemoClient, clordid: str) -> list[dict[int, str]]:
                return [r for r in new_reports(c, clordid) if r.get(150) in ("0", "8")]

            assert c1.wait(lambda: all(answered(c, cl) for c, cl in sent), 60), \
                [cl for c, cl in sent if not answered(c, cl)][:10]
            time.sleep(0.5)
            assert all(len(answered(c, cl)) == 1 for c, cl in sent), "every order answered once"
            refused = [cl for c, cl in sent if answered(c, cl)[0].get(150) == "8"]
            assert all(answered(c, cl)[0].get(103) == "2" for c, cl in sent if cl in refused), "temporary rejects only"
            assert c2.wait(lambda: any(r.get(39) == "2" and r.get(14) == "0.05" for r in new_reports(c2, "sweep")), 30)
            assert text(store.hget(partition_map("fixgw"), "1")) == target.url
            if mode == "rabbitmq":
                # Nothing refused: what came during the freeze waited in the queue. The commands left
                # no stream to replay through the reference matcher; each pair of crossing orders
                # fills exactly once instead, and nothing rests at 40000 (the sweep took only the 0.05).
                assert not refused, f"{len(refused)} orders refused over RabbitMQ"

                def fills(c: DemoClient, clordid: str) -> list[dict[int, str]]:
                    return [r for r in new_reports(c, clordid) if r.get(39) == "2"]

                assert c1.wait(lambda: all(fills(c, cl) for c, cl in sent), 30), \
                    [cl for c, cl in sent if not fills(c, cl)][:10]
                assert all(len(fills(c, cl)) == 1 for c, cl in sent), "each order filled once"
                return

            commands = []
            seen: set[str] = set()
            for _, fields in target.client().xrange(P1.commands):
                cmd = parse_command(fields[b"command"], 2)
                if cmd.command_id not in seen:
                    seen.add(cmd.command_id)
                    commands.append(cmd)
            assert len(commands) == 5 + len(sent) - len(refused) + 1
            ref = ReferenceMatcher(InstrumentTable.load(ROOT / "config" / "instruments.toml").by_pair, "cancel-taker")
            expected = [e for cmd in commands for e in ref.apply(cmd)]
            events: dict[str, tuple[tuple[int, int], object]] = {}
            for _, fields in store.xrange("{fixgw/fsg}/inbox"):
                event = parse_event(fields[b"event"])
                if event.partition == MOVED:
                    ms, _, seq = text(fields[b"x-partition-offset"]).partition("-")
                    events.setdefault(event.event_id, ((int(ms), int(seq)), event.payload))
            got = [project(p) for _, p in sorted(events.values(), key=lambda x: x[0])]  # type: ignore[arg-type]
            assert got == expected
    finally:
        for c in clients:
            c.close()
        up.send_signal(signal.SIGINT)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
