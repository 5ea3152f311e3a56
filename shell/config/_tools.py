"""The ``[tools.env]`` and ``[tools.sandbox]`` settings: what a ``shell`` command sees of the host's
environment, and whether it runs in the sandbox."""

from __future__ import annotations

from typing import Literal

import msgspec

from tool_bridge import EnvPolicy, EnvPolicyError

__all__ = ["ToolEnvSettings", "ToolSandboxSettings"]


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
