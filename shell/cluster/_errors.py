"""The errors of a host pool; each is a :class:`shell.HostError`, so code written for a local host
handles them too."""

from __future__ import annotations

from ..host import HostError

__all__ = ["ClusterUnavailable", "PoolError", "ReplicaError", "ReplicaUnavailable"]


class PoolError(HostError):
    """A host pool cannot do what was asked."""


class ClusterUnavailable(PoolError):
    """Ray is not installed (``pip install 'turnkeep[ray]'``), the cluster cannot be joined, or its
    replicas did not start within ``cluster.start_timeout``."""


class ReplicaUnavailable(PoolError):
    """No replica took the request before its deadline.

    ``delivered`` says whether the message reached the session: False (it did not: sending it again is
    safe), or None (unknown: the replica stopped while the request was in flight; a turn it started is
    reported as interrupted once the session is resumed elsewhere).
    """

    def __init__(self, message: str, *, delivered: bool | None) -> None:
        super().__init__(message)
        self.delivered = delivered


class ReplicaError(PoolError):
    """A replica failed the request with an error that has no local counterpart; ``kind`` is its name."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind
