"""The ``shell`` tool: a ``bash -c`` command line run in the workspace, in its own process group."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

import msgspec

from tool_bridge.idempotency import Idempotency
from tool_bridge.sandbox import Sandbox
from tool_bridge.tools import ProcessSpec, Tool, ToolContext, ToolDefinitionError, ToolKind

__all__ = ["DEFAULT_SHELL_TIMEOUT", "MAX_SHELL_TIMEOUT", "ShellArgs", "shell_tool"]

DEFAULT_SHELL_TIMEOUT = 120.0
"""Seconds a command may run when the call does not ask for another limit."""
MAX_SHELL_TIMEOUT = 600.0
"""The most seconds a call may ask for; a larger request is clamped to it, with a note."""


class ShellArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Arguments of `shell`."""

    command: Annotated[str, msgspec.Meta(min_length=1, description="The bash command line to run.")]
    timeout: Annotated[
        Annotated[float, msgspec.Meta(gt=0)] | None,
        msgspec.Meta(description="Seconds before the command is killed."),
    ] = None


def shell_tool(
    *,
    default_timeout: float = DEFAULT_SHELL_TIMEOUT,
    max_timeout: float = MAX_SHELL_TIMEOUT,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> Tool[ShellArgs]:
    """Build the ``shell`` tool.

    A call runs ``bash -c <command>`` with the workspace as working directory, stdin from
    ``/dev/null`` and ``env`` as environment (default: this process's; see
    `tool_bridge.environment.tool_environment` for one without credentials).  With ``sandbox``, the
    command runs as `Sandbox.wrap` says: confined to the workspace, or refused with
    `SandboxUnavailableError` (an error outcome) when the sandbox is required but unavailable; the
    timeouts, the process-group kill and the partial output on a stop are the same inside it.

    It succeeds on exit code 0; any other exit is an error showing the exit code and the output.  A
    call's ``timeout`` above ``max_timeout`` is clamped to it and the output says so (the call is not
    refused).  On timeout or abort the process group is terminated and the output so far is returned,
    marked interrupted.  It is side-effecting (`Idempotency.SIDE_EFFECTING`): a command can do anything.
    Raises `ToolDefinitionError` unless ``0 < default_timeout <= max_timeout``.
    """
    if not 0 < default_timeout <= max_timeout:
        raise ToolDefinitionError(
            f"shell needs 0 < default_timeout <= max_timeout, got {default_timeout} and {max_timeout}"
        )

    def shell(args: ShellArgs, context: ToolContext) -> ProcessSpec:
        timeout = default_timeout if args.timeout is None else args.timeout
        note = None
        if timeout > max_timeout:
            note = f"note: timeout {timeout:g} s is above the maximum; used {max_timeout:g} s"
            timeout = max_timeout
        argv: tuple[str, ...] = ("bash", "-c", args.command)
        if sandbox is not None:
            argv = sandbox.wrap(argv, context.workspace, os.environ if env is None else env)
        return ProcessSpec(argv=argv, env=env, timeout=timeout, note=note)

    return Tool(
        name="shell",
        description=(
            "Run a bash command line in the workspace directory and return its stdout and stderr "
            f"(each capped). It is killed, with its whole process group, after `timeout` seconds "
            f"(default {default_timeout:g}, at most {max_timeout:g}). A non-zero exit code is an error."
        ),
        args_type=ShellArgs,
        fn=shell,
        kind=ToolKind.PROCESS,
        timeout=default_timeout,
        idempotency=Idempotency.SIDE_EFFECTING,
    )
