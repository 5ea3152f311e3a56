"""Confining paths to the workspace root."""

from __future__ import annotations

import os
from pathlib import Path

from tool_bridge.tools import ToolError

__all__ = ["WorkspaceEscapeError", "display_path", "resolve_in_workspace"]


class WorkspaceEscapeError(ToolError):
    """A path given to a file tool leads outside the workspace root (by ``..``, by being absolute
    elsewhere, or through a symlink)."""


def resolve_in_workspace(root: Path, path: str) -> Path:
    """Return the real location of ``path`` (relative paths start at ``root``) if it lies inside ``root``.

    Every symlink on the way is followed, including a dangling one and the parents of a path that
    does not exist yet, so the returned path is where a read or write would really land.  Raises
    `WorkspaceEscapeError` when that is outside ``root``, and `ToolError` for a path that is not a
    valid file name (e.g. one containing NUL).  A symlink changed by someone else between this check
    and the use of the path is not guarded against.
    """
    real_root = Path(os.path.realpath(root))
    try:
        real = Path(os.path.realpath(real_root / path))
    except ValueError as exc:
        raise ToolError(f"invalid path {path!r}: {exc}") from None
    if not real.is_relative_to(real_root):
        raise WorkspaceEscapeError(f"path `{path}` is outside the workspace")
    return real


def display_path(root: Path, real: Path) -> str:
    """``real`` (a path returned by `resolve_in_workspace`) as the model should see it: relative to
    the workspace root, with ``/`` separators; the root itself is ``.``."""
    relative = real.relative_to(os.path.realpath(root)).as_posix()
    return relative or "."
