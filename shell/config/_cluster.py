"""Where sessions run: in this process, or on host replicas of a Ray cluster."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._checks import is_int, is_positive

__all__ = ["ClusterSettings"]


class ClusterSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[cluster]`` table: where sessions run and how the replicas that run them behave.

    ``backend = "local"`` (the default) runs every session in this process, as :class:`shell.Host` does;
    ``"ray"`` runs them on ``replicas`` host replicas, each a Ray actor in a process of its own, all
    sharing the store of ``[store]``. A wrong value raises :class:`ValueError` naming the key
    (``cluster.replicas: …``), which :func:`shell.load_settings` reports as a ``ConfigError``.
    """

    backend: Literal["local", "ray"] = "local"
    address: str | None = None
    """The Ray cluster to join (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``); none: the one this process
    already joined, else a new one-machine cluster."""
    namespace: str = "turnkeep"
    replicas: int = 2
    max_restarts: int = -1
    """How often Ray restarts a replica whose process died; -1: always."""
    replica_cpus: float = 1.0
    """The CPUs Ray reserves for each replica (0 is allowed: replicas mostly wait on the network)."""
    call_timeout: float = 30.0
    """Seconds the pool waits for a replica to answer one request."""
    restart_wait: float = 30.0
    """Seconds the pool waits for a replica that stopped answering to come back before it restarts the
    replica itself and moves its sessions to the others."""
    start_timeout: float = 120.0
    """Seconds a new replica may take to start (a cluster may first have to find room for it)."""

    def __post_init__(self) -> None:
        if not (is_int(self.replicas) and self.replicas >= 1):
            raise ValueError(f"cluster.replicas: must be a whole number >= 1, got {self.replicas!r}")
        if not (is_int(self.max_restarts) and self.max_restarts >= -1):
            raise ValueError(
                f"cluster.max_restarts: must be a whole number >= -1 (-1: always), got {self.max_restarts!r}"
            )
        if not (is_positive(self.replica_cpus) or self.replica_cpus == 0):
            raise ValueError(f"cluster.replica_cpus: must be a number >= 0, got {self.replica_cpus!r}")
        for key in ("call_timeout", "restart_wait", "start_timeout"):
            if not is_positive(getattr(self, key)):
                raise ValueError(f"cluster.{key}: must be a number > 0, got {getattr(self, key)!r}")
        if not (isinstance(self.namespace, str) and self.namespace.strip()):
            raise ValueError(f"cluster.namespace: must be a non-empty name, got {self.namespace!r}")
        if self.address is not None and not (isinstance(self.address, str) and self.address.strip()):
            raise ValueError(f"cluster.address: must be a cluster address or absent, got {self.address!r}")
