"""The replicas as Ray actors: joining the cluster, starting them, and calling them with deadlines.

This is the only module of turnkeep that imports Ray.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError, RayActorError

from ..config import ClusterSettings
from . import _wire as wire
from ._handle import ReplicaGone, ReplicaUnreachable
from ._replica import ReplicaCore

__all__ = ["RayReplica", "join", "leave", "start_replicas"]

logger = logging.getLogger("turnkeep.pool")

_CONCURRENCY = 64
"""Requests one replica serves at once (a poll waits in one of them)."""


def join(cluster: ClusterSettings) -> bool:
    """Make sure this process is connected to a Ray cluster; True when this call started the connection
    (and so :func:`leave` should end it)."""
    if ray.is_initialized():
        return False
    ray.init(address=cluster.address, namespace=cluster.namespace, include_dashboard=False)
    return True


def leave() -> None:
    """Disconnect from the cluster (and stop it, if this process started it)."""
    ray.shutdown()


class RayReplica:
    """A replica running as a Ray actor that Ray restarts when its process dies."""

    def __init__(self, name: str, actor: Any) -> None:
        self._name = name
        self._actor = actor

    @property
    def name(self) -> str:
        """The actor's name in its namespace."""
        return self._name

    def call(self, request: bytes, timeout: float) -> bytes:
        """See :meth:`ReplicaHandle.call`."""
        try:
            reply = ray.get(self._actor.call.remote(request), timeout=timeout)
        except GetTimeoutError as exc:
            raise ReplicaUnreachable(f"{self._name} did not answer within {timeout:g} s") from exc
        except ActorUnavailableError as exc:
            raise ReplicaUnreachable(f"{self._name} is unavailable: {exc}") from exc
        except ActorDiedError as exc:
            raise ReplicaGone(f"{self._name} has died for good: {exc}") from exc
        except RayActorError as exc:
            raise ReplicaUnreachable(f"{self._name} failed: {exc}") from exc
        if not isinstance(reply, bytes):
            raise ReplicaUnreachable(f"{self._name} answered {type(reply).__name__}, not bytes")
        return reply

    def restart(self) -> None:
        """See :meth:`ReplicaHandle.restart`."""
        try:
            ray.kill(self._actor, no_restart=False)
        except Exception:
            logger.warning("could not restart %s", self._name, exc_info=True)

    def stop(self) -> None:
        """See :meth:`ReplicaHandle.stop`."""
        try:
            ray.kill(self._actor, no_restart=True)
        except Exception:
            logger.warning("could not stop %s", self._name, exc_info=True)


def start_replicas(settings: bytes, cluster: ClusterSettings) -> list[RayReplica]:
    """Start ``cluster.replicas`` replicas (spread over the cluster's nodes), each restarted by Ray up to
    ``cluster.max_restarts`` times, and each built from the encoded ``settings``.

    The first replica is started alone, and the others once it answers: it prepares the store (creates
    or migrates it), so the others never find it half made. Raises :class:`ReplicaUnreachable` or
    :class:`ReplicaGone` when the first one does not start within ``cluster.start_timeout``.
    """
    actor_class = ray.remote(ReplicaCore)
    pool_id = uuid.uuid4().hex[:8]

    def start(index: int) -> RayReplica:
        name = f"turnkeep-{pool_id}-{index}"
        actor = actor_class.options(
            name=name,
            namespace=cluster.namespace,
            max_restarts=cluster.max_restarts,
            max_task_retries=0,
            max_concurrency=_CONCURRENCY,
            num_cpus=cluster.replica_cpus,
            scheduling_strategy="SPREAD",
        ).remote(settings)
        return RayReplica(name, actor)

    first = start(0)
    try:
        first.call(wire.encode(wire.Ping()), cluster.start_timeout)
    except BaseException:
        first.stop()
        raise
    return [first, *(start(index) for index in range(1, cluster.replicas))]
