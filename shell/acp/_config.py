"""The session settings an editor may change over ACP: the model and the permission mode. Pure.

- ``model`` (category ``model``): ``provider.model`` or one of ``provider.models``, for the session's
  next turn;
- ``permission_mode`` (category ``mode``): ``ask``, ``allow`` or ``deny``, what becomes of the calls the
  host's rules leave open.

The host's allow and deny rules and its hooks decide first in every mode; the mode only settles what they
would have asked about.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from tool_bridge import PermissionMode

from ._jsonrpc import INVALID_PARAMS, RpcError
from ._schema import SessionConfigOption, SessionConfigSelectOption

__all__ = ["MODEL", "PERMISSION_MODE", "SessionConfig", "config_options"]

MODEL = "model"
PERMISSION_MODE = "permission_mode"

_MODES: dict[str, tuple[str, str]] = {
    "ask": ("Ask", "Ask before a call the host's rules leave open"),
    "allow": ("Allow", "Run the calls the host's rules leave open without asking"),
    "deny": ("Deny", "Refuse the calls the host's rules leave open without asking"),
}
assert set(_MODES) == set(get_args(PermissionMode))


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """One session's settings as the editor sees them."""

    model: str
    permission_mode: PermissionMode = "ask"

    def set(self, config_id: str, value: object, models: list[str]) -> SessionConfig:
        """These settings with ``config_id`` set to ``value``, a model one of ``models``. Raises
        :class:`RpcError` -32602 for an unknown option or a value it does not take."""
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, f"the option {config_id!r} takes one of its values, got {value!r}")
        if config_id == MODEL:
            if value not in models:
                raise RpcError(INVALID_PARAMS, f"the model is one of {', '.join(models)}; got {value!r}")
            return SessionConfig(value, self.permission_mode)
        if config_id == PERMISSION_MODE:
            if value not in _MODES:
                raise RpcError(
                    INVALID_PARAMS, f"the permission mode is one of ask, allow, deny; got {value!r}"
                )
            return SessionConfig(self.model, value)  # type: ignore[arg-type]
        raise RpcError(
            INVALID_PARAMS, f"there is no option {config_id!r} (there are {MODEL}, {PERMISSION_MODE})"
        )


def config_options(config: SessionConfig, models: list[str]) -> list[SessionConfigOption]:
    """Every option of a session, with its value in ``config``."""
    return [
        SessionConfigOption(
            id=MODEL,
            name="Model",
            category="model",
            current_value=config.model,
            options=[SessionConfigSelectOption(value=model, name=model) for model in models],
            description="The model of the session's next turn",
        ),
        SessionConfigOption(
            id=PERMISSION_MODE,
            name="Permissions",
            category="mode",
            current_value=config.permission_mode,
            options=[
                SessionConfigSelectOption(value=value, name=name, description=description)
                for value, (name, description) in _MODES.items()
            ],
            description="What becomes of the tool calls the host's permission rules leave open",
        ),
    ]
