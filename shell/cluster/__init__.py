"""Sessions on a Ray cluster: a pool of host replicas behind the same façade as a local host.

``connect(config)`` returns a local :class:`shell.Host` or a :class:`PoolHost`, as the ``[cluster]``
settings say; both are :class:`shell.Host` and their sessions :class:`shell.Session`.
:func:`open_pool_host` is the trio face. Underneath, :class:`HostPool` (a :class:`shell.facade.HostBackend`)
places sessions on replicas, each an :class:`shell.AgentHost` in a Ray actor that Ray restarts when its
process dies, and moves them when a replica is lost; its :class:`PoolAddress` takes the mailbox messages a
local session's address takes.

Importing this package does not need Ray (only :mod:`shell.cluster._ray` imports it); starting a pool does
(``pip install 'turnkeep[ray]'``).
"""

from ..config import ClusterSettings, load_cluster_settings
from ._errors import ClusterUnavailable, PoolError, ReplicaError, ReplicaUnavailable
from ._hosts import PoolHost, cluster_settings, connect, open_pool_host
from ._pool import HostPool, PoolAddress, ReplicaStatus

__all__ = [
    "ClusterSettings",
    "ClusterUnavailable",
    "HostPool",
    "PoolAddress",
    "PoolError",
    "PoolHost",
    "ReplicaError",
    "ReplicaStatus",
    "ReplicaUnavailable",
    "cluster_settings",
    "connect",
    "load_cluster_settings",
    "open_pool_host",
]
