"""The tool bridge: tools as supervised actors, where a tool's failure is information, not an exception.

Define tools (`Tool`, `tool`) in a `ToolRegistry` (the built-in ones: `builtin_registry`), decide who may run
what with a `PermissionPolicy`, and run the model's calls with a `ToolSupervisor`: it answers every
`RunTools` with exactly one `ToolsFinished`, one `ToolOutcome` per call, whatever the tools do.

Every tool declares its `Idempotency` class (side-effecting unless it says otherwise), which decides whether
a call interrupted by the end of its host is run again; `ToolRegistry.idempotency_of` answers it by name.

What a command started for a tool sees of the host is decided by `tool_environment` (an `EnvPolicy`,
credentials always left out) and, for the ``shell`` tool on Linux, confined by a bubblewrap `Sandbox`.
"""

from __future__ import annotations

from ._process import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_OUTPUT_CAP,
    DEFAULT_TERMINATE_GRACE,
    ProcessResult,
    kill_process_group,
    process_group_alive,
    run_process_group,
)
from .actor import ToolActor
from .builtins import (
    DEFAULT_SHELL_TIMEOUT,
    EDIT_FILE,
    LIST_DIR,
    MAX_SHELL_TIMEOUT,
    READ_FILE,
    WRITE_FILE,
    EditFileArgs,
    ListDirArgs,
    ReadFileArgs,
    ShellArgs,
    WorkspaceEscapeError,
    WriteFileArgs,
    builtin_registry,
    resolve_in_workspace,
    shell_tool,
)
from .environment import (
    CORE_VARIABLES,
    SECRET_NAME_PARTS,
    EnvPolicy,
    EnvPolicyError,
    describe_env_policy,
    is_secret_name,
    tool_environment,
)
from .idempotency import Idempotency
from .messages import (
    AbortTools,
    RunTools,
    ToolAbandoned,
    ToolCallBegan,
    ToolCallEnded,
    ToolInvocation,
    ToolsFinished,
)
from .permissions import (
    DEFAULT_RULES,
    DEFAULT_SUBJECTS,
    Action,
    Decision,
    DecisionSlot,
    PermissionConfigError,
    PermissionDecision,
    PermissionMode,
    PermissionPolicy,
    PermissionRequested,
    PermissionRule,
    PreToolHook,
    SetPermissionMode,
    Subject,
    await_decision,
    denied_outcome,
)
from .results import (
    ToolOutcome,
    ToolResultError,
    ToolStatus,
)
from .sandbox import (
    Sandbox,
    SandboxMode,
    SandboxProbe,
    SandboxUnavailableError,
    probe_sandbox,
)
from .settings import ToolBridgeSettings, ToolBridgeSettingsError
from .supervisor import ABORTED_CONTENT, SHUTDOWN_CONTENT, ToolSupervisor
from .tools import (
    DEFAULT_TOOL_TIMEOUT,
    ProcessSpec,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolFunction,
    ToolKind,
    ToolLimits,
    ToolRegistry,
    run_tool,
    tool,
)

__all__ = [
    "ABORTED_CONTENT",
    "CORE_VARIABLES",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_OUTPUT_CAP",
    "DEFAULT_RULES",
    "DEFAULT_SHELL_TIMEOUT",
    "DEFAULT_SUBJECTS",
    "DEFAULT_TERMINATE_GRACE",
    "DEFAULT_TOOL_TIMEOUT",
    "EDIT_FILE",
    "LIST_DIR",
    "MAX_SHELL_TIMEOUT",
    "READ_FILE",
    "SECRET_NAME_PARTS",
    "SHUTDOWN_CONTENT",
    "WRITE_FILE",
    "AbortTools",
    "Action",
    "Decision",
    "DecisionSlot",
    "EditFileArgs",
    "EnvPolicy",
    "EnvPolicyError",
    "Idempotency",
    "ListDirArgs",
    "PermissionConfigError",
    "PermissionDecision",
    "PermissionMode",
    "PermissionPolicy",
    "PermissionRequested",
    "PermissionRule",
    "PreToolHook",
    "ProcessResult",
    "ProcessSpec",
    "ReadFileArgs",
    "RunTools",
    "Sandbox",
    "SandboxMode",
    "SandboxProbe",
    "SandboxUnavailableError",
    "SetPermissionMode",
    "ShellArgs",
    "Subject",
    "Tool",
    "ToolAbandoned",
    "ToolActor",
    "ToolBridgeSettings",
    "ToolBridgeSettingsError",
    "ToolCallBegan",
    "ToolCallEnded",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolFunction",
    "ToolInvocation",
    "ToolKind",
    "ToolLimits",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResultError",
    "ToolStatus",
    "ToolSupervisor",
    "ToolsFinished",
    "WorkspaceEscapeError",
    "WriteFileArgs",
    "await_decision",
    "builtin_registry",
    "denied_outcome",
    "describe_env_policy",
    "is_secret_name",
    "kill_process_group",
    "probe_sandbox",
    "process_group_alive",
    "resolve_in_workspace",
    "run_process_group",
    "run_tool",
    "shell_tool",
    "tool",
    "tool_environment",
]
