"""turnkeep: an actor-model runtime with supervision trees for hosts that run many long-lived LLM agent
sessions, whose turns always converge — every prompt ends as exactly one stored completed, failed or
cancelled turn, and nothing is lost.

This package is the public face: everything a host, an embedding app or a test needs, grouped as users look
for it. The embedded provider and the chaos harness are in :mod:`turnkeep.testing`.

Errors — the whole hierarchy (each also says, in its docstring, when it is raised)::

    HostError                      a host's or a façade's operation could not be done
        PoolError                  ... on a pool of host replicas
            ClusterUnavailable     the replicas could not be started
            ReplicaUnavailable     no replica took the request
            ReplicaError           a replica failed the request
    ConfigError (ValueError)       a configuration file, variable or option is invalid
    CredentialRefreshError         the provider's credential could not be renewed
    StoreError                     the session store failed
        StoreCorrupt               not a session store, or a row that cannot be read
        StoreVersionError          written by a newer version
        StoreBusy                  locked elsewhere for too long
        StoreUnavailable           the database cannot be reached
        StoreTimeout               a write was not confirmed in time (says if it may have committed)
        StoreClosed                the store was closed
        SessionNotFound (LookupError)
        SessionExists
        SessionClosed
        SessionArchived            the session was archived by a rewind: resume it with archived=True
        TurnRunning                a rewind while the session has a turn running
        StaleOwner                 another host took the session: this one may not write to it
        CompactionRejected (ValueError)
        ForkRejected (ValueError)  a fork's turn is below 0 or past the last converged turn
    ActorError                     a message could not be delivered or answered
        ActorUnavailable           the actor is stopped or did not come back in time
        AskTimeout                 no reply before the deadline
        MessageDropped             dropped by a chaos policy
        UnhandledMessage           the actor has no handler for it
        ChaosCrash                 a crash injected by a chaos policy
        ChildStartError            a supervisor's child failed to start
        SupervisorEscalation       a supervisor gave up after too many restarts
        StuckHandler               a handler ran past stuck_after outside blocking(); a crash
        IoLoopClosed               the shared trio loop has stopped
        JobCancelled               a job on the loop was cancelled
        TimerCancelled             a timer of the loop was cancelled before it fired
    Refuse                         raised by a handler to answer an ask with an error and keep running
    LlmRequestError                a model request failed (carries an LlmError with its kind)
    StreamDecodeError (ValueError) a provider's stream could not be decoded
    ToolError                      a tool failed (reaches the model as an is_error result)
        WorkspaceEscapeError       a path leads out of the session's workspace
        SandboxUnavailableError    the sandbox is required but cannot be used on this machine
    ToolDefinitionError (ValueError), ToolBridgeSettingsError (ValueError), PermissionConfigError (ValueError)
    EnvPolicyError (ValueError)    a tool environment policy is invalid
    McpError                       an MCP server cannot be used
        McpSettingsError (ValueError)  an [mcp_servers.NAME] table is invalid
        McpNotInstalled            MCP servers are configured but the SDK is not installed
        McpStartError              a server could not be started (its stderr's tail in the message)
    TelemetryError (RuntimeError, in shell.telemetry, imported only with telemetry on): the metrics port
                                   cannot be bound
    MissingExtra (ImportError)     an optional feature is used without its extra installed; the message
                                   says which (``pip install 'turnkeep[serve]'``)
"""

from actors import (
    Actor,
    ActorError,
    ActorSystem,
    ActorUnavailable,
    Address,
    AskTimeout,
    ChaosCrash,
    ChaosPolicy,
    ChildSpec,
    ChildStartError,
    DeadLetter,
    Down,
    ExitReason,
    IoLoopClosed,
    JobCancelled,
    MessageDropped,
    Refuse,
    Restart,
    RestartIntensity,
    Strategy,
    StuckHandler,
    Supervisor,
    SupervisorEscalation,
    TimerCancelled,
    UnhandledMessage,
    blocking,
    handles,
)
from sampler import (
    AssistantMessage,
    ImagePart,
    LlmError,
    LlmErrorKind,
    LlmRequestError,
    Message,
    RetryPolicy,
    SamplerSettings,
    StreamDecodeError,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
)
from shell import (
    TERMINAL_EVENTS,
    AgentHost,
    AsyncHost,
    AsyncSession,
    AuthRefreshed,
    Cancel,
    ChildUsage,
    CompactionFinished,
    CompactionStarted,
    ConfigError,
    CredentialProvider,
    CredentialRefreshError,
    DoomLoopWarning,
    Host,
    HostBackend,
    HostError,
    McpServerStatus,
    MissingExtra,
    NoCredentials,
    OAuthCredential,
    PermissionDecision,
    Price,
    ProjectionFallback,
    PromptQueued,
    Queued,
    Retrying,
    Session,
    SessionEvent,
    SessionRecord,
    SessionStore,
    SetModel,
    SetPermissionMode,
    Settings,
    StaticKey,
    StepAnswered,
    StepUsage,
    SubagentEvent,
    SubagentFinished,
    SubagentStarted,
    Subscribe,
    TextDelta,
    ThoughtDelta,
    TokenUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnResumed,
    TurnStarted,
    TurnUsage,
    Unsubscribe,
    UserPrompt,
    event_to_json_dict,
    load_settings,
    open_host,
    open_store,
)
from shell.cluster import (
    ClusterSettings,
    ClusterUnavailable,
    PoolError,
    PoolHost,
    ReplicaError,
    ReplicaUnavailable,
    connect,
    open_pool_host,
)
from shell.config import AgentProfile, AgentsSettings
from shell.store import (
    CompactionRejected,
    ForkRejected,
    ParentLink,
    SessionArchived,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    StaleOwner,
    StoreBusy,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    StoreVersionError,
    TurnRunning,
)
from tool_bridge import (
    EnvPolicy,
    EnvPolicyError,
    Idempotency,
    PermissionConfigError,
    PermissionPolicy,
    PermissionRequested,
    PermissionRule,
    PreToolHook,
    Sandbox,
    SandboxUnavailableError,
    Tool,
    ToolBridgeSettings,
    ToolBridgeSettingsError,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolRegistry,
    WorkspaceEscapeError,
    builtin_registry,
    tool,
)
from tool_bridge.mcp import McpError, McpNotInstalled, McpServerSettings, McpSettingsError, McpStartError

