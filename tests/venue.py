"""A venue's steady order flow and the guarantees checked from outside the processes, shared by
the datastore-failover tests and the fault harness (``tests/test_network_faults.py``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from fixgw.demo import DemoClient
from matching.contracts import Command, parse_command, parse_event
from matching.instruments import InstrumentTable
from matching.keys import PartitionKeys
from sessionstore.keys import GatewayKey
from tests.gateway_helpers import http_json
from tests.reference_matcher import ReferenceMatcher, project
from tests.system_helpers import reports

RATE = 60  # requests per second, as a venue's test harness sends them
SYMBOLS = ("T1", "T2")  # pairs 10 and 11: partitions 0 and 1


class Flow:
    """Two traders sending, in turn, a crossing pair (two fills), a resting sell then its
    cancel, a resting buy then its replace and the replacement's cancel: eight requests a
    round, paced at ``RATE``. Remembers what each request was."""

    def __init__(self, c1: DemoClient, c2: DemoClient) -> None:
        self.c1, self.c2 = c1, c2
        self.sent: dict[str, tuple[DemoClient, str]] = {}  # ClOrdID → (client, "D" | "F" | "G")
        self.sent_at: dict[str, float] = {}  # ClOrdID → when it was sent (time.monotonic)
        self.lock = threading.Lock()  # other threads read what was sent while the flow runs
        self.stop = threading.Event()
        self.rounds = 0
        self.thread = threading.Thread(target=self._run, name="flow", daemon=True)

    def _run(self) -> None:
        gap = 1.0 / RATE
        due = time.monotonic()
        while not self.stop.is_set():
            for step in self._round(self.rounds):
                due += gap
                time.sleep(max(0.0, due - time.monotonic()))
                step()
            self.rounds += 1

    def sent_since(self, start: float, end: float = float("inf")) -> list[tuple[str, str, float]]:
        """(ClOrdID, kind, sent at) of the requests sent from ``start`` until ``end``."""
        with self.lock:
            return [(c, self.sent[c][1], at) for c, at in self.sent_at.items() if start <= at < end]

    def _round(self, i: int) -> list[Callable[[], None]]:
        c1, c2, sym = self.c1, self.c2, SYMBOLS[i % 2]

        def order(c: DemoClient, clordid: str, side: str, price: str) -> Callable[[], None]:
            def send() -> None:
                with self.lock:
                    self.sent[clordid] = (c, "D")
                    self.sent_at[clordid] = time.monotonic()
                c.order(clordid, side, "1", price, symbol=sym)
            return send

        def cancel(c: DemoClient, clordid: str, orig: str, side: str) -> Callable[[], None]:
            def send() -> None:
                with self.lock:
                    self.sent[clordid] = (c, "F")
                    self.sent_at[clordid] = time.monotonic()
                c.cancel(clordid, orig, side, symbol=sym)
            return send

        def replace(c: DemoClient, clordid: str, orig: str) -> Callable[[], None]:
            def send() -> None:
                with self.lock:
                    self.sent[clordid] = (c, "G")
                    self.sent_at[clordid] = time.monotonic()
                c.replace(clordid, orig, "1", "1", "6.00", symbol=sym)
            return send

        return [order(c1, f"s{i}", "2", "10.00"), order(c2, f"b{i}", "1", "10.00"),
                order(c1, f"r{i}", "2", "50.00"), cancel(c1, f"x{i}", f"r{i}", "2"),
                order(c2, f"q{i}", "1", "5.00"), replace(c2, f"g{i}", f"q{i}"),
                cancel(c2, f"y{i}", f"g{i}", "1"), order(c1, f"n{i}", "2", "60.00")]


def answers(client: DemoClient) -> Counter[str]:
    """How many times each request (by its ClOrdID) was answered: its first ExecutionReport
    (New, Rejected, Canceled, Replaced), its OrderCancelReject, or a session-level Reject (35=3)
    of the message itself (the FIX engine refused it: e.g. its SendingTime). Fills are not answers.

    A message resent with PossDupFlag=Y counts too: QuickFIX hands the application only numbers
    it has not had (a resend fills a gap), so a resent answer is the first the client got (the
    gateway stored and numbered it, then lost the connection before sending it); an answer the
    client got twice comes under two sequence numbers, and is counted twice."""
    out: Counter[str] = Counter()
    with client.cond:
        out.update(r[11] for r in client.session_rejects)  # the request refused by the FIX engine itself
    for r in reports(client):
        if r[35] == "9" or r.get(150) in ("0", "8", "4", "5"):
            if r.get(150) == "4" and 41 not in r:
                continue  # a cancel the client did not ask for (an operator's, a session's move): not an answer
            assert 11 in r, f"{client.name}: an answer without its ClOrdID (11): {r}"
            out[r[11]] += 1
    return out


def fills(client: DemoClient) -> set[str]:
    return {r[17] for r in reports(client) if r[35] == "8" and r.get(150) in ("F", "1", "2")}


def sequence_numbers(client: DemoClient) -> list[int]:
    return [int(r[34]) for r in reports(client)]


def watch_ready(port: int, seen: list[tuple[float, bool, str]], stop: threading.Event) -> None:
    while not stop.wait(0.05):
        try:
            status, body = http_json(port)
        except OSError:
            continue
        seen.append((time.monotonic(), status == 200, "; ".join(body.get("problems", [])) if status != 200 else ""))




def first_answers(client: DemoClient) -> dict[str, dict[int, str]]:
    """Each request's first answer (as ``answers`` counts them), by ClOrdID."""
    out: dict[str, dict[int, str]] = {}
    with client.cond:
        for r in client.session_rejects:
            out.setdefault(r[11], r)
    for r in reports(client):
        if r[35] == "9" or r.get(150) in ("0", "8", "4", "5"):
            out.setdefault(r[11], r)
    return out


