"""Whether and how the ``shell`` tool's commands are sandboxed: the mode, the probe of this machine, and
the wrapping of one command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from tool_bridge.sandbox._layout import Hidden, sandbox_argv, sibling_cover
from tool_bridge.tools import ToolError

__all__ = [
    "PROBE_TIMEOUT",
    "Sandbox",
    "SandboxMode",
    "SandboxProbe",
    "SandboxUnavailableError",
    "SandboxVerdict",
    "probe_sandbox",
    "sandbox_verdict",
]

SandboxMode = Literal["auto", "required", "off"]
"""``auto``: sandbox when this machine can, else run unsandboxed (and say so at start); ``required``:
refuse to run a command unsandboxed; ``off``: never sandbox."""

SandboxVerdict = Literal["sandboxed", "unsandboxed", "refused"]
"""What becomes of a command: run in the sandbox, run without it, or not run at all."""

PROBE_TIMEOUT = 10.0
"""Seconds the trial run of the sandbox may take before it counts as not working."""


class SandboxUnavailableError(ToolError):
    """The sandbox is required (``[tools.sandbox] mode = "required"``) but cannot be used on this machine;
    the command was not run.  The message says why and what to do."""


@dataclass(frozen=True, slots=True)
class SandboxProbe:
    """Whether a bubblewrap sandbox works on this machine: ``bwrap`` is the program's path when found,
    ``reason`` says why it is not ``usable`` ("" when it is)."""

    usable: bool
    bwrap: str | None
    reason: str = ""


_probes: dict[str | None, SandboxProbe] = {}
_probe_lock = threading.Lock()


def probe_sandbox(bwrap: str | None = None, *, fresh: bool = False) -> SandboxProbe:
    """Try the sandbox once on this machine with a real command (``true`` in a throwaway workspace).

    ``bwrap`` is the program to use (default: ``bwrap`` found on ``PATH``).  The answer is remembered per
    program for the life of the process unless ``fresh``.  Never raises: a missing program, a platform
    other than Linux, user namespaces refused, or no answer within `PROBE_TIMEOUT` seconds all give an
    unusable probe with the reason.
    """
    with _probe_lock:
        if not fresh and bwrap in _probes:
            return _probes[bwrap]
        probe = _try(bwrap)
        _probes[bwrap] = probe
        return probe


def _try(bwrap: str | None) -> SandboxProbe:
    if not sys.platform.startswith("linux"):
        return SandboxProbe(False, None, f"the sandbox needs Linux, this is {sys.platform}")
    program = shutil.which(bwrap or "bwrap")
    if program is None:
        return SandboxProbe(
            False, None, f"{bwrap or 'bwrap'} is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
        )
    with tempfile.TemporaryDirectory(prefix="turnkeep-probe-") as workspace:
        argv = sandbox_argv(["true"], workspace=os.path.realpath(workspace), bwrap=program)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            return SandboxProbe(False, program, f"a trial sandbox did not finish within {PROBE_TIMEOUT:g} s")
        except OSError as error:
            return SandboxProbe(False, program, f"{program} cannot be run: {error.strerror or error}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = said[-1] if said else f"exit code {done.returncode}"
        return SandboxProbe(False, program, f"a trial command in the sandbox failed ({detail})")
    return SandboxProbe(True, program)


def sandbox_verdict(mode: SandboxMode, probe: SandboxProbe | None) -> SandboxVerdict:
    """What happens to a command under ``mode`` on a machine where the sandbox is as ``probe`` found it
    (``None``: not probed, which only ``off`` allows)."""
    if mode == "off":
        return "unsandboxed"
    if probe is not None and probe.usable:
        return "sandboxed"
    return "refused" if mode == "required" else "unsandboxed"


def _no_paths() -> Iterable[str]:
    return ()


@dataclass(frozen=True)
class Sandbox:
    """How the ``shell`` tool confines a command.

    ``hidden`` is called for each command and gives the paths to hide besides the workspace's parent
    (hidden when ``hide_siblings``, unless it is a system directory or holds a directory on the command's
    ``PATH``): the user's home, the store's directory and files, other sessions' workspaces.  ``network``
    keeps the host's network.  Raises ``ValueError`` for an unknown mode, or for a mode other than
    ``off`` without a probe.
    """

    mode: SandboxMode = "auto"
    probe: SandboxProbe | None = None
    network: bool = False
    hidden: Callable[[], Iterable[str]] = field(default=_no_paths, compare=False)
    hide_siblings: bool = True

    def __post_init__(self) -> None:
        if self.mode not in get_args(SandboxMode):
            raise ValueError(f'sandbox mode must be "auto", "required" or "off", got {self.mode!r}')
        if self.mode != "off" and self.probe is None:
            raise ValueError(f"sandbox mode {self.mode!r} needs a probe of this machine (probe_sandbox())")

    @property
    def verdict(self) -> SandboxVerdict:
        """What becomes of every command under this sandbox."""
        return sandbox_verdict(self.mode, self.probe)

    def describe(self) -> str:
        """One line saying what is in force, for a start-up notice."""
        reason = self.probe.reason if self.probe is not None else ""
        verdict = self.verdict
        if verdict == "sandboxed":
            network = "with the network" if self.network else "no network"
            return f"bubblewrap (workspace read-write, the rest read-only, home and store hidden, {network})"
        if verdict == "refused":
            return f"required but unavailable, shell commands are refused: {reason}"
        if self.mode == "off":
            return "off (shell commands run unconfined)"
        return f"none, shell commands run unconfined: {reason}"

    def wrap(self, argv: Sequence[str], workspace: Path, env: Mapping[str, str]) -> tuple[str, ...]:
        """``argv`` as it must be run for ``workspace``, whose command will have ``env``: inside the sandbox,
        or as it is when the sandbox is off or (``auto``) unavailable.  Raises `SandboxUnavailableError`
        when it is required but unavailable."""
        verdict = self.verdict
        if verdict == "unsandboxed":
            return tuple(argv)
        if verdict == "refused":
            reason = self.probe.reason if self.probe is not None else "not probed"
            raise SandboxUnavailableError(
                'refused: [tools.sandbox] mode is "required" but the sandbox cannot be used here '
                f'({reason}); install bubblewrap and allow user namespaces, or set mode = "auto" or "off"'
            )
        assert self.probe is not None and self.probe.bwrap is not None
        real = os.path.realpath(workspace)
        paths = list(self.hidden())
        if self.hide_siblings:
            path_dirs = [d for d in env.get("PATH", "").split(":") if os.path.isabs(d)]
            cover = sibling_cover(real, path_dirs)
            if cover is not None:
                paths.append(cover)
        hidden = [h for h in (_resolve(p) for p in paths) if h is not None]
        return tuple(
            sandbox_argv(argv, workspace=real, hidden=hidden, network=self.network, bwrap=self.probe.bwrap)
        )


def _resolve(path: str | os.PathLike[str]) -> Hidden | None:
    """``path`` as it really is, or ``None`` when there is nothing there to hide."""
    real = os.path.realpath(os.path.expanduser(path))
    if os.path.isdir(real):
        return Hidden(real, True)
    if os.path.exists(real):
        return Hidden(real, False)
    return None