__all__ = [  # noqa: RUF022 (grouped the way users look for names, not sorted)
    # -- hosts and sessions --------------------------------------------------------------------------------
    "AgentHost",
    "AsyncHost",
    "AsyncSession",
    "ClusterSettings",
    "Host",
    "HostBackend",
    "PoolHost",
    "Session",
    "connect",
    "open_host",
    "open_pool_host",
    # what a session's mailbox takes
    "Cancel",
    "PermissionDecision",
    "SetModel",
    "SetPermissionMode",
    "Subscribe",
    "Unsubscribe",
    "UserPrompt",
    # configuration, credentials, the store
    "CredentialProvider",
    "NoCredentials",
    "OAuthCredential",
    "RetryPolicy",
    "SamplerSettings",
    "SessionRecord",
    "ParentLink",
    "SessionStore",
    "Settings",
    "AgentsSettings",
    "AgentProfile",
    "StaticKey",
    "load_settings",
    "open_store",
    # -- events --------------------------------------------------------------------------------------------
    "TERMINAL_EVENTS",
    "AuthRefreshed",
    "CompactionFinished",
    "CompactionStarted",
    "DoomLoopWarning",
    "PermissionRequested",
    "ProjectionFallback",
    "PromptQueued",
    "McpServerStatus",
    "Queued",
    "Retrying",
    "SessionEvent",
    "StepAnswered",
    "StepUsage",
    "SubagentStarted",
    "SubagentFinished",
    "SubagentEvent",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnResumed",
    "TurnStarted",
    "TurnUsage",
    "ChildUsage",
    "TokenUsage",
    "Price",
    "event_to_json_dict",
    # the history's messages
    "AssistantMessage",
    "ImagePart",
    "LlmError",
    "LlmErrorKind",
    "Message",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "Usage",
    "UserMessage",
    # -- errors (the hierarchy is in this module's docstring) ----------------------------------------------
    "ActorError",
    "ActorUnavailable",
    "AskTimeout",
    "ChaosCrash",
    "ChildStartError",
    "ClusterUnavailable",
    "CompactionRejected",
    "ConfigError",
    "CredentialRefreshError",
    "ForkRejected",
    "HostError",
    "IoLoopClosed",
    "JobCancelled",
    "LlmRequestError",
    "MessageDropped",
    "PermissionConfigError",
    "PoolError",
    "Refuse",
    "ReplicaError",
    "ReplicaUnavailable",
    "SessionArchived",
    "SessionClosed",
    "SessionExists",
    "SessionNotFound",
    "StaleOwner",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "StoreVersionError",
    "StreamDecodeError",
    "StuckHandler",
    "SupervisorEscalation",
    "TimerCancelled",
    "TurnRunning",
    "ToolBridgeSettingsError",
    "ToolDefinitionError",
    "ToolError",
    "UnhandledMessage",
    "WorkspaceEscapeError",
    "SandboxUnavailableError",
    "EnvPolicyError",
    "McpError",
    "McpSettingsError",
    "MissingExtra",
    "McpNotInstalled",
    "McpStartError",
    # -- tools ---------------------------------------------------------------------------------------------
    "PermissionPolicy",
    "PermissionRule",
    "PreToolHook",
    "Tool",
    "ToolBridgeSettings",
    "ToolContext",
    "ToolRegistry",
    "Idempotency",
    "builtin_registry",
    "tool",
    "EnvPolicy",
    "Sandbox",
    "McpServerSettings",
    # -- the runtime ---------------------------------------------------------------------------------------
    "Actor",
    "ActorSystem",
    "Address",
    "ChaosPolicy",
    "ChildSpec",
    "DeadLetter",
    "Down",
    "ExitReason",
    "Restart",
    "RestartIntensity",
    "Strategy",
    "Supervisor",
    "blocking",
    "handles",
]
