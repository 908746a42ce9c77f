"""The message log (fixgw/message_log.py): QuickFIX's FileLog's files and lines, written by a
thread of its own — every message in and out, in order, byte for byte; and written before a
fail-fast exit."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from datastore.embedded import ValkeyProcess, free_port
from fixgw.message_log import LogFiles, MessageLogWriter, line, redacted
from tests.gateway_helpers import GatewayProc, RawFixClient, parse

pytestmark = pytest.mark.slow  # starts servers or processes: not in `make unit`

LINE = re.compile(rb"^\d{8}-\d\d:\d\d:\d\d\.\d{9} : ")


def test_a_line_keeps_bytes_that_are_not_utf8_and_is_stamped_as_filelog_stamps() -> None:
    raw = "8=FIX.4.4\x0158=caf\udce9\x01".encode("utf-8", "surrogateescape")  # as the bindings hand it over
    written = line(1_764_940_000_123_456_789, raw.decode("utf-8", "surrogateescape"))
    assert written == b"20251205-13:06:40.123456789 : 8=FIX.4.4\x0158=caf\xe9\x01\n"


def test_passwords_are_written_as_stars_and_nothing_else_changes() -> None:
    logon = "8=FIX.4.4\x0135=A\x01553=alice\x01554=s3cret\x01925=n3w-s3cret\x0158=554=x\x0110=000\x01"
    assert redacted(logon) == "8=FIX.4.4\x0135=A\x01553=alice\x01554=***\x01925=***\x0158=554=x\x0110=000\x01"
    assert redacted("35=A\x01554=last") == "35=A\x01554=***"  # (a line cut short still loses its secret)
    assert redacted("35=A\x01554=a\x01554=b\x01") == "35=A\x01554=***\x01554=***\x01"
    plain = "8=FIX.4.4\x0135=D\x0111=A1\x01"
    assert redacted(plain) == plain


def test_an_idle_writer_sleeps_and_the_next_line_wakes_it(tmp_path: Path) -> None:
    """Nothing queued, the writer thread waits for a line instead of looking every
    WRITE_EVERY_S (it woke ~100 times a second on an idle gateway); the next line still reaches
    its file."""
    import time

    writer = MessageLogWriter(tmp_path)
    files = LogFiles(tmp_path, "FIX.4.4-GW-C")

    def written() -> bytes:
        return files.messages_path.read_bytes()

    def switches() -> int:  # the writer thread's voluntary context switches so far
        status = Path(f"/proc/self/task/{writer._thread.native_id}/status").read_text()
        return int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status).group(1))  # type: ignore[union-attr]

    def wait_for(what: bytes) -> None:
        deadline = time.monotonic() + 10
        while what not in written():
            assert time.monotonic() < deadline, f"{what!r} never reached the file"
            time.sleep(0.01)

    try:
        writer.append(files, "messages", "before the quiet")
        wait_for(b"before the quiet")
        while not writer._asleep:
            time.sleep(0.01)
        before = switches()
        time.sleep(0.5)  # (50 looks at an empty queue, had it kept looking)
        assert switches() - before <= 2, "an idle writer does not wake"
        writer.append(files, "messages", "after the quiet")
        wait_for(b"after the quiet")
    finally:
        writer.close()
        files.close()


def test_under_a_steady_flow_the_writer_wakes_once_every_write_every_s_not_once_a_line(tmp_path: Path) -> None:
    """Lines coming every 2.5 ms (a request every 2.5 ms: 400/s): the writer looks every
    WRITE_EVERY_S, and does not go to sleep between two lines only to be woken by the next one
    (two wake-ups every WRITE_EVERY_S); every line still reaches its file."""
    import threading
    import time

    import fixgw.message_log as ml

    writer = MessageLogWriter(tmp_path)
    files = LogFiles(tmp_path, "FIX.4.4-GW-C")

    def switches() -> int:  # the writer thread's voluntary context switches so far
        status = Path(f"/proc/self/task/{writer._thread.native_id}/status").read_text()
        return int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status).group(1))  # type: ignore[union-attr]

    sent: list[str] = []

    def flow(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sent.append(f"line {len(sent)}")
            writer.append(files, "messages", sent[-1])
            time.sleep(0.0025)

    try:
        flow(0.2)  # (the flow under way)
        before, started = switches(), time.monotonic()
        appender = threading.Thread(target=flow, args=(1.0,))
        appender.start()
        appender.join()
        periods = (time.monotonic() - started) / ml.WRITE_EVERY_S
        wakes = switches() - before
        writer.flush()
        assert files.messages_path.read_bytes().count(b" : line ") == len(sent)
        assert wakes <= 1.4 * periods, f"{wakes} wake-ups in {periods:.0f} periods of WRITE_EVERY_S"
    finally:
        writer.close()
        files.close()


def test_backup_and_clear_come_in_order_with_the_lines_around_them(tmp_path: Path) -> None:
    writer = MessageLogWriter(tmp_path)
    files = LogFiles(tmp_path, "FIX.4.4-GW-C")
    try:
        writer.append(files, "messages", "first")
        writer.append(files, "backup", "")
        writer.append(files, "messages", "second")
        writer.append(files, "event", "an event")
        writer.append(files, "clear", "")
        writer.append(files, "messages", "third")
    finally:
        writer.close()
        files.close()
    backup = (tmp_path / "FIX.4.4-GW-C.messages.backup.1.log").read_bytes()
    assert backup.endswith(b" : first\n") and backup.count(b"\n") == 1
    current = (tmp_path / "FIX.4.4-GW-C.messages.current.log").read_bytes()
    assert current.endswith(b" : third\n") and current.count(b"\n") == 1  # "second" went with the clear
    assert (tmp_path / "FIX.4.4-GW-C.event.current.log").read_bytes() == b""


def test_the_gateway_logs_every_message_in_and_out_in_order_byte_for_byte(tmp_path: Path,
                                                                            valkey: ValkeyProcess) -> None:
    gw = GatewayProc(tmp_path, valkey.url, fix_port=free_port()).start().wait_active()  # message_log = true
    client = RawFixClient(gw.fix_port, sender="CLIENT1", seq=1)
    try:
        client.send(b"35=A\x0198=0\x01108=30")
        assert client.read(timeout=15) is not None
        client.send(b"35=1\x01112=probe-\xe9\xff")  # a TestRequest whose id is not UTF-8
        answer = client.read(timeout=15)
        assert answer is not None and parse(answer)[112] == b"probe-\xe9\xff"
    finally:
        client.close()
        gw.stop()
    log_dir = gw.dir / "state" / "log"
    messages = (log_dir / "FIX.4.4-FIXGW-CLIENT1.messages.current.log").read_bytes().splitlines()
    assert all(LINE.match(m) for m in messages), messages
    kinds = [(parse(m.split(b" : ", 1)[1])[49], parse(m.split(b" : ", 1)[1])[35]) for m in messages]
    assert kinds[:4] == [(b"CLIENT1", b"A"), (b"FIXGW", b"A"), (b"CLIENT1", b"1"), (b"FIXGW", b"0")]
    assert b"112=probe-\xe9\xff\x01" in messages[2] and b"112=probe-\xe9\xff\x01" in messages[3]
    events = (log_dir / "FIX.4.4-FIXGW-CLIENT1.event.current.log").read_text()
    assert "Received logon request" in events
    assert (log_dir / "GLOBAL.event.current.log").exists()


def test_a_fail_fast_exit_writes_the_lines_queued_before_it(tmp_path: Path) -> None:
    """``context.die`` leaves with ``os._exit``: no thread runs after it, so the queued lines
    are written first (the writer here would not get to them for a minute)."""
    child = textwrap.dedent(f"""
        from pathlib import Path
        import fixgw.message_log as ml
        ml.WRITE_EVERY_S = 60.0
        from fixgw.context import die
        writer = ml.MessageLogWriter(Path({str(tmp_path)!r}))
        files = ml.LogFiles(writer.directory, "FIX.4.4-GW-C")
        for i in range(1000):
            writer.append(files, "messages", f"line {{i}}")
        die("a test's exit", 7)
    """)
    done = subprocess.run([sys.executable, "-c", child], cwd=Path(__file__).resolve().parents[1], timeout=60,
                          capture_output=True)
    assert done.returncode == 7, done.stderr
    lines = (tmp_path / "FIX.4.4-GW-C.messages.current.log").read_bytes().splitlines()
    assert [x.split(b" : ", 1)[1] for x in lines] == [f"line {i}".encode() for i in range(1000)]
