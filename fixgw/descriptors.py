"""The front's and the HTTP endpoint's sockets numbered above QuickFIX's.

QuickFIX closes a connection's socket on the connection's own thread (a Logout received or
sent, a refused Logon, a heartbeat timeout), runs ``onLogout`` and goes back to ``poll`` on the
same descriptor *number* before it sees that it is done (``ThreadedSocketConnection``: its
``disconnect`` closes; its thread's loop calls ``read`` once more). Linux hands out the lowest
free number, so a socket this process opens in that moment takes that one, and the old thread
polls it: it would read that socket's bytes, and while the socket is quiet it keeps its
session registered to a connection that no longer exists. QuickFIX then refuses the session a
new connection, and the client's next Logon goes unanswered (``onLogout`` takes the GIL, so the
moment lasts as long as other threads keep it; a client that reconnects at once when its
Logout is answered is exactly such a socket: the front accepts it).

The sockets the process opens while connections come and go — the front's, on both sides, and
the HTTP endpoint's — are moved to numbers from ``floor()`` up as soon as they exist, so they
never take a number a QuickFIX thread may still poll. What can still take one: a socket in the
microseconds before its move, QuickFIX's own accept of another session's connection passed on
in that moment, a Redis connection the pool opens then. A file (the stores' and logs') is
harmless: polled, it is readable at once, and reading it as a socket fails, which ends the
thread.
"""

from __future__ import annotations

import fcntl
import resource
import socket
from typing import Any

FLOOR = 1024  # QuickFIX's descriptors stay below this unless it holds about a thousand connections
WANTED_OPEN_FILES = 65536


def floor() -> int:
    """The lowest number a moved socket gets: ``FLOOR``, within the open-files limit (raised to
    its hard limit, ``WANTED_OPEN_FILES`` at most, the first time; half of it when it stays lower)."""
    global _floor
    if _floor is None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = WANTED_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, WANTED_OPEN_FILES)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                soft = wanted
            except (ValueError, OSError):
                pass
        _floor = FLOOR if soft == resource.RLIM_INFINITY or soft >= 2 * FLOOR else soft // 2
    return _floor


_floor: int | None = None


def lift(sock: socket.socket) -> socket.socket:
    """``sock`` as a socket numbered from ``floor()`` up (the same connection; ``sock`` is closed)."""
    moved = fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD_CLOEXEC, floor())
    # family, type and protocol read from the descriptor: asyncio sets TCP_NODELAY only on a
    # socket whose protocol says TCP, and a socket made without one (``socket.socket(AF_INET,
    # SOCK_STREAM)``, or accepted from one) says 0
    lifted = socket.socket(fileno=moved)
    lifted.settimeout(sock.gettimeout())
    sock.close()
    return lifted


class LiftedListener(socket.socket):
    """A listening socket whose accepted connections are numbered from ``floor()`` up (asyncio's
    server and ``socketserver`` accept through ``accept``)."""

    def accept(self) -> tuple[socket.socket, Any]:
        conn, address = super().accept()
        return lift(conn), address


def lifted_listeners(host: str, port: int, backlog: int = 100) -> list[LiftedListener]:
    """TCP sockets listening on ``host:port`` as asyncio's ``start_server`` binds them — one for
    each address the host resolves to, every interface for ``""``, IPv6 ones IPv6 only, the
    address reused — themselves and their connections numbered from ``floor()`` up."""
    listeners: list[LiftedListener] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(socket.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)):
            plain = socket.socket(family, kind, proto)
            with plain:
                plain.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    plain.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                plain.bind(address)
                plain.listen(backlog)
                moved = fcntl.fcntl(plain.fileno(), fcntl.F_DUPFD_CLOEXEC, floor())
            listeners.append(LiftedListener(fileno=moved))
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def lifted_stream_socket(family: int = socket.AF_INET) -> socket.socket:
    """A new TCP socket, not connected, numbered from ``floor()`` up."""
    return lift(socket.socket(family, socket.SOCK_STREAM))
