"""Test hosts in Linux network namespaces on one bridge, and faults the kernel injects between them.

Each host is a network namespace with its own loopback and one veth (``eth0``, 10.77.0.N/24)
to a bridge in a namespace of its own; nothing is added to the machine's own namespace. A
process started inside a host (``Net.inside``) binds that host's address; a socket made inside
a host keeps its namespace after the thread leaves it (``setns`` is per thread), so the test's
own clients and probes are made inside the host they belong to.

Faults are nftables rules in the receiving host's ``input`` hook, so they are silent as a cable
pulled out is: the sender's packets vanish and its TCP retransmits (a rule in ``output`` would
make the sender's ``send`` fail at once with EPERM, which no real network does).

- ``cut(a, b)``: a partition; every packet between the two hosts is dropped both ways.
- ``lose(host, percent)``: that share of the packets reaching ``host`` and of those it sends is
  dropped (``numgen random``), as a lossy link to it.
- Latency: this machine's kernel has no ``netem`` qdisc (``CONFIG_NET_SCH_NETEM`` is not set), so
  a delay with jitter is ``DelayProxy``: a TCP relay inside a host that holds each chunk for the
  delay before passing it on, in order.

Needs root, ``ip`` (iproute2) and ``nft`` (nftables); ``missing()`` says what is absent.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
SUBNET = "10.77.0"


def missing() -> str | None:
    """Why the kernel fault tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "the network fault tests need root (network namespaces, nftables)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the Makefile installs iproute2 and nftables)"
    return None


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _setns(path: str | int) -> None:
    fd = os.open(path, os.O_RDONLY) if isinstance(path, str) else path
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        if isinstance(path, str):
            os.close(fd)


class Net:
    """Hosts (network namespaces) joined by one bridge. ``hosts``: their names, in order."""

    def __init__(self, hosts: list[str]) -> None:
        self.tag = f"fx{uuid.uuid4().hex[:6]}"  # namespaces are machine-wide: names of this run's own
        self.hosts = list(hosts)
        self.address = {h: f"{SUBNET}.{10 + i}" for i, h in enumerate(self.hosts)}
        self._made: list[str] = []

    def ns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def start(self) -> Net:
        try:
            bridge = self.ns("bridge")
            _run("ip", "netns", "add", bridge)
            self._made.append(bridge)
            _run("ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", bridge, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts):
                ns = self.ns(host)
                _run("ip", "netns", "add", ns)
                self._made.append(ns)
                port = f"p{i}"
                _run("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", bridge)
                _run("ip", "-n", bridge, "link", "set", port, "master", "br0", "up")
                _run("ip", "-n", ns, "addr", "add", f"{self.address[host]}/24", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                self.nft(host, "add table inet fault")
                self.nft(host, "add chain inet fault input { type filter hook input priority 0 ; }")
                self.nft(host, "add chain inet fault output { type filter hook output priority 0 ; }")
        except Exception:
            self.stop()
            raise
        return self

    def nft(self, host: str, rule: str) -> None:
        _run("ip", "netns", "exec", self.ns(host), "nft", rule)

    @contextmanager
    def inside(self, host: str) -> Iterator[None]:
        """Run the block in ``host``'s network namespace: the processes it starts, the threads it
        starts and the sockets it opens belong to that host (this thread only)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(f"/run/netns/{self.ns(host)}")
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(own)

    def cut(self, a: str, b: str) -> None:
        """Partition ``a`` from ``b``: each drops every packet from the other."""
        self.nft(a, f"add rule inet fault input ip saddr {self.address[b]} drop")
        self.nft(b, f"add rule inet fault input ip saddr {self.address[a]} drop")

    def isolate(self, host: str, from_hosts: list[str]) -> None:
        for other in from_hosts:
            self.cut(host, other)

    def lose(self, host: str, percent: int) -> None:
        """Drop ``percent`` % of what reaches ``host`` over its link and of what it sends."""
        for chain, side in (("input", "iifname"), ("output", "oifname")):
            self.nft(host, f'add rule inet fault {chain} {side} "eth0" numgen random mod 100 < {percent} drop')

    def heal(self) -> None:
        """Every fault removed; connections that survived the fault carry on."""
        for host in self.hosts:
            self.nft(host, "flush chain inet fault input")
            self.nft(host, "flush chain inet fault output")

    def stop(self) -> None:
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()

    def __enter__(self) -> Net:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class DelayProxy:
    """A TCP relay to ``target`` (a datastore) that holds every chunk the datastore sends
    ``delay_s`` ± ``jitter_s`` (uniform) before passing it on, never reordering a connection's
    bytes: ``tc qdisc add dev eth0 root netem delay 50ms 10ms`` on the datastore's host, where
    the kernel has no netem (each round trip to it is ``delay_s`` longer). Built inside that host."""

    def __init__(self, host_address: str, target: tuple[str, int], delay_s: float, jitter_s: float) -> None:
        self.target = target
        self.delay_s, self.jitter_s = delay_s, jitter_s
        self.server = socket.create_server((host_address, 0))
        self.address = f"{host_address}:{self.server.getsockname()[1]}"
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="delay-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.sockets.append(s)
            threading.Thread(target=self._pipe, args=(client, upstream, 0.0, 0.0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.delay_s, self.jitter_s),
                             daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delay_s: float, jitter_s: float) -> None:
        """Read and stamp each chunk with its due time (never earlier than the one before: a
        link delays, it does not reorder a byte stream); a second thread sends each when due."""
        queue: list[tuple[float, bytes]] = []
        ready = threading.Condition()

        def send() -> None:
            while True:
                with ready:
                    while not queue:
                        ready.wait()
                    due, data = queue.pop(0)
                if not data:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                try:
                    dst.sendall(data)
                except OSError:
                    break
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=send, daemon=True).start()
        last = 0.0
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            due = max(last, time.monotonic() + delay_s + random.uniform(-jitter_s, jitter_s))
            last = due
            with ready:
                queue.append((due, data))
                ready.notify()
            if not data:
                return

    def close(self) -> None:
        self.closed.set()
        self.server.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass
