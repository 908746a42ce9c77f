"""The message log: every FIX message in and out of each session, and QuickFIX's session events,
in the files and format of QuickFIX's FileLog (``state_dir/log``) — written by a thread of its
own, never by the threads that carry orders.

QuickFIX's FileLog writes and flushes each message on the thread that handles it: a session's
thread for what comes in, the dispatcher for the reports going out. An append to a file waits
now and then for the filesystem (on ext4, for the journal's commit): traced on this project's
2-core machine (``perf trace --duration 10``) at 400 requests/s, such writes took 10–42 ms on
QuickFIX's session threads and the dispatcher, and every request behind them waited as long
(docs/decisions/2026-12-05-message-log-off-the-order-path.md). Here those threads only stamp the
line and append it to a queue (no system call, no lock); the writer thread writes what has
queued every ``WRITE_EVERY_S``, one write a file, and once a whole ``WRITE_EVERY_S`` went by with
nothing queued it sleeps: the first line after the quiet wakes it (one ``Event.set``).

What a crash costs: QuickFIX's FileLog had each line in the kernel before the message went on;
here a process killed outright loses the lines of the last ``WRITE_EVERY_S`` (more while the disk
stalls). The fail-fast exits (``context.die``) write them first. Neither log was ever synced to
the disk; the outbound messages themselves are in the session store either way.

Files, as QuickFIX's FileLog names them: ``<BeginString>-<Sender>-<Target>.messages.current.log``
and ``.event.current.log`` per session, ``GLOBAL.event.current.log`` for the acceptor; each line
``YYYYMMDD-HH:MM:SS.nnnnnnnnn : <text>``, stamped when QuickFIX logged it. ``backup`` moves the
current files to ``.messages.backup.N.log`` / ``.event.backup.N.log`` and ``clear`` empties them,
as FileLog does, in order with the lines around them.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from pathlib import Path
from typing import IO, Any

import quickfix as fix

log = logging.getLogger("fixgw.message_log")

WRITE_EVERY_S = 0.01  # how long a line may wait for the writer
BACKLOG_LIMIT = 200_000  # lines queued (~50 MB) before the callers wait for the writer: the disk stopped


class LogFiles:
    """One log's two files (a session's, or the acceptor's), written by the writer thread only."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory, self.prefix = directory, prefix
        self.messages_path = directory / f"{prefix}.messages.current.log"
        self.event_path = directory / f"{prefix}.event.current.log"
        self.messages: IO[bytes] = open(self.messages_path, "ab")  # noqa: SIM115 (open for the process's life)
        self.event: IO[bytes] = open(self.event_path, "ab")  # noqa: SIM115

    def backup(self) -> None:
        self.close()
        n = 1
        while (self.directory / f"{self.prefix}.messages.backup.{n}.log").exists() or \
                (self.directory / f"{self.prefix}.event.backup.{n}.log").exists():
            n += 1
        self.messages_path.rename(self.directory / f"{self.prefix}.messages.backup.{n}.log")
        self.event_path.rename(self.directory / f"{self.prefix}.event.backup.{n}.log")
        self.messages, self.event = open(self.messages_path, "wb"), open(self.event_path, "wb")  # noqa: SIM115

    def clear(self) -> None:
        self.close()
        self.messages, self.event = open(self.messages_path, "wb"), open(self.event_path, "wb")  # noqa: SIM115

    def close(self) -> None:
        self.messages.close()
        self.event.close()


_WRITERS: list[MessageLogWriter] = []  # this process's (``write_before_exit``)


def write_before_exit(timeout_s: float = 1.0) -> None:
    """What the fail-fast exit calls (``context.die``): the lines queued so far, written — unless
    the writer is stuck on the disk longer than ``timeout_s``."""
    for writer in list(_WRITERS):
        writer.flush(timeout_s)


