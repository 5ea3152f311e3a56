"""Cutting a stuck connection: the socket with the two addresses is shut down, and no other."""

from __future__ import annotations

import socket
import sys

import pytest

from shell.serve._sever import sever

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")


def test_the_connection_with_both_addresses_is_shut_down_and_the_others_are_not():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        first, second = (
            socket.create_connection(listener.getsockname()),
            socket.create_connection(listener.getsockname()),
        )
        one, _ = listener.accept()
        two, _ = listener.accept()
        with first, second, one, two:
            assert sever(one.getpeername(), one.getsockname())
            first.settimeout(5)
            assert first.recv(10) == b""  # the server side of the first connection is gone
            with pytest.raises(OSError):
                one.sendall(b"x" * 10)
            two.sendall(b"still here")
            second.settimeout(5)
            assert second.recv(10) == b"still here"


def test_unknown_or_missing_addresses_find_nothing():
    assert not sever(("127.0.0.1", 1), ("127.0.0.1", 2))
    assert not sever(None, ("127.0.0.1", 2))
    assert not sever(["127.0.0.1"], ["127.0.0.1", 2])
