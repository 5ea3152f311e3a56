"""turnkeep's session layer: sessions whose turns always converge and lose nothing, the host that runs
many of them, its façades, the store and the configuration.

This door lists what embedding apps use; the parts a session is built from (the actors, the turn machine,
the recovery bridge) are in their own modules. :mod:`turnkeep` is the product's public face."""

from tool_bridge import PermissionDecision

from ._extras import MissingExtra
from .config import ConfigError, Settings, load_settings
from .credentials import CredentialProvider, CredentialRefreshError, NoCredentials, OAuthCredential, StaticKey
from .events import (
    TERMINAL_EVENTS,
    AuthRefreshed,
    CompactionFinished,
    CompactionStarted,
    DoomLoopWarning,
    McpServerStatus,
    ProjectionFallback,
    Queued,
    Retrying,
    SessionEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    event_to_json_dict,
)
from .facade import AsyncHost, AsyncSession, Host, HostBackend, Session, open_host
from .host import AgentHost, HostError
from .messages import Cancel, Subscribe, Unsubscribe, UserPrompt
from .session import SessionChaos
from .store import SessionRecord, SessionStore, StoreError, StoreUnavailable, open_store
from .usage import Price, TokenUsage, TurnUsage

__all__ = [
    "TERMINAL_EVENTS",
    "AgentHost",
    "AsyncHost",
    "AsyncSession",
    "AuthRefreshed",
    "Cancel",
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
    "Queued",
    "Retrying",
    "Session",
    "SessionChaos",
    "SessionEvent",
    "SessionRecord",
    "SessionStore",
    "Settings",
    "StaticKey",
    "StoreError",
    "StoreUnavailable",
    "Subscribe",
    "TextDelta",
    "TokenUsage",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnStarted",
    "TurnUsage",
    "Unsubscribe",
    "UserPrompt",
    "event_to_json_dict",
    "load_settings",
    "open_host",
    "open_store",
]
