"""The settings of one MCP server: how to reach it, which of its tools to offer, and how long to wait."""

from __future__ import annotations

import math
import re
import shlex
from typing import Literal

import msgspec

from tool_bridge.mcp.errors import McpSettingsError

__all__ = ["McpServerSettings", "parse_mcp_option", "server_name_ok"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def server_name_ok(name: str) -> bool:
    """Whether ``name`` can name a server: 1-32 letters, digits, ``_`` or ``-``, not containing ``__``
    (the separator of the tool names the model sees, ``NAME__tool``)."""
    return bool(_NAME.match(name)) and "__" not in name


def _duration(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


class McpServerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One ``[mcp_servers.NAME]`` table.

    Either ``command`` (with ``args``, ``env``, ``cwd``: a server run as a subprocess speaking over its
    stdin and stdout) or ``url`` (with ``headers`` and ``bearer_token_env``, the name of an environment
    variable holding a bearer token: a streamable HTTP server), never both. ``enabled_tools`` (when
    given) lists the only tools offered, ``disabled_tools`` those never offered. ``startup_timeout``
    bounds starting and the initialize handshake; ``tool_timeout`` bounds one call, waiting for a
    restart included. ``scope = "host"`` runs one server shared by every session; ``"session"`` one per
    session, started in the session's workspace (unless ``cwd`` says otherwise).

    ``max_restarts`` restarts within ``restart_window`` seconds are allowed; one more marks the server
    unavailable, and it is retried every ``retry_every`` seconds. It is pinged every ``ping_interval``
    seconds and restarted when it does not answer within ``ping_timeout``. A call aborted by its turn
    that the server has not let go of ``kill_after`` seconds later (it does not answer a ping) gets its
    whole process group killed and restarted. At most ``stderr_tail`` characters of its stderr are kept
    for error messages. Raises `McpSettingsError` naming the key for any value out of range.
    """

    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    bearer_token_env: str | None = None
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] = msgspec.field(default_factory=list)
    startup_timeout: float = 10.0
    tool_timeout: float = 120.0
    scope: Literal["host", "session"] = "host"
    max_restarts: int = 3
    restart_window: float = 30.0
    retry_every: float = 60.0
    ping_interval: float = 30.0
    ping_timeout: float = 10.0
    kill_after: float = 10.0
    stderr_tail: int = 4000
    enabled: bool = True

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise McpSettingsError("exactly one of `command` (stdio) or `url` (streamable HTTP) is needed")
        if self.command is not None and not self.command.strip():
            raise McpSettingsError("`command` is empty", key="command")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise McpSettingsError(f"`url` must start with http:// or https://, got {self.url!r}", key="url")
        if self.url is None and (self.headers or self.bearer_token_env):
            raise McpSettingsError("`headers` and `bearer_token_env` need `url`", key="headers")
        if self.command is None and (self.args or self.env or self.cwd):
            raise McpSettingsError("`args`, `env` and `cwd` need `command`", key="args")
        for key in (
            "startup_timeout",
            "tool_timeout",
            "restart_window",
            "retry_every",
            "ping_interval",
            "ping_timeout",
            "kill_after",
        ):
            value = getattr(self, key)
            if not _duration(value):
                raise McpSettingsError(f"must be a number of seconds > 0, got {value!r}", key=key)
        if isinstance(self.max_restarts, bool) or self.max_restarts < 0:
            raise McpSettingsError(
                f"must be a whole number >= 0, got {self.max_restarts!r}", key="max_restarts"
            )
        if isinstance(self.stderr_tail, bool) or self.stderr_tail < 0:
            raise McpSettingsError(
                f"must be a whole number >= 0, got {self.stderr_tail!r}", key="stderr_tail"
            )
        overlap = set(self.enabled_tools or ()) & set(self.disabled_tools)
        if overlap:
            raise McpSettingsError(
                f"tools both enabled and disabled: {', '.join(sorted(overlap))}", key="disabled_tools"
            )

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """How the server is reached."""
        return "stdio" if self.command is not None else "http"

    def offers(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` is offered to the model."""
        if tool in self.disabled_tools:
            return False
        return self.enabled_tools is None or tool in self.enabled_tools


def parse_mcp_option(option: str) -> tuple[str, McpServerSettings]:
    """Read ``NAME=COMMAND ARGS…`` (the CLI's ``--mcp``) into a name and stdio settings; the command line is
    split as a shell would. Raises `McpSettingsError` when the name or the command is missing or bad."""
    name, sep, command = option.partition("=")
    name = name.strip()
    if not sep or not server_name_ok(name):
        raise McpSettingsError(
            "--mcp wants NAME=COMMAND with NAME of 1-32 letters, digits, '_' or '-' (no '__'), "
            f"got {option!r}"
        )
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise McpSettingsError(f"--mcp {name}: cannot split the command line: {exc}") from None
    if not argv:
        raise McpSettingsError(f"--mcp {name}: the command is empty")
    return name, McpServerSettings(command=argv[0], args=argv[1:])
