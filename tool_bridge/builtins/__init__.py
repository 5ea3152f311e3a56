"""The built-in tools: ``shell``, ``read_file``, ``write_file``, ``edit_file`` and ``list_dir``."""

from __future__ import annotations

from collections.abc import Mapping

from tool_bridge.builtins._workspace import WorkspaceEscapeError, resolve_in_workspace
from tool_bridge.builtins.files import (
    EDIT_FILE,
    LIST_DIR,
    READ_FILE,
    WRITE_FILE,
    EditFileArgs,
    ListDirArgs,
    ReadFileArgs,
    WriteFileArgs,
)
from tool_bridge.builtins.shell import DEFAULT_SHELL_TIMEOUT, MAX_SHELL_TIMEOUT, ShellArgs, shell_tool
from tool_bridge.sandbox import Sandbox
from tool_bridge.tools import ToolRegistry

__all__ = [
    "DEFAULT_SHELL_TIMEOUT",
    "EDIT_FILE",
    "LIST_DIR",
    "MAX_SHELL_TIMEOUT",
    "READ_FILE",
    "WRITE_FILE",
    "EditFileArgs",
    "ListDirArgs",
    "ReadFileArgs",
    "ShellArgs",
    "WorkspaceEscapeError",
    "WriteFileArgs",
    "builtin_registry",
    "resolve_in_workspace",
    "shell_tool",
]


def builtin_registry(
    *,
    shell_default_timeout: float = DEFAULT_SHELL_TIMEOUT,
    shell_max_timeout: float = MAX_SHELL_TIMEOUT,
    shell_env: Mapping[str, str] | None = None,
    shell_sandbox: Sandbox | None = None,
) -> ToolRegistry:
    """A new registry holding the five built-in tools: shell, read_file, write_file, edit_file, list_dir;
    ``shell_env`` and ``shell_sandbox`` are the ``shell`` tool's environment and sandbox (`shell_tool`).

    Their idempotency classes (`tool_bridge.Idempotency`):

    ==============  ================  =====================================================================
    tool            class             why
    ==============  ================  =====================================================================
    ``read_file``   read-only         it only reads a file
    ``list_dir``    read-only         it only reads a directory
    ``write_file``  idempotent        the same content written again leaves the same file
    ``edit_file``   side-effecting    run again, it fails (``old`` is gone) or replaces a second time
    ``shell``       side-effecting    a command line can do anything
    ==============  ================  =====================================================================
    """
    shell = shell_tool(
        default_timeout=shell_default_timeout,
        max_timeout=shell_max_timeout,
        env=shell_env,
        sandbox=shell_sandbox,
    )
    return ToolRegistry([shell, READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIR])
