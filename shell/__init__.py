"""turnkeep's session layer: sessions whose turns always converge and lose nothing, the host that runs
many of them, its façades, the store and the configuration.

This door lists what embedding apps use; the parts a session is built from (the actors, the turn machine,
the recovery bridge) are in their own modules. :mod:`turnkeep` is the product's public face.

Each name is imported on its first use, so that importing the package (as the command line does
before it can answer a Ctrl-C) costs nothing until then."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tool_bridge import PermissionDecision, SetPermissionMode

    from ._extras import MissingExtra
    from .config import ConfigError, Settings, load_settings
    from .credentials import (
        CredentialProvider,
        CredentialRefreshError,
        NoCredentials,
        OAuthCredential,
        StaticKey,
    )
    from .events import (
        TERMINAL_EVENTS,
        AuthRefreshed,
        CompactionFinished,
        CompactionStarted,
        DoomLoopWarning,
        McpServerStatus,
        ProjectionFallback,
        PromptQueued,
        Queued,
        Retrying,
        SessionEvent,
        StepAnswered,
        StepUsage,
        SubagentEvent,
        SubagentFinished,
        SubagentStarted,
        TextDelta,
        ThoughtDelta,
        ToolCallFinished,
        ToolCallStarted,
        TurnCancelled,
        TurnCompleted,
        TurnFailed,
        TurnResumed,
        TurnStarted,
        event_to_json_dict,
    )
    from .facade import AsyncHost, AsyncSession, Host, HostBackend, Session, open_host
    from .host import AgentHost, HostError
    from .messages import Cancel, SetModel, Subscribe, Unsubscribe, UserPrompt
    from .session import SessionChaos
    from .store import SessionRecord, SessionStore, StoreError, StoreUnavailable, open_store
    from .usage import ChildUsage, Price, TokenUsage, TurnUsage

__all__ = [
    "TERMINAL_EVENTS",
    "AgentHost",
    "AsyncHost",
    "AsyncSession",
    "AuthRefreshed",
    "Cancel",
    "ChildUsage",
    "CompactionFinished",
    "CompactionStarted",
    "ConfigError",
    "CredentialProvider",
    "CredentialRefreshError",
    "DoomLoopWarning",
    "Host",
    "HostBackend",
    "HostError",
    "McpServerStatus",
    "MissingExtra",
    "NoCredentials",
    "OAuthCredential",
    "PermissionDecision",
    "Price",
    "ProjectionFallback",
    "PromptQueued",
    "Queued",
    "Retrying",
    "Session",
    "SessionChaos",
    "SessionEvent",
    "SessionRecord",
    "SessionStore",
    "SetModel",
    "SetPermissionMode",
    "Settings",
    "StaticKey",
    "StepAnswered",
    "StepUsage",
    "StoreError",
    "StoreUnavailable",
    "SubagentEvent",
    "SubagentFinished",
    "SubagentStarted",
    "Subscribe",
    "TextDelta",
    "ThoughtDelta",
    "TokenUsage",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnResumed",
    "TurnStarted",
    "TurnUsage",
    "Unsubscribe",
    "UserPrompt",
    "event_to_json_dict",
    "load_settings",
    "open_host",
    "open_store",
]

_HOMES: dict[str, str] = {
    "TERMINAL_EVENTS": ".events",
    "AgentHost": ".host",
    "AsyncHost": ".facade",
    "AsyncSession": ".facade",
    "AuthRefreshed": ".events",
    "Cancel": ".messages",
    "ChildUsage": ".usage",
    "CompactionFinished": ".events",
    "CompactionStarted": ".events",
    "ConfigError": ".config",
    "CredentialProvider": ".credentials",
    "CredentialRefreshError": ".credentials",
    "DoomLoopWarning": ".events",
    "Host": ".facade",
    "HostBackend": ".facade",
    "HostError": ".host",
    "McpServerStatus": ".events",
    "MissingExtra": "._extras",
    "NoCredentials": ".credentials",
    "OAuthCredential": ".credentials",
    "PermissionDecision": "tool_bridge",
    "Price": ".usage",
    "ProjectionFallback": ".events",
    "PromptQueued": ".events",
    "Queued": ".events",
    "Retrying": ".events",
    "Session": ".facade",
    "SessionChaos": ".session",
    "SessionEvent": ".events",
    "SessionRecord": ".store",
    "SessionStore": ".store",
    "SetModel": ".messages",
    "SetPermissionMode": "tool_bridge",
    "Settings": ".config",
    "StaticKey": ".credentials",
    "StepAnswered": ".events",
    "SubagentEvent": ".events",
    "SubagentFinished": ".events",
    "SubagentStarted": ".events",
    "StoreError": ".store",
    "StoreUnavailable": ".store",
    "Subscribe": ".messages",
    "StepUsage": ".events",
    "TextDelta": ".events",
    "ThoughtDelta": ".events",
    "TokenUsage": ".usage",
    "ToolCallFinished": ".events",
    "ToolCallStarted": ".events",
    "TurnCancelled": ".events",
    "TurnCompleted": ".events",
    "TurnFailed": ".events",
    "TurnResumed": ".events",
    "TurnStarted": ".events",
    "TurnUsage": ".usage",
    "Unsubscribe": ".messages",
    "UserPrompt": ".messages",
    "event_to_json_dict": ".events",
    "load_settings": ".config",
    "open_host": ".facade",
    "open_store": ".store",
}
"""The module each listed name is defined in."""


def __getattr__(name: str) -> Any:
    """The listed ``name``, imported from its module on first use; AttributeError for any other name."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
