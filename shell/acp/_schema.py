"""The Agent Client Protocol (v1) messages the agent reads and writes, as msgspec structs.

Written from the protocol's published JSON schema (``schema/v1/schema.json``): field names are the
schema's (camel case on the wire, ``_meta`` for the extension field), optional fields are left out of the
JSON when unset, and each tagged union is tagged as the schema's discriminator says (``type`` for content
blocks, ``sessionUpdate`` for session updates, ``outcome`` for permission outcomes). Only the messages
turnkeep speaks are here; a field the schema allows and turnkeep does not use is ignored when decoded.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

__all__ = [
    "PROTOCOL_VERSION",
    "AgentCapabilities",
    "AgentMessageChunk",
    "AgentThoughtChunk",
    "AudioContent",
    "BlobResourceContents",
    "CancelNotification",
    "CancelRequestNotification",
    "ClientCapabilities",
    "CloseSessionRequest",
    "ContentBlock",
    "ContentToolCallContent",
    "Cost",
    "EmbeddedResource",
    "Empty",
    "EnvVariable",
    "HttpHeader",
    "ImageContent",
    "Implementation",
    "InitializeRequest",
    "InitializeResponse",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "LoadSessionRequest",
    "McpCapabilities",
    "McpServerHttp",
    "McpServerStdio",
    "NewSessionRequest",
    "NewSessionResponse",
    "PermissionOption",
    "PermissionOutcomeCancelled",
    "PermissionOutcomeSelected",
    "PermissionToolCall",
    "PromptCapabilities",
    "PromptRequest",
    "PromptResponse",
    "RequestId",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
    "ResourceLink",
    "ResumeSessionRequest",
    "SessionCapabilities",
    "SessionConfigOption",
    "SessionConfigSelectOption",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionNotification",
    "SessionSetupResponse",
    "SessionUpdate",
    "SetSessionConfigOptionRequest",
    "SetSessionConfigOptionResponse",
    "StopReason",
    "TextContent",
    "TextResourceContents",
    "ToolCall",
    "ToolCallStatus",
    "ToolCallUpdate",
    "ToolKind",
    "UsageUpdate",
    "UserMessageChunk",
    "resource_contents",
]

PROTOCOL_VERSION = 1
"""The protocol version this agent speaks."""

RequestId: TypeAlias = int | str | None
"""A JSON-RPC request id: a number, a string or null."""

StopReason: TypeAlias = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
"""Why a prompt turn ended, as the answer to ``session/prompt`` says."""

ToolCallStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]
"""Where a tool call is in its life."""

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
"""What sort of thing a tool does (the client picks an icon by it)."""

Meta: TypeAlias = dict[str, Any] | None


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """The base of every protocol struct: camel-case names, unset optional fields left out."""


# -- content -----------------------------------------------------------------------------------------


class TextContent(_Wire, frozen=True, tag_field="type", tag="text"):
    """A text content block."""

    text: str
    annotations: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class ImageContent(_Wire, frozen=True, tag_field="type", tag="image"):
    """An image, base64 in ``data``."""

    data: str
    mime_type: str
    uri: str | None = None
    annotations: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class AudioContent(_Wire, frozen=True, tag_field="type", tag="audio"):
    """Audio, base64 in ``data`` (turnkeep does not take audio: it says so in its capabilities)."""

    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class ResourceLink(_Wire, frozen=True, tag_field="type", tag="resource_link"):
    """A reference to a resource the agent may read itself."""

    name: str
    uri: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class TextResourceContents(_Wire, frozen=True):
    """An embedded resource's text."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class BlobResourceContents(_Wire, frozen=True):
    """An embedded resource's bytes, base64 in ``blob``."""

    uri: str
    blob: str
    mime_type: str | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class EmbeddedResource(_Wire, frozen=True, tag_field="type", tag="resource"):
    """A resource's contents embedded in the prompt (the client's "embedded context").

    ``resource`` is decoded as a mapping, since its two shapes share no tag; :func:`resource_contents`
    reads it."""

    resource: dict[str, Any]
    annotations: dict[str, Any] | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
"""Any content block of a prompt or an update."""


def resource_contents(block: EmbeddedResource) -> TextResourceContents | BlobResourceContents:
    """The embedded resource's contents as the shape it has (text when it has ``text``). Raises
    :class:`msgspec.ValidationError` when it has neither shape."""
    if "text" in block.resource:
        return msgspec.convert(block.resource, TextResourceContents)
    return msgspec.convert(block.resource, BlobResourceContents)


# -- initialize ---------------------------------------------------------------------------------------


class Implementation(_Wire, frozen=True):
    """A program's name and version."""

    name: str
    version: str
    title: str | None = None


