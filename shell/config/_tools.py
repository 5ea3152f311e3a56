"""The tables of ``[tools]``: ``[tools.env]`` and ``[tools.sandbox]`` (what a ``shell`` command sees of the
host's environment, and whether it runs in the sandbox) and ``[tools.idempotency]`` (the idempotency class
of tools by name)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

import msgspec

from tool_bridge import EnvPolicy, EnvPolicyError, Idempotency

__all__ = ["ToolEnvSettings", "ToolSandboxSettings", "idempotency_classes"]

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tool's name is made of (``tool_bridge.Tool``'s rule, which MCP tools' exposed names follow)."""
_CLASSES = ", ".join(repr(each.value) for each in Idempotency)


class ToolEnvSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[tools.env]``: what a ``shell`` command sees of the host's environment (see
    :class:`tool_bridge.EnvPolicy`); credentials are always left out."""

    inherit: Literal["all", "core", "none"] = "all"
    exclude: tuple[str, ...] = ()
    include_only: tuple[str, ...] = ()
    assign: dict[str, str] = msgspec.field(default_factory=dict, name="set")

    def __post_init__(self) -> None:
        try:
            self.policy()
        except EnvPolicyError as error:
            raise ValueError(f"tools.env.{error.field}: {error.problem}") from None

    def policy(self) -> EnvPolicy:
        """These settings as the policy :func:`tool_bridge.tool_environment` applies."""
        return EnvPolicy(self.inherit, self.exclude, self.include_only, self.assign)


class ToolSandboxSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[tools.sandbox]``: whether ``shell`` commands run in the bubblewrap sandbox (``mode``: ``auto``
    uses it where it works, ``required`` refuses commands where it does not, ``off``), and whether they
    keep the network there."""

    mode: Literal["auto", "required", "off"] = "auto"
    network: bool = False


def idempotency_classes(table: Mapping[str, object]) -> dict[str, Idempotency]:
    """``[tools.idempotency]`` (tool name to class name) as the classes :meth:`tool_bridge.ToolRegistry.
    override_idempotency` sets. A name that no tool has yet is kept (an MCP server may list it later).
    Raises ``ValueError`` naming the key ``tools.idempotency.NAME`` for a name that cannot be a tool's or
    a value other than the texts ``read_only``, ``idempotent`` and ``side_effecting``."""
    classes: dict[str, Idempotency] = {}
    for name, value in table.items():
        key = f"tools.idempotency.{name}"
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"{key}: not a tool name (1-64 letters, digits, '_' or '-')")
        try:
            classes[name] = Idempotency(value if isinstance(value, str) else None)
        except ValueError:
            raise ValueError(f"{key}: expected one of {_CLASSES}, got {value!r}") from None
    return classes
