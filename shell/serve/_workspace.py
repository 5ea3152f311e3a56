"""Which directories a client may open a session in: only under the configured workspace root."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["WorkspaceRefused", "confine"]


class WorkspaceRefused(Exception):
    """The workspace asked for is not under the workspace root (itself, through ``..``, or through a
    symlink that leads out). Answered with 403."""


def confine(root: Path, requested: str) -> Path:
    """The real path of ``requested`` (relative to ``root`` unless absolute) if it lies under ``root``.

    Symlinks are resolved on both sides before the comparison, so a link inside the root that points out
    of it is refused; a path that does not exist yet is judged by its nearest existing parent. Raises
    :class:`WorkspaceRefused`, and :class:`ValueError` for an empty path or one with a NUL byte.
    """
    if not requested.strip() or "\x00" in requested:
        raise ValueError("the workspace must be a non-empty path")
    real_root = Path(os.path.realpath(root))
    candidate = Path(requested).expanduser()
    if not candidate.is_absolute():
        candidate = real_root / candidate
    real = Path(os.path.realpath(candidate))
    if real != real_root and real_root not in real.parents:
        raise WorkspaceRefused(f"the workspace {requested!r} is outside the workspace root")
    if real.exists() and not real.is_dir():
        raise ValueError(f"the workspace {requested!r} is not a directory")
    return real