class ClientCapabilities(_Wire, frozen=True):
    """What the client offers; kept as given (turnkeep uses none of it to run tools)."""

    fs: dict[str, Any] | None = None
    terminal: bool = False
    meta: Meta = msgspec.field(default=None, name="_meta")


class InitializeRequest(_Wire, frozen=True):
    """``initialize``: the client's protocol version and capabilities."""

    protocol_version: int
    client_capabilities: ClientCapabilities = ClientCapabilities()
    client_info: Implementation | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class PromptCapabilities(_Wire, frozen=True):
    """Which content a prompt may hold beyond text and resource links."""

    image: bool = False
    audio: bool = False
    embedded_context: bool = False


class McpCapabilities(_Wire, frozen=True):
    """Which MCP transports beyond stdio the agent connects to."""

    http: bool = False
    sse: bool = False


class Empty(_Wire, frozen=True):
    """An object with nothing in it (a capability that is only present or not, an empty answer)."""

    meta: Meta = msgspec.field(default=None, name="_meta")


class SessionCapabilities(_Wire, frozen=True):
    """The session methods the agent offers beyond new, load and prompt."""

    list: Empty | None = None
    resume: Empty | None = None
    close: Empty | None = None
    delete: Empty | None = None


class AgentCapabilities(_Wire, frozen=True):
    """What the agent offers."""

    load_session: bool = False
    prompt_capabilities: PromptCapabilities = PromptCapabilities()
    mcp_capabilities: McpCapabilities = McpCapabilities()
    session_capabilities: SessionCapabilities = SessionCapabilities()


class InitializeResponse(_Wire, frozen=True):
    """The answer to ``initialize``."""

    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation | None = None
    auth_methods: list[dict[str, Any]] = msgspec.field(default_factory=list)


# -- sessions -----------------------------------------------------------------------------------------


class EnvVariable(_Wire, frozen=True):
    """An environment variable of an MCP server."""

    name: str
    value: str


class HttpHeader(_Wire, frozen=True):
    """An HTTP header of an MCP server."""

    name: str
    value: str


class McpServerStdio(_Wire, frozen=True):
    """An MCP server the agent starts as a process."""

    name: str
    command: str
    args: list[str]
    env: list[EnvVariable]


class McpServerHttp(_Wire, frozen=True):
    """An MCP server reached over HTTP (``type`` is ``http`` or ``sse``)."""

    type: Literal["http", "sse"]
    name: str
    url: str
    headers: list[HttpHeader]


class NewSessionRequest(_Wire, frozen=True):
    """``session/new``: a session working in ``cwd`` (an absolute path)."""

    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] = msgspec.field(default_factory=list)
    meta: Meta = msgspec.field(default=None, name="_meta")


class SessionConfigSelectOption(_Wire, frozen=True):
    """One value a select option can take."""

    value: str
    name: str
    description: str | None = None


class SessionConfigOption(_Wire, frozen=True, tag_field="type", tag="select"):
    """A session setting the client may change (a select: one of ``options``); ``category`` says what
    it is (``model``, ``mode``, ...) for the client's display."""

    id: str
    name: str
    current_value: str
    options: list[SessionConfigSelectOption]
    description: str | None = None
    category: str | None = None


class NewSessionResponse(_Wire, frozen=True):
    """The answer to ``session/new``."""

    session_id: str
    config_options: list[SessionConfigOption] | None = None


class SessionSetupResponse(_Wire, frozen=True):
    """The answer to ``session/load`` and ``session/resume``."""

    config_options: list[SessionConfigOption] | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class SetSessionConfigOptionRequest(_Wire, frozen=True):
    """``session/set_config_option``: the option ``config_id`` of a session set to ``value``."""

    session_id: str
    config_id: str
    value: str | bool
    type: str | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class SetSessionConfigOptionResponse(_Wire, frozen=True):
    """The answer to ``session/set_config_option``: every option with its value now."""

    config_options: list[SessionConfigOption]


class LoadSessionRequest(_Wire, frozen=True):
    """``session/load``: a stored session, its history replayed."""

    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] = msgspec.field(default_factory=list)
    meta: Meta = msgspec.field(default=None, name="_meta")


class ResumeSessionRequest(_Wire, frozen=True):
    """``session/resume``: a stored session, continued without replaying its history."""

    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    additional_directories: list[str] = msgspec.field(default_factory=list)
    meta: Meta = msgspec.field(default=None, name="_meta")


class CloseSessionRequest(_Wire, frozen=True):
    """``session/close`` (and ``session/delete``, which has the same shape)."""

    session_id: str
    meta: Meta = msgspec.field(default=None, name="_meta")


