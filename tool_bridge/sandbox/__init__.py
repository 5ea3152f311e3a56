"""The sandbox of the ``shell`` tool on Linux: bubblewrap, with the workspace read-write, the rest of the
filesystem read-only, the home, the store and other sessions' workspaces hidden, a private ``/tmp``, its
own PID namespace and no network unless asked."""

from __future__ import annotations

from tool_bridge.sandbox._layout import PRIVATE_DIRS, SYSTEM_DIRS, Hidden, sandbox_argv, sibling_cover
from tool_bridge.sandbox._sandbox import (
    PROBE_TIMEOUT,
    Sandbox,
    SandboxMode,
    SandboxProbe,
    SandboxUnavailableError,
    SandboxVerdict,
    probe_sandbox,
    sandbox_verdict,
)

__all__ = [
    "PRIVATE_DIRS",
    "PROBE_TIMEOUT",
    "SYSTEM_DIRS",
    "Hidden",
    "Sandbox",
    "SandboxMode",
    "SandboxProbe",
    "SandboxUnavailableError",
    "SandboxVerdict",
    "probe_sandbox",
    "sandbox_argv",
    "sandbox_verdict",
    "sibling_cover",
]
