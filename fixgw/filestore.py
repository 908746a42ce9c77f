"""QuickFIX's FileStore as a disposable local copy of what Redis holds (DESIGN §4).

The Python bindings cannot give QuickFIX a Redis-backed MessageStore, but QuickFIX loads a
FileStore's four files when it creates a session and answers ResendRequests from them.
So, on taking the lock, each session is written from Redis into a fresh directory in
exactly the format QuickFIX 1.16 writes (checked by a test against QuickFIX's own files):
``.body`` (messages back to back), ``.header`` (``seq,offset,size `` per message),
``.seqnums`` (``%020d : %020d``, next sender : next target), ``.session`` (creation time).
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

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


def fresh_directory(path: Path) -> Path:
    """An empty directory: whatever a previous process left there is never trusted."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path
