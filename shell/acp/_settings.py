"""The settings of ``turnkeep acp``."""

from __future__ import annotations

import msgspec

__all__ = ["AcpSettings"]


class AcpSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How the agent talks to its client.

    ``max_line_bytes`` bounds every line read (a longer one is dropped and answered -32600) and every
    line written (texts in updates are clipped to fit); ``permission_timeout`` is how long a permission
    request waits for the client's answer before it counts as a denial; ``abort_grace`` is how long turns
    get to end when the agent stops (stdin closed, SIGTERM) before the answers still owed are written.
    Raises ValueError for a value out of range."""

    max_line_bytes: int = 64 << 20
    permission_timeout: float = 60.0
    abort_grace: float = 2.5

    def __post_init__(self) -> None:
        if self.max_line_bytes < 4096:
            raise ValueError(f"max_line_bytes must be at least 4096, got {self.max_line_bytes}")
        if not self.permission_timeout > 0:
            raise ValueError(f"permission_timeout must be positive, got {self.permission_timeout}")
        if not self.abort_grace >= 0:
            raise ValueError(f"abort_grace must not be negative, got {self.abort_grace}")
