"""turnkeep's session layer: sessions whose turns always converge and lose nothing, the host that runs
many of them, its facades, the store and the configuration."""

from .bridge import CompactAndResubmit, FailTurn, RecoveryAction, RecoveryBridge, RefreshAuthAndResubmit
from .config import ConfigError, Settings, load_settings
from .credentials import CredentialProvider, CredentialRefreshError, NoCredentials, OAuthCredential, StaticKey
from .events import (
    TERMINAL_EVENTS,
    AuthRefreshed,
    CompactionFinished,
    CompactionStarted,
    DoomLoopWarning,
    ProjectionFallback,
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
from .messages import Cancel, PermissionDecision, Subscribe, Unsubscribe, UserPrompt
from .session import SessionActor, SessionOptions
from .session_tree import SessionChaos, SessionParts, session_spec
from .store import SessionRecord, SessionStore, StoreError, StoreUnavailable, open_store

__all__ = [
    "TERMINAL_EVENTS",
    "AgentHost",
    "AsyncHost",
    "AsyncSession",
    "AuthRefreshed",
    "Cancel",
    "CompactAndResubmit",
    "CompactionFinished",
    "CompactionStarted",
    "ConfigError",
    "CredentialProvider",
    "CredentialRefreshError",
    "DoomLoopWarning",
    "FailTurn",
    "Host",
    "HostBackend",
    "HostError",
    "NoCredentials",
    "OAuthCredential",
    "PermissionDecision",
    "ProjectionFallback",
    "RecoveryAction",
    "RecoveryBridge",
    "RefreshAuthAndResubmit",
    "Retrying",
    "Session",
    "SessionActor",
    "SessionChaos",
    "SessionEvent",
    "SessionOptions",
    "SessionParts",
    "SessionRecord",
    "SessionStore",
    "Settings",
    "StaticKey",
    "StoreError",
    "StoreUnavailable",
    "Subscribe",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnStarted",
    "Unsubscribe",
    "UserPrompt",
    "event_to_json_dict",
    "load_settings",
    "open_host",
    "open_store",
    "session_spec",
]