class MessageLogWriter:
    """The queue every log appends to, and the thread that writes it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        # (files, which, stamp ns, text): deque.append is atomic, so QuickFIX's threads take no lock
        self._queue: collections.deque[tuple[LogFiles, str, int, str]] = collections.deque()
        self._room = threading.Condition()  # where callers wait while the backlog is over its limit
        self._lock = threading.Lock()  # one drain at a time (the writer's, or a flush's)
        self._stopped = threading.Event()
        # The writer sleeps while nothing is queued; the first line after that wakes it (``_run``).
        self._asleep = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="message-log", daemon=True)
        self._thread.start()
        _WRITERS.append(self)

    def append(self, files: LogFiles, which: str, text: str) -> None:
        """(QuickFIX's threads.) ``which``: "messages" or "event", or "backup"/"clear"."""
        self._queue.append((files, which, time.time_ns(), text))
        if self._asleep:
            self._wake.set()
        if len(self._queue) > BACKLOG_LIMIT:
            log.warning("message log: %d lines waiting for the disk; the sessions wait for it", len(self._queue))
            with self._room:
                self._room.wait_for(lambda: len(self._queue) <= BACKLOG_LIMIT // 2 or self._stopped.is_set(), 5.0)

    def flush(self, timeout_s: float = -1) -> None:
        """Write everything queued now (the writer does it every ``WRITE_EVERY_S``; an exit first)."""
        if not self._lock.acquire(timeout=timeout_s):
            return
        try:
            self._drain()
        finally:
            self._lock.release()

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(5)
        self.flush()
        if self in _WRITERS:
            _WRITERS.remove(self)

    def _run(self) -> None:
        while not self._stopped.is_set():
            if self._stopped.wait(WRITE_EVERY_S):  # (the lines of WRITE_EVERY_S, one write a file)
                break
            if self._queue:
                # Lines keep coming: the next look is WRITE_EVERY_S on, whoever appends. Sleeping
                # whenever the queue is empty for a moment, the writer would be woken by the next
                # line nearly once a request at 400 requests/s, and a woken thread waits for the
                # interpreter beside the order path's threads.
                try:
                    self.flush()
                except Exception:  # noqa: BLE001 (a full disk must not end the log for good)
                    log.exception("message log: write failed; trying again")
                continue
            # Nothing came for WRITE_EVERY_S: sleep until a line comes, not WRITE_EVERY_S at a
            # time (an idle gateway's writer woke a hundred times a second). Said before the
            # queue is looked at again, so a line appended in between either is seen or wakes it.
            self._asleep = True
            if not self._queue:
                self._wake.wait()
            self._asleep = False
            self._wake.clear()

    def _drain(self) -> None:
        queue, pending = self._queue, len(self._queue)
        if not pending:
            return
        chunks: dict[IO[bytes], list[bytes]] = {}
        for _ in range(pending):
            files, which, stamp, text = queue.popleft()
            if which in ("backup", "clear"):
                self._write(chunks)
                chunks = {}
                (files.backup if which == "backup" else files.clear)()
                continue
            out = files.messages if which == "messages" else files.event
            chunks.setdefault(out, []).append(line(stamp, text))
        self._write(chunks)
        with self._room:
            self._room.notify_all()

    @staticmethod
    def _write(chunks: dict[IO[bytes], list[bytes]]) -> None:
        for out, lines in chunks.items():
            out.write(b"".join(lines))
            out.flush()


_SECOND: tuple[int, str] = (-1, "")  # the last second formatted (the writer's only)


def line(stamp_ns: int, text: str) -> bytes:
    """One log line as FileLog writes it. Bytes that are not UTF-8 come from the bindings as
    surrogates and go back out as the bytes they were."""
    global _SECOND
    second, nanos = divmod(stamp_ns, 1_000_000_000)
    if _SECOND[0] != second:
        _SECOND = (second, time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(second)))
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    return f"{_SECOND[1]}.{nanos:09d} : ".encode() + raw + b"\n"


SECRETS = ("\x01554=", "\x01925=")  # Password, NewPassword: a Logon's, never written


def redacted(text: str) -> str:
    """``text`` with the value of every Password (554) and NewPassword (925) replaced by ``***``
    (the line then no longer matches its CheckSum: it is a record, not a message to replay)."""
    for tag in SECRETS:
        start = text.find(tag)
        while start != -1:
            value = start + len(tag)
            end = text.find("\x01", value)
            text = text[:value] + "***" + (text[end:] if end != -1 else "")
            start = text.find(tag, value)
    return text


class SessionLog(fix.Log):
    """QuickFIX's Log for one session (or the acceptor's): each call queues a line. A Logon's
    passwords are replaced (``redacted``): QuickFIX logs what it receives and sends as it is."""

    def __init__(self, writer: MessageLogWriter, files: LogFiles) -> None:
        super().__init__()
        self._append, self._files = writer.append, files

    def onIncoming(self, text: str) -> None:  # noqa: N802
        if "\x01554=" in text or "\x01925=" in text:
            text = redacted(text)
        self._append(self._files, "messages", text)

    def onOutgoing(self, text: str) -> None:  # noqa: N802
        if "\x01554=" in text or "\x01925=" in text:
            text = redacted(text)
        self._append(self._files, "messages", text)

    def onEvent(self, text: str) -> None:  # noqa: N802
        self._append(self._files, "event", text)

    def clear(self) -> None:
        self._append(self._files, "clear", "")

    def backup(self) -> None:
        self._append(self._files, "backup", "")


class MessageLogFactory(fix.LogFactory):
    """What the acceptor is given instead of ``fix.FileLogFactory(directory)``."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.writer = MessageLogWriter(directory)
        self._logs: list[SessionLog] = []

    def create(self, *session: Any) -> SessionLog:
        """``create()``: the acceptor's log; ``create(sid)``: a session's."""
        prefix = "GLOBAL"
        if session:
            sid = session[0]
            prefix = "-".join(part for part in (sid.getBeginString().getString(), sid.getSenderCompID().getString(),
                                                sid.getTargetCompID().getString(), sid.getSessionQualifier()) if part)
        made = SessionLog(self.writer, LogFiles(self.writer.directory, prefix))
        # QuickFIX owns the log from now on (it calls ``destroy`` with it); disowned, the
        # bindings never free it a second time when Python lets go of it.
        made.__disown__()
        self._logs.append(made)
        return made

    def destroy(self, made: SessionLog) -> None:
        """QuickFIX is done with ``made`` (its session is gone): its lines are written, its files
        closed once written."""
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
        for made in self._logs:
            made._files.close()  # noqa: SLF001