class ListSessionsRequest(_Wire, frozen=True):
    """``session/list``: a page of sessions, in ``cwd`` when given, after ``cursor`` when given."""

    cwd: str | None = None
    cursor: str | None = None
    meta: Meta = msgspec.field(default=None, name="_meta")


class SessionInfo(_Wire, frozen=True):
    """One session of a ``session/list`` page."""

    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None


class ListSessionsResponse(_Wire, frozen=True):
    """A page of sessions; ``next_cursor`` is there when more follow."""

    sessions: list[SessionInfo]
    next_cursor: str | None = None


class PromptRequest(_Wire, frozen=True):
    """``session/prompt``: a user message of content blocks."""

    session_id: str
    prompt: list[ContentBlock]
    meta: Meta = msgspec.field(default=None, name="_meta")


class PromptResponse(_Wire, frozen=True):
    """The one answer to a ``session/prompt``."""

    stop_reason: StopReason


class CancelNotification(_Wire, frozen=True):
    """``session/cancel``: end the session's prompt turns."""

    session_id: str
    meta: Meta = msgspec.field(default=None, name="_meta")


class CancelRequestNotification(_Wire, frozen=True):
    """``$/cancel_request``: the sender gives up on one of its requests."""

    request_id: int | str | None
    meta: Meta = msgspec.field(default=None, name="_meta")


# -- session updates ----------------------------------------------------------------------------------


class UserMessageChunk(_Wire, frozen=True, tag_field="sessionUpdate", tag="user_message_chunk"):
    """Part of a user's message (replayed by ``session/load``)."""

    content: ContentBlock


class AgentMessageChunk(_Wire, frozen=True, tag_field="sessionUpdate", tag="agent_message_chunk"):
    """Part of the agent's answer."""

    content: ContentBlock


class AgentThoughtChunk(_Wire, frozen=True, tag_field="sessionUpdate", tag="agent_thought_chunk"):
    """Part of the model's reasoning."""

    content: ContentBlock


class ContentToolCallContent(_Wire, frozen=True, tag_field="type", tag="content"):
    """A content block a tool call produced."""

    content: ContentBlock


class ToolCall(_Wire, frozen=True, tag_field="sessionUpdate", tag="tool_call"):
    """A tool call announced."""

    tool_call_id: str
    title: str
    kind: ToolKind = "other"
    status: ToolCallStatus = "pending"
    content: list[ContentToolCallContent] = msgspec.field(default_factory=list)
    raw_input: Any = None


class ToolCallUpdate(_Wire, frozen=True, tag_field="sessionUpdate", tag="tool_call_update"):
    """What changed about an announced tool call."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    title: str | None = None
    kind: ToolKind | None = None
    content: list[ContentToolCallContent] | None = None
    raw_input: Any = None


class Cost(_Wire, frozen=True):
    """An amount of money."""

    amount: float
    currency: str


class UsageUpdate(_Wire, frozen=True, tag_field="sessionUpdate", tag="usage_update"):
    """How much of the context window is used, and what the session cost."""

    used: int
    size: int
    cost: Cost | None = None


class SessionInfoUpdate(_Wire, frozen=True, tag_field="sessionUpdate", tag="session_info_update"):
    """The session's title or last update changed."""

    title: str | None = None
    updated_at: str | None = None


SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCall
    | ToolCallUpdate
    | UsageUpdate
    | SessionInfoUpdate
)
"""Every session update turnkeep sends."""


class SessionNotification(_Wire, frozen=True):
    """``session/update``: one update of one session."""

    session_id: str
    update: SessionUpdate


# -- permissions --------------------------------------------------------------------------------------


class PermissionOption(_Wire, frozen=True):
    """One answer the client may pick."""

    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionToolCall(_Wire, frozen=True):
    """The tool call a permission request is about (a ``ToolCallUpdate`` without its tag)."""

    tool_call_id: str
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Any = None


class RequestPermissionRequest(_Wire, frozen=True):
    """``session/request_permission``: may this tool call run?"""

    session_id: str
    tool_call: PermissionToolCall
    options: list[PermissionOption]


class PermissionOutcomeCancelled(_Wire, frozen=True, tag_field="outcome", tag="cancelled"):
    """The client cancelled the question (the turn was cancelled)."""


class PermissionOutcomeSelected(_Wire, frozen=True, tag_field="outcome", tag="selected"):
    """The client picked an option."""

    option_id: str


class RequestPermissionResponse(_Wire, frozen=True):
    """The client's answer to a permission request."""

    outcome: PermissionOutcomeCancelled | PermissionOutcomeSelected