class AnswerClock:
    """Stamps when each request was first answered, polling the clients every 20 ms, so a fault's
    effect on the client can be told: how long requests waited, which were refused and why."""

    def __init__(self, clients: list[DemoClient]) -> None:
        self.clients = clients
        self.answered_at: dict[str, float] = {}
        self.answer: dict[str, dict[int, str]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="answer-clock", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            self.run_once()

    def run_once(self) -> None:
        now = time.monotonic()
        for c in self.clients:
            for clordid, r in first_answers(c).items():
                if clordid not in self.answered_at:
                    with self.lock:
                        self.answered_at[clordid] = now
                        self.answer[clordid] = r

    def snapshot(self) -> dict[str, tuple[float, dict[int, str]]]:
        """ClOrdID → (when first answered, that answer)."""
        with self.lock:
            return {c: (at, self.answer[c]) for c, at in self.answered_at.items()}


@dataclass
class Seen:
    """What the clients saw of the requests sent in a window (a fault, and until it healed)."""

    sent: int = 0
    accepted: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # reason (Text 58, figures left out) → count
    longest_wait_s: float = 0.0
    waits: list[float] = field(default_factory=list)

    def describe(self) -> str:
        why = "; ".join(f"{n}× {text!r}" for text, n in self.refused.most_common(3))
        median = sorted(self.waits)[len(self.waits) // 2] if self.waits else 0.0
        return (f"{self.sent} requests: {self.accepted} accepted, {sum(self.refused.values())} refused"
                f"{' (' + why + ')' if why else ''}; wait median {median:.2f} s, longest {self.longest_wait_s:.1f} s")


def seen_between(flow: Flow, clock: AnswerClock, start: float, end: float) -> Seen:
    import re

    seen = Seen()
    answers_now = clock.snapshot()
    for clordid, _, at in flow.sent_since(start, end):
        seen.sent += 1
        if clordid not in answers_now:
            continue
        answered, r = answers_now[clordid]
        seen.longest_wait_s = max(seen.longest_wait_s, answered - at)
        seen.waits.append(answered - at)
        if r[35] in ("3", "9") or r.get(150) == "8":
            seen.refused[re.sub(r"\d+(\.\d+)?", "N", r.get(58, ""))] += 1
        else:
            seen.accepted += 1
    return seen


def first_answered_after(flow: Flow, clock: AnswerClock, after: float, timeout: float = 90.0) -> float:
    """Seconds from ``after`` until a new order sent after it was answered by its matching cell
    (service is back: a cancel the gateway refuses itself would not say so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answered = clock.snapshot()
        later = [answered[c][0] for c, kind, _ in flow.sent_since(after) if kind == "D" and c in answered]
        if later:
            return min(later) - after
        time.sleep(0.05)
    raise AssertionError(f"no request sent after the fault healed was answered within {timeout} s")


def check_every_request_answered_once(flow: Flow, clients: list[DemoClient], timeout: float = 90.0) -> int:
    """Each request the flow sent was answered exactly once (accepted, possibly late, or refused
    with a reason), once nothing more can come. Returns how many were sent."""
    with flow.lock:
        sent = dict(flow.sent)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(set(sent) & set(sum((answers(c) for c in clients), Counter()))) < len(sent):
        time.sleep(0.2)
    time.sleep(1)  # anything extra (a duplicate) would have arrived by now
    got = sum((answers(c) for c in clients), Counter())
    unanswered = sorted(set(sent) - set(got))
    twice = sorted(k for k, n in got.items() if n > 1)
    assert not unanswered, f"{len(unanswered)} of {len(sent)} requests unanswered: {unanswered[:20]}"
    assert not twice, f"answered more than once: {twice[:20]}; the first: " + "; ".join(
        "|".join(f"{t}={r[t]}" for t in (34, 35, 11, 41, 17, 150, 39, 43, 58) if t in r)
        for c in clients for r in reports(c, twice[0]) if r.get(11) == twice[0])
    return len(sent)


def check_no_sequence_number_twice(clients: list[DemoClient]) -> None:
    for c in clients:
        seqs = sequence_numbers(c)
        repeated = [n for n, k in Counter(seqs).items() if k > 1]
        assert not repeated, f"{c.name}: sequence numbers came twice as new messages: {repeated[:10]}"


def check_drop_copy_has_every_fill(traders: list[DemoClient], drop_copy: DemoClient, timeout: float = 30.0) -> int:
    order_fills: set[str] = set().union(*(fills(c) for c in traders))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not order_fills <= fills(drop_copy):
        time.sleep(0.2)
    assert order_fills, "no fills at all: the flow did not trade"
    assert order_fills <= fills(drop_copy), f"the drop copy lacks {len(order_fills - fills(drop_copy))} fills"
    dc_ids = Counter(r[17] for r in reports(drop_copy) if r[35] == "8")
    assert max(dc_ids.values()) == 1, f"the drop copy got an execution twice: {dc_ids.most_common(3)}"
    return len(order_fills)


def check_partition_trades_as_the_reference(partition_client, store_client, partition: int,  # type: ignore[no-untyped-def]
                                            instruments: str, namespace: str = "e2e",
                                            groups: tuple[str, ...] = ("fsg",)) -> int:
    """Every command in the partition's stream, applied once in stream order by the reference
    matcher, gives exactly the events the gateway received from that partition (its inbox, in
    the partition's order, each event once): no order matched twice, none skipped, the books as
    the reference's. ``groups``: the session groups whose inboxes hold the events (an event
    concerning two groups is in both: counted once). Returns how many commands were compared."""
    keys = PartitionKeys(partition)
    commands: list[Command] = []
    seen: set[str] = set()
    for _, fields in partition_client.xrange(keys.commands):
        cmd = parse_command(fields[b"command"], 2)
        if cmd.command_id not in seen:  # a command appended twice (held, then sent again) is applied once
            seen.add(cmd.command_id)
            commands.append(cmd)
    ref = ReferenceMatcher(InstrumentTable.load(instruments).by_pair, "cancel-taker")
    expected = [e for cmd in commands for e in ref.apply(cmd)]
    events: dict[str, tuple[tuple[int, int], object]] = {}
    for group in groups:
        for _, fields in store_client.xrange(GatewayKey(namespace, group).inbox_stream):
            event = parse_event(fields[b"event"])
            if event.partition == partition:
                ms, _, n = fields[b"x-partition-offset"].decode().partition("-")
                events.setdefault(event.event_id, ((int(ms), int(n)), event.payload))
    got = [project(p) for _, p in sorted(events.values(), key=lambda x: x[0])]  # type: ignore[arg-type]
    assert got == expected, f"partition {partition}: {len(got)} events received, the reference gives {len(expected)}"
    return len(commands)


def trace_requests(clordids: list[str], flow: Flow, clients: list[DemoClient], store_client,  # type: ignore[no-untyped-def]
                   partition_clients: list, logs: list, namespace: str = "e2e",  # type: ignore[type-arg]
                   since: float = 0.0) -> str:
    """Where each of ``clordids`` got to, for a failure's message: when it was sent, what the
    client received about it, its ClOrdID claim in the session store, the commands and events of
    the partitions and the gateway's inbox entries naming it, and the log lines that name it."""
    out = []
    for clordid in clordids[:5]:
        with flow.lock:
            client, kind = flow.sent.get(clordid, (None, "?"))
            at = flow.sent_at.get(clordid, 0.0)
        mark = f"client_order_id='{clordid}'"
        lines = [f"{clordid} ({kind}) sent {at - since:+.2f} s from the first fault by "
                 f"{client.name if client else '?'}"]
        for c in clients:
            got = reports(c, clordid)
            if got:
                lines.append(f"  {c.name} received: " + "; ".join(
                    "|".join(f"{t}={r[t]}" for t in (34, 35, 11, 41, 150, 39, 43, 58) if t in r) for r in got))
        if client is not None:
            claim = store_client.get(GatewayKey(namespace, "fsg").session(client.name).clordid(clordid))
            lines.append(f"  claim in the session store: {claim!r}")
        for p, pc in enumerate(partition_clients):
            keys = PartitionKeys(p)
            for stream in (keys.commands, keys.events):
                for entry_id, fields in pc.xrange(stream):
                    for value in fields.values():
                        try:
                            text = repr(parse_command(value, 2) if stream == keys.commands else parse_event(value))
                        except Exception:  # noqa: BLE001 (not a command or an event field)
                            continue
                        if mark in text:
                            lines.append(f"  partition {p} {stream.rsplit(':', 1)[-1]} {entry_id!r}: {text[:300]}")
        for entry_id, fields in store_client.xrange(GatewayKey(namespace, "fsg").inbox_stream):
            try:
                text = repr(parse_event(fields[b"event"]))
            except Exception:  # noqa: BLE001
                continue
            if mark in text:
                lines.append(f"  inbox {entry_id!r}: {text[:200]}")
        for log_path in logs:
            try:
                for line in open(log_path, errors="replace"):
                    if clordid in line.split():
                        lines.append(f"  {log_path.name}: {line.rstrip()[:300]}")
            except OSError:
                continue
        out.append("\n".join(lines))
    return "\n".join(out)
