"""QuickFIX's own listening port, behind the front, confined to this host.

The front owns the FIX port; QuickFIX listens on a port of its own that only the front connects
to (``fixgw/front.py``). QuickFIX's C++ acceptor binds that port on *every* address (its socket
code binds ``INADDR_ANY`` and has no setting for the address: ``SocketAcceptHost`` is QuickFIX/J's
and is ignored here), so without more a machine that can reach the gateway's host could
connect to it directly and skip everything the front enforces: TLS and certificates, the
address rules, the pending-Logon limits, the message-size check.

So once the acceptor listens, its socket is bound to the loopback device (``SO_BINDTODEVICE``):
the kernel then matches it only to connections that arrive over loopback, and these come from
this host alone. A connection from elsewhere is refused by the kernel, as to a closed port.
Binding to a device needs no privilege from Linux 5.7; before, it needs ``CAP_NET_RAW``. A
gateway that cannot confine the port refuses to start.

Between QuickFIX's ``listen`` and the bind there is a moment when the port is open to every
address. A connection from elsewhere made in that moment is shut down here. Such a connection
would have had to guess a port picked at random and never announced.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import time
from pathlib import Path

from datastore.settings import ConfigError

LOOPBACK_DEVICE = b"lo"
ESTABLISHED = "01"


def confine_to_loopback(port: int, settle_s: float = 2.0) -> None:
    """Bind this process's listening TCP socket on ``port`` to the loopback device, then shut
    down every connection to it that came from elsewhere. Raises ConfigError when the socket
    is not found or cannot be bound."""
    listener = _listening_socket(port)
    if listener is None:
        raise ConfigError(f"QuickFIX's listening socket on port {port} not found: it cannot be confined to loopback")
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, LOOPBACK_DEVICE)
    except OSError as exc:
        raise ConfigError(
            f"QuickFIX's port {port} listens on every address and cannot be confined to loopback "
            f"(SO_BINDTODEVICE: {exc.strerror}); it would take connections from other machines past the "
            "front: run the gateway on Linux 5.7 or later, or give it CAP_NET_RAW") from None
    finally:
        listener.close()  # (a duplicate: QuickFIX's own descriptor stays open)
    # Connections accepted before the bind, or still queued for QuickFIX's accept: shut down
    # as QuickFIX takes them.
    deadline = time.monotonic() + settle_s
    while True:
        _shut_down_foreign(port)
        if not _foreign_connections(port) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _own_sockets() -> list[socket.socket]:
    """A duplicate of each TCP/IPv4 socket this process holds (the caller closes them)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            dup = os.dup(int(name))
        except OSError:
            continue  # closed meanwhile
        flags = fcntl.fcntl(dup, fcntl.F_GETFL)
        try:
            sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        # A duplicate shares its file's flags with QuickFIX's descriptor, and a socket object
        # made under a default timeout turns O_NONBLOCK on: QuickFIX's blocking mode is put back.
        fcntl.fcntl(dup, fcntl.F_SETFL, flags)
        if sock.family == socket.AF_INET and sock.type == socket.SOCK_STREAM:
            found.append(sock)
        else:
            sock.close()
    return found


def _listening_socket(port: int) -> socket.socket | None:
    match = None
    for sock in _own_sockets():
        try:
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
            if match is None and listening and sock.getsockname()[1] == port:
                match = sock
                continue
        except OSError:
            pass
        sock.close()
    return match


def _shut_down_foreign(port: int) -> None:
    """Shut down this process's connections on ``port`` (accepted by QuickFIX) whose peer is not
    on this host."""
    for sock in _own_sockets():
        try:
            if sock.getsockname()[1] == port and not is_loopback(sock.getpeername()[0]):
                sock.shutdown(socket.SHUT_RDWR)  # QuickFIX reads the end and drops the connection
        except OSError:
            pass  # not connected, or gone
        finally:
            sock.close()


def _foreign_connections(port: int) -> list[str]:
    """Peers of established connections to ``port`` that are not on this host, from the
    kernel's table (it also holds those QuickFIX has not accepted yet)."""
    peers = []
    for line in Path("/proc/thread-self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if state != ESTABLISHED or int(local.split(":")[1], 16) != port:
            continue
        address = socket.inet_ntoa(int(remote.split(":")[0], 16).to_bytes(4, "little"))
        if not is_loopback(address):
            peers.append(address)
    return peers
