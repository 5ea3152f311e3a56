"""The bubblewrap command line for one sandboxed command: a pure function of the workspace, the paths to
hide and whether the network is kept."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["PRIVATE_DIRS", "SYSTEM_DIRS", "Hidden", "sandbox_argv", "sibling_cover"]

PRIVATE_DIRS = ("/tmp", "/var/tmp")
"""Replaced by an empty directory of the sandbox's own."""

SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt"}
    | {
        "/nix",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/snap",
        "/srv",
        "/sys",
        "/usr",
        "/usr/local",
        "/var",
    }
)
"""Directories never hidden as a workspace's parent: hiding one would take the system's programs away or
hide more than a host's own folder of workspaces."""

# Signals: a command must see SIGTERM as it would outside (a trap runs, else it dies), but the bwrap
# monitor process, which the process-group SIGTERM reaches too, must outlive it so that the grace works;
# SIGKILL to the group still ends bwrap and, through --die-with-parent, the whole PID namespace.
_IGNORE_TERM = ("env", "--ignore-signal=TERM")
_DEFAULT_TERM = ("env", "--default-signal=TERM")

_BASE = (
    "--die-with-parent",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
)


@dataclass(frozen=True, slots=True)
class Hidden:
    """A path to hide, as it really is (``path`` absolute, without symlinks): a directory is covered by an
    empty one, a file by a device node the sandbox may not open (reading it fails: permission denied)."""

    path: str
    is_dir: bool


def _inside(path: str, root: str) -> bool:
    return PurePosixPath(path).is_relative_to(root)


def _covered(path: str, by: Iterable[str]) -> bool:
    return any(_inside(path, other) for other in by if other != path)


def sandbox_argv(
    command: Sequence[str],
    *,
    workspace: str,
    hidden: Iterable[Hidden] = (),
    network: bool = False,
    bwrap: str = "bwrap",
) -> list[str]:
    """The argv running ``command`` in a bubblewrap sandbox.

    Inside: the whole filesystem read-only; ``workspace`` (a real absolute path) read-write and the
    working directory; `PRIVATE_DIRS` empty and private; each of ``hidden`` replaced by an empty
    directory or an unreadable file (a hidden path containing the workspace hides all of it but the
    workspace; the workspace itself and ``/`` cannot be hidden and are skipped); fresh ``/dev`` and
    ``/proc``; its own PID, IPC, UTS and user namespaces; no capabilities; and no network (an empty
    network namespace of its own) unless ``network``.  The command gets SIGTERM as it would outside.
    """
    workspace = os.path.normpath(workspace)
    wanted = {h.path: h for h in hidden if h.path not in ("/", workspace) and os.path.isabs(h.path)}
    outside = [p for p in wanted if not _inside(p, workspace)]
    tops = list(PRIVATE_DIRS) + outside
    before = [p for p in outside if not _covered(p, tops)]
    inner = [p for p in wanted if _inside(p, workspace)]
    after = [p for p in inner if not _covered(p, inner)]
    argv = [*_IGNORE_TERM, bwrap, *_BASE]
    if not network:
        argv.append("--unshare-net")
    for path in PRIVATE_DIRS:
        argv += ["--tmpfs", path]
    for path in sorted(before):
        argv += _hide(wanted[path])
    argv += ["--bind", workspace, workspace]
    for path in sorted(after):
        argv += _hide(wanted[path])
    argv += ["--chdir", workspace, "--", *_DEFAULT_TERM, *command]
    return argv


def _hide(hidden: Hidden) -> list[str]:
    if hidden.is_dir:
        return ["--tmpfs", hidden.path]
    return ["--ro-bind", "/dev/null", hidden.path]


def sibling_cover(workspace: str, keep: Iterable[str] = ()) -> str | None:
    """The workspace's parent directory, to hide what lies beside the workspace (other sessions'
    workspaces, a store kept next to them), or ``None`` when it must stay visible: when it is one of
    `SYSTEM_DIRS` or contains one of ``keep`` (the directories on ``PATH``, say)."""
    parent = os.path.dirname(os.path.normpath(workspace))
    if parent in SYSTEM_DIRS or any(_inside(os.path.normpath(path), parent) for path in keep if path):
        return None
    return parent
