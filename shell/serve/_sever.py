"""Cutting one TCP connection of this process, found by its two addresses, when a write to it is stuck.

The ASGI server shields its socket writes from cancellation, so a reader that stopped reading would hold
its stream forever; shutting the socket down fails the stuck write and ends the connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from collections.abc import Sequence

__all__ = ["sever"]

_FDS = "/proc/self/fd"


def _endpoint(address: Sequence[object] | None) -> tuple[str, int] | None:
    if address is None or len(address) < 2:
        return None
    host, port = address[0], address[1]
    return (str(host), int(str(port))) if port is not None else None


def sever(client: Sequence[object] | None, server: Sequence[object] | None) -> bool:
    """Shut down the TCP socket whose peer is ``client`` and whose own address is ``server`` (ASGI scope
    pairs); whether one was found. Where ``/proc/self/fd`` does not exist (not Linux) it finds none."""
    peer, own = _endpoint(client), _endpoint(server)
    if peer is None or own is None:
        return False
    try:
        names = os.listdir(_FDS)
    except OSError:
        return False
    for name in names:
        try:
            fd = int(name)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            probe = socket.socket(fileno=os.dup(fd))
        except (OSError, ValueError):
            continue
        with probe:
            try:
                if probe.type != socket.SOCK_STREAM:
                    continue
                if tuple(probe.getpeername()[:2]) != peer or tuple(probe.getsockname()[:2]) != own:
                    continue
            except OSError:
                continue
            with contextlib.suppress(OSError):
                probe.shutdown(socket.SHUT_RDWR)
            return True
    return False
