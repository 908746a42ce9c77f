"""Sockets moved above QuickFIX's descriptors (``fixgw/descriptors.py``): they listen where
asyncio's own server would, and what they accept is moved too and still says TCP."""

from __future__ import annotations

import socket

from fixgw.descriptors import floor, lifted_listeners, lifted_stream_socket


def test_every_interface_is_listened_on_for_an_empty_host_each_family_apart() -> None:
    listeners = lifted_listeners("", 0)
    try:
        families = {listener.family for listener in listeners}
        assert socket.AF_INET in families
        if socket.has_ipv6:
            assert socket.AF_INET6 in families
            v6 = next(listener for listener in listeners if listener.family == socket.AF_INET6)
            assert v6.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1  # IPv4 peers come as IPv4
        assert all(listener.fileno() >= floor() for listener in listeners)
    finally:
        for listener in listeners:
            listener.close()


def test_an_accepted_connection_is_numbered_from_the_floor_and_says_tcp() -> None:
    [listener] = lifted_listeners("127.0.0.1", 0)
    with listener, socket.create_connection(listener.getsockname()) as client:
        accepted, peer = listener.accept()
        with accepted:
            assert accepted.fileno() >= floor()
            assert accepted.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only then
            assert peer == client.getsockname()
            client.sendall(b"ping")
            assert accepted.recv(4) == b"ping"


def test_a_new_stream_socket_is_numbered_from_the_floor() -> None:
    with lifted_stream_socket() as sock:
        assert sock.fileno() >= floor()
        assert (sock.family, sock.type, sock.proto) == (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
