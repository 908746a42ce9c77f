"""QuickFIX's FileStore as a disposable local copy of what Redis holds (DESIGN §4).

The Python bindings cannot give QuickFIX a Redis-backed MessageStore, but QuickFIX loads a
FileStore's four files when it creates a session and answers ResendRequests from them.
So, on taking the lock, each session is written from Redis into a fresh directory in
exactly the format QuickFIX 1.16 writes (checked by a test against QuickFIX's own files):
``.body`` (messages back to back), ``.header`` (``seq,offset,size `` per message),
``.seqnums`` (``%020d : %020d``, next sender : next target), ``.session`` (creation time).

QuickFIX reads a session's whole ``.header`` when it creates the session (about 0.4 µs an entry:
most of a takeover with millions of stored messages). So a takeover may hand it only the last
entries and keep the older ones aside (``OLDER_HEADER``); a ResendRequest reaching below them
puts them back in front (``complete_header``) and has QuickFIX read the file again first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from datastore.settings import ConfigError
from sessionstore.store import LoadedSession


def creation_time_text(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y%m%d-%H:%M:%S")


def write_session(directory: Path, prefix: str, loaded: LoadedSession, creation_ns: int) -> None:
    """Write one session's FileStore files (``prefix`` = ``BeginString-Sender-Target``)."""
    directory.mkdir(parents=True, exist_ok=True)
    body = bytearray()
    header = []
    for rec in loaded.messages:
        header.append(f"{rec.seq_num},{len(body)},{len(rec.body)} ")
        body += rec.body
    state = loaded.state
    files = {"body": bytes(body), "header": "".join(header).encode(),
             "seqnums": f"{state.sender_seq_num:020d} : {state.target_seq_num:020d}".encode(),
             "session": creation_time_text(creation_ns).encode()}
    for suffix, content in files.items():
        # Replaced, not rewritten in place: a running QuickFIX keeps writing to the files it has
        # open (now unlinked) until it re-reads these on refresh.
        tmp = directory / f"{prefix}.{suffix}.tmp"
        tmp.write_bytes(content)
        os.replace(tmp, directory / f"{prefix}.{suffix}")
    (directory / f"{prefix}.{OLDER_HEADER}").unlink(missing_ok=True)  # the header is whole


OLDER_HEADER = "older-header"  # the entries held back from ``.header``, oldest first


def hold_back_header(directory: Path, prefix: str, at: int) -> None:
    """Keep the first ``at`` bytes of ``.header`` aside: QuickFIX loads only the rest."""
    header = directory / f"{prefix}.header"
    content = header.read_bytes()
    (directory / f"{prefix}.{OLDER_HEADER}").write_bytes(content[:at])
    tmp = directory / f"{prefix}.header.tmp"
    tmp.write_bytes(content[at:])
    os.replace(tmp, header)


def complete_header(directory: Path, prefix: str) -> int:
    """Put the entries held back (``hold_back_header``) in front of what ``.header`` holds now
    (QuickFIX has appended to it since); QuickFIX must re-read the files (``Session.refresh``)
    before it writes again. Returns how many bytes were put back (0: nothing was held back)."""
    older = directory / f"{prefix}.{OLDER_HEADER}"
    if not older.exists():
        return 0
    held = older.read_bytes()
    header = directory / f"{prefix}.header"
    tmp = directory / f"{prefix}.header.tmp"
    tmp.write_bytes(held + header.read_bytes())
    os.replace(tmp, header)
    older.unlink()
    return len(held)


def fresh_directory(path: Path) -> Path:
    """An empty directory: whatever a previous process left there is never trusted."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def claim_directory(path: Path) -> object:
    """This process's hold on ``path`` (a state_dir) for as long as it runs: a second gateway
    started with the same one — a standby beside the active one on one host — would empty the
    active one's local copy under QuickFIX. Refused with the reason instead."""
    path.mkdir(parents=True, exist_ok=True)
    holder = open(path / ".holder", "a+")  # noqa: SIM115 (held open until the process ends)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder.seek(0)
        other = holder.read().strip() or "another process"
        holder.close()
        raise ConfigError(f"state_dir {path} is in use by {other}: give each gateway process its own "
                          "(`fixgw gateway --state-dir DIR`, or [gateway] state_dir)") from None
    holder.seek(0)
    holder.truncate()
    holder.write(f"gateway pid {os.getpid()}")
    holder.flush()
    return holder
