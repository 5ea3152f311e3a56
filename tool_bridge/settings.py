"""How long the tool bridge waits, and how much output a call keeps."""

from __future__ import annotations

import msgspec

from tool_bridge._process import DEFAULT_OUTPUT_CAP, DEFAULT_TERMINATE_GRACE
from tool_bridge.tools import ToolLimits

__all__ = ["ToolBridgeSettings", "ToolBridgeSettingsError"]


class ToolBridgeSettingsError(ValueError):
    """A `ToolBridgeSettings` value is out of range."""


class ToolBridgeSettings(msgspec.Struct, frozen=True):
    """How long the tool bridge waits, and how much output a call keeps.

    After `AbortTools`, running calls get ``abort_grace`` seconds to end on their own before they are
    recorded ``aborted``; ``kill_after`` seconds after the abort whatever still runs is killed. A
    permission request unanswered for ``permission_timeout`` seconds is denied. ``output_cap`` and
    ``terminate_grace`` (SIGTERM to SIGKILL for a process group) go into every call's `ToolLimits`. A
    ToolActor that has not started its call ``start_timeout`` seconds after being told to is recorded
    ``crashed``. Raises `ToolBridgeSettingsError` for a negative duration, a ``kill_after`` shorter
    than ``abort_grace``, or a non-positive ``permission_timeout`` or ``start_timeout``.
    """

    abort_grace: float = 2.5
    kill_after: float = 10.0
    permission_timeout: float = 60.0
    output_cap: int = DEFAULT_OUTPUT_CAP
    terminate_grace: float = DEFAULT_TERMINATE_GRACE
    start_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.abort_grace >= 0:
            raise ToolBridgeSettingsError(f"abort_grace must be >= 0, got {self.abort_grace!r}")
        if not self.kill_after >= self.abort_grace:
            raise ToolBridgeSettingsError(
                f"kill_after ({self.kill_after!r}) must be >= abort_grace ({self.abort_grace!r})"
            )
        for name in ("permission_timeout", "start_timeout"):
            value = getattr(self, name)
            if not value > 0:
                raise ToolBridgeSettingsError(f"{name} must be > 0, got {value!r}")
        if not self.terminate_grace >= 0:
            raise ToolBridgeSettingsError(f"terminate_grace must be >= 0, got {self.terminate_grace!r}")
        if self.output_cap < 0:
            raise ToolBridgeSettingsError(f"output_cap must be >= 0, got {self.output_cap!r}")

    @property
    def limits(self) -> ToolLimits:
        """The limits every call runs with."""
        return ToolLimits(output_cap=self.output_cap, terminate_grace=self.terminate_grace)
