"""The façade over a pool: :class:`PoolHost`, and :func:`connect`, which picks a local host or a pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from ..config import ClusterSettings, Settings, load_cluster_settings, load_settings
from ..facade import AsyncHost, Host
from ._errors import PoolError
from ._pool import HostPool

__all__ = ["PoolHost", "cluster_settings", "connect", "open_pool_host"]


def _settings(config: Settings | str | Path | None) -> Settings:
    return config if isinstance(config, Settings) else load_settings(config)


def cluster_settings(
    settings: Settings, cluster: ClusterSettings | str | Path | None = None
) -> ClusterSettings:
    """The cluster settings in force: ``cluster`` if given (settings, or a TOML file with a ``[cluster]``
    table), else the ``cluster`` section of ``settings``, else the defaults (``backend = "local"``)."""
    if isinstance(cluster, ClusterSettings):
        return cluster
    if cluster is not None:
        return load_cluster_settings(cluster)
    return settings.cluster


class PoolHost(Host):
    """A :class:`shell.Host` whose sessions run on a pool of replicas; its sessions are the same
    :class:`shell.Session` (a turn cut short by a lost replica ends ``TurnCancelled(reason="interrupted")``).

    ``config`` is a :class:`Settings`, a TOML file path, or None (defaults and ``TURNKEEP_*``);
    ``cluster`` is as for :func:`cluster_settings`, its backend taken to be ``ray``. Raises
    :class:`ClusterUnavailable` when the replicas cannot be started.
    """

    def __init__(
        self,
        config: Settings | str | Path | None = None,
        *,
        cluster: ClusterSettings | str | Path | None = None,
    ) -> None:
        settings = _settings(config)
        chosen = cluster_settings(settings, cluster)
        if chosen.backend != "ray":
            chosen = msgspec.structs.replace(chosen, backend="ray")
        self.pool = HostPool(settings, chosen)
        super().__init__(backend=self.pool)


def connect(
    config: Settings | str | Path | None = None,
    *,
    cluster: ClusterSettings | str | Path | None = None,
    **options: Any,
) -> Host:
    """A local :class:`shell.Host` or a :class:`PoolHost`, as the cluster settings (see
    :func:`cluster_settings`) say: the same code runs against either. ``options`` go to the local
    :class:`shell.AgentHost`; a pool refuses them (:class:`PoolError`), as they cannot cross processes."""
    settings = _settings(config)
    chosen = cluster_settings(settings, cluster)
    if chosen.backend == "local":
        return Host(settings, **options)
    if options:
        raise PoolError(f"a pool's replicas are built from the settings alone; drop {sorted(options)}")
    return PoolHost(settings, cluster=chosen)


@asynccontextmanager
async def open_pool_host(
    config: Settings | str | Path | None = None, *, cluster: ClusterSettings | str | Path | None = None
) -> AsyncIterator[AsyncHost]:
    """``async with open_pool_host(config) as host:`` — a pool whose sessions are driven from trio."""
    async with AsyncHost.running(lambda: PoolHost(config, cluster=cluster)) as host:
        yield host
