"""The tables of the configuration: one struct per section, each with its defaults and its own checks.

One module, as it is one schema: ``Settings`` holds every section, and each section validates itself the
same way (a ``ValueError`` naming its dotted key).
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar, Literal

import msgspec

from sampler.retry import RetryPolicy
from tool_bridge import Idempotency
from tool_bridge.mcp.settings import McpServerSettings

from ..usage import Price
from ._agents import AgentsSettings
from ._checks import is_int, is_number
from ._cluster import ClusterSettings
from ._gate import ProviderLimits
from ._telemetry import TelemetrySettings
from ._tools import ToolEnvSettings, ToolSandboxSettings, idempotency_classes

__all__ = [
    "SECTIONS",
    "CompactionSettings",
    "DoomLoopRecoverySettings",
    "HostSettings",
    "LoopControlSettings",
    "ProviderSettings",
    "RetrySettings",
    "ServeSettings",
    "Settings",
    "StoreSettings",
    "TimeoutSettings",
    "ToolSettings",
    "WindowSettings",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STORE_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_STORE_SCHEMES = frozenset({"sqlite", "postgresql", "postgres"})


class _Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A table of the configuration file; ``_name`` is its key."""

    _name: ClassVar[str] = ""

    def _fail(self, key: str, problem: str) -> ValueError:
        return ValueError(f"{self._name}.{key}: {problem}")

    def _int(self, key: str, minimum: int) -> None:
        value = getattr(self, key)
        if not is_int(value) or value < minimum:
            raise self._fail(key, f"must be a whole number >= {minimum}, got {value!r}")

    def _number(
        self, key: str, minimum: float, *, inclusive: bool = True, maximum: float | None = None
    ) -> None:
        value = getattr(self, key)
        low_ok = is_number(value) and (value >= minimum if inclusive else value > minimum)
        if not low_ok or (maximum is not None and value > maximum):
            low = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
            high = "" if maximum is None else f" and <= {maximum:g}"
            raise self._fail(key, f"must be a number {low}{high}, got {value!r}")

    def _names(self, key: str) -> None:
        value = getattr(self, key)
        if not all(isinstance(item, str) and item for item in value):
            raise self._fail(key, f"must be a list of non-empty names, got {value!r}")


class LoopControlSettings(_Section, frozen=True):
    """Guards on the turn loop."""

    _name = "loop_control"
    max_steps_per_turn: int = 100
    """Model calls one turn may make before it fails as runaway."""

    def __post_init__(self) -> None:
        self._int("max_steps_per_turn", 1)


class RetrySettings(_Section, frozen=True):
    """How a failed model call is retried; see :class:`sampler.retry.RetryPolicy`."""

    _name = "retry"
    max_attempts: int = 10
    base_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 32.0
    jitter: float = 0.25
    retryable_statuses: tuple[int, ...] = RetryPolicy().retryable_statuses
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        self._int("max_attempts", 1)
        for key in ("base_delay", "max_delay", "max_retry_after"):
            self._number(key, 0)
        self._number("factor", 1)
        self._number("jitter", 0, maximum=1)
        if not all(is_int(status) and 100 <= status <= 599 for status in self.retryable_statuses):
            raise self._fail("retryable_statuses", f"must be HTTP statuses, got {self.retryable_statuses!r}")


class TimeoutSettings(_Section, frozen=True):
    """Seconds to wait: to connect, for a read, between two chunks of a stream, for an actor's answer."""

    _name = "timeouts"
    connect: float = 10.0
    read: float = 60.0
    idle: float = 120.0
    ask: float = 10.0

    def __post_init__(self) -> None:
        for key in ("connect", "read", "idle", "ask"):
            self._number(key, 0, inclusive=False)


class ProviderSettings(_Section, frozen=True):
    """Which model endpoint to talk to, and where its credentials are (never the credentials)."""

    _name = "provider"
    kind: Literal["openai", "anthropic"] = "openai"
    base_url: str = "http://127.0.0.1:8765/v1"
    model: str = "turnkeep-fake"
    models: list[str] = []
    """Other models of this provider a session may be switched to (the ``model`` option an editor is
    offered over ACP); ``model`` is always one of the choices."""
    api_key_env: str | None = None
    """The name of the environment variable holding the API key."""
    api_key_file: str | None = None
    """A file holding the API key."""
    headers: dict[str, str] = {}
    """Extra HTTP headers sent with every request."""
    oauth_token_url: str | None = None
    refresh_token_env: str | None = None
    """The name of the environment variable holding an OAuth refresh token."""
    limits: ProviderLimits = msgspec.field(default_factory=ProviderLimits)
    """``[provider.limits]``: the host-wide gate every request to this provider passes through."""

    def __post_init__(self) -> None:
        for key in ("base_url", "oauth_token_url"):
            value = getattr(self, key)
            if value is not None and not (isinstance(value, str) and re.match(r"https?://[^/\s]", value)):
                raise self._fail(key, f"must be an http:// or https:// URL, got {value!r}")
        if not (isinstance(self.model, str) and self.model):
            raise self._fail("model", f"must be a non-empty name, got {self.model!r}")
        for other in self.models:
            if not (isinstance(other, str) and other):
                raise self._fail("models", f"must be non-empty names, got {other!r}")
        for key in ("api_key_env", "refresh_token_env"):
            value = getattr(self, key)
            if value is not None and not (isinstance(value, str) and _ENV_NAME.fullmatch(value)):
                # The value is not shown: a key pasted here by mistake must not reach a log.
                raise self._fail(key, "must be the name of an environment variable, not a key")

    @property
    def model_choices(self) -> list[str]:
        """``model`` and then ``models``, each once."""
        return list(dict.fromkeys([self.model, *self.models]))


class WindowSettings(_Section, frozen=True):
    """The model's context window and output budget, in tokens, until a real window is learned."""

    _name = "window"
    context_window: int = 128000
    max_output_tokens: int = 4096

    def __post_init__(self) -> None:
        self._int("context_window", 1)
        self._int("max_output_tokens", 1)
        if self.max_output_tokens >= self.context_window:
            raise self._fail(
                "max_output_tokens",
                f"must be less than window.context_window ({self.context_window}),"
                f" got {self.max_output_tokens}",
            )


class CompactionSettings(_Section, frozen=True):
    """When and how much the history is summarised."""

    _name = "compaction"
    threshold: float = 0.85
    """Compact when the estimate reaches this fraction of the window, in (0, 1]."""
    keep_recent_turns: int = 2
    """Turns kept verbatim after the summary."""
    max_cycles: int = 3
    """Compactions one request may go through before the turn fails."""
    min_shrink: float = 0.10
    """The fraction of tokens a compaction must save to count as progress, in [0, 1)."""

    def __post_init__(self) -> None:
        self._number("threshold", 0, inclusive=False, maximum=1)
        self._int("keep_recent_turns", 0)
        self._int("max_cycles", 0)
        self._number("min_shrink", 0)
        if self.min_shrink >= 1:
            raise self._fail("min_shrink", f"must be a number >= 0 and < 1, got {self.min_shrink!r}")


class DoomLoopRecoverySettings(_Section, frozen=True):
    """When a turn is stopped as a doom loop. 0 turns a check off, except ``hard_limit``, which stays on."""

    _name = "doom_loop"
    identical_calls: int = 3
    """The same tool call with the same arguments, this many times in a row."""
    max_cycle_length: int = 3
    """The longest repeating sequence of calls that is detected."""
    repeated_errors: int = 3
    """The same tool error, this many times in a row."""
    exempt_tools: tuple[str, ...] = ()
    """Tools whose repetition is expected (polling, for instance)."""
    hard_limit: int = 12
    """Repetitions after which the turn stops whatever the tool; cannot be turned off."""

    def __post_init__(self) -> None:
        for key in ("identical_calls", "max_cycle_length", "repeated_errors"):
            self._int(key, 0)
        self._names("exempt_tools")
        if not is_int(self.hard_limit) or self.hard_limit < 1:
            raise self._fail(
                "hard_limit", f"must be a whole number >= 1 (it cannot be disabled), got {self.hard_limit!r}"
            )


class ToolSettings(_Section, frozen=True):
    """Which tools run without asking, and how long they may take. Times in seconds."""

    _name = "tools"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    shell_timeout: float = 120.0
    shell_max_timeout: float = 600.0
    abort_grace: float = 2.5
    """After a cancel, how long running tools may finish before they are recorded aborted."""
    kill_after: float = 10.0
    """After a cancel, when the tools still running are killed."""
    permission_timeout: float = 60.0
    output_cap: int = 30000
    """Characters of a tool's output shown to the model."""
    env: ToolEnvSettings = msgspec.field(default_factory=ToolEnvSettings)
    """``[tools.env]``: what ``shell`` commands see of the host's environment."""
    sandbox: ToolSandboxSettings = msgspec.field(default_factory=ToolSandboxSettings)
    """``[tools.sandbox]``: whether ``shell`` commands run in the bubblewrap sandbox."""
    idempotency: dict[str, object] = msgspec.field(default_factory=dict)
    """``[tools.idempotency]``: ``NAME = "read_only" | "idempotent" | "side_effecting"``, the idempotency
    class of the tool the model calls ``NAME`` (an MCP tool by its ``server__tool`` name) over the one it
    declares. A name no tool has is allowed: it applies once a tool of that name appears."""

    def __post_init__(self) -> None:
        for key in ("allow", "deny", "ask"):
            self._names(key)
        idempotency_classes(self.idempotency)
        for key in ("shell_timeout", "shell_max_timeout", "kill_after", "permission_timeout"):
            self._number(key, 0, inclusive=False)
        self._number("abort_grace", 0)
        self._int("output_cap", 1)
        if self.shell_timeout > self.shell_max_timeout:
            raise self._fail(
                "shell_timeout",
                f"must not exceed tools.shell_max_timeout ({self.shell_max_timeout:g}),"
                f" got {self.shell_timeout:g}",
            )
        if self.kill_after < self.abort_grace:
            raise self._fail(
                "kill_after",
                f"must not be less than tools.abort_grace ({self.abort_grace:g}), got {self.kill_after:g}",
            )

    def idempotency_classes(self) -> dict[str, Idempotency]:
        """``[tools.idempotency]`` as the classes a session's tool registry is given
        (:meth:`tool_bridge.ToolRegistry.override_idempotency`)."""
        return idempotency_classes(self.idempotency)


class StoreSettings(_Section, frozen=True):
    """Where sessions are persisted.

    ``path`` is a file path (``~`` expanded) or ``sqlite://PATH`` for a SQLite file, or a
    ``postgresql://`` (or ``postgres://``) URL for a PostgreSQL database, as :func:`shell.store.open_store`
    takes them; a URL of any other scheme is refused.
    """

    _name = "store"
    path: str = "~/.local/share/turnkeep/sessions.db"
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    group_commit: bool = True
    """The writes of all sessions share transactions, made by one writer (see :mod:`shell.store`); false
    gives every write a transaction of its own on the caller's thread."""

    def __post_init__(self) -> None:
        if not (isinstance(self.path, str) and self.path.strip()):
            raise self._fail("path", f"must be a file path or a store URL, got {self.path!r}")
        scheme = _STORE_URL.match(self.path)
        if scheme is None:
            msgspec.structs.force_setattr(self, "path", os.path.expanduser(self.path))
        elif scheme[1].lower() not in _STORE_SCHEMES:
            # Only the scheme is shown: the rest of a URL may hold a password.
            raise self._fail(
                "path", f"must be a path, sqlite://PATH or postgresql://..., got a {scheme[1]}:// URL"
            )


class HostSettings(_Section, frozen=True):
    """Limits of the host running the sessions."""

    _name = "host"
    passivate_after: float = 600.0
    """Seconds idle after which a session's actors are stopped (its store stays)."""
    max_concurrent_turns: int = 16
    sessions_default: int = 8
    resume_interrupted_turns: bool = True
    """Whether a turn that a host did not live to end (killed, powered off) goes on from its stored steps
    when its session is taken up again; false: it ends ``interrupted``."""
    max_resumes_per_turn: int = 2
    """Times one turn may be resumed before it ends ``interrupted`` (0: never resumed)."""
    collector: bool = True
    """Whether the host tunes the interpreter's garbage collector for many long-lived sessions: objects
    alive when a session starts are frozen out of its passes, and a full pass runs only when sessions
    stopped or the frozen objects doubled (false: the collector as the interpreter sets it)."""

    def __post_init__(self) -> None:
        self._number("passivate_after", 0, inclusive=False)
        self._int("max_concurrent_turns", 1)
        self._int("sessions_default", 1)
        self._int("max_resumes_per_turn", 0)


class ServeSettings(_Section, frozen=True):
    """``turnkeep serve``: where it listens, which workspaces clients may use, and its bounds.

    ``workspace_root`` (default: the directory ``serve`` starts in) holds every workspace a client may
    open. ``cors_origins`` is empty: no cross-origin access unless origins are listed.
    """

    _name = "serve"
    host: str = "127.0.0.1"
    port: int = 8787
    workspace_root: str | None = None
    max_body_bytes: int = 1_048_576
    stream_buffer_bytes: int = 65_536
    """Text a slow event-stream reader may have waiting; beyond it, text is dropped for a ``gap``."""
    write_timeout: float = 10.0
    """Seconds a write to an event-stream reader may wait before the reader is disconnected."""
    cors_origins: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        self._int("port", 0)
        if self.port > 65535:
            raise self._fail("port", f"must be at most 65535, got {self.port}")
        self._int("max_body_bytes", 1)
        self._int("stream_buffer_bytes", 1024)
        self._number("write_timeout", 0, inclusive=False)
        self._names("cors_origins")


def _section(cls: type[_Section]) -> Any:
    return msgspec.field(default_factory=cls)


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole configuration: one field per section of the file, each fully defaulted and validated."""

    loop_control: LoopControlSettings = _section(LoopControlSettings)
    retry: RetrySettings = _section(RetrySettings)
    timeouts: TimeoutSettings = _section(TimeoutSettings)
    provider: ProviderSettings = _section(ProviderSettings)
    window: WindowSettings = _section(WindowSettings)
    compaction: CompactionSettings = _section(CompactionSettings)
    doom_loop: DoomLoopRecoverySettings = _section(DoomLoopRecoverySettings)
    tools: ToolSettings = _section(ToolSettings)
    store: StoreSettings = _section(StoreSettings)
    host: HostSettings = _section(HostSettings)
    serve: ServeSettings = _section(ServeSettings)
    cluster: ClusterSettings = msgspec.field(default_factory=ClusterSettings)
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)
    agents: AgentsSettings = msgspec.field(default_factory=AgentsSettings)
    """``[agents]`` and its ``[agents.NAME]`` profiles: child sessions run by the ``agent`` tool."""
    pricing: dict[str, Price] = {}
    """``[pricing."model"]``: the price of each model (per million input, output, cached input tokens);
    a model without one has no cost. No price is built in."""
    mcp_servers: dict[str, McpServerSettings] = msgspec.field(default_factory=dict)
    """The ``[mcp_servers.NAME]`` tables: MCP tool servers (see the README)."""

    def replace(self, **sections: _Section) -> Settings:
        """A copy with whole sections replaced, such as ``settings.replace(window=WindowSettings(...))``."""
        return msgspec.structs.replace(self, **sections)

    def retry_policy(self) -> RetryPolicy:
        """The retry section as the policy the sampler applies."""
        retry = self.retry
        return RetryPolicy(
            max_attempts=retry.max_attempts,
            base_delay=retry.base_delay,
            factor=retry.factor,
            max_delay=retry.max_delay,
            jitter=retry.jitter,
            retryable_statuses=tuple(retry.retryable_statuses),
            max_retry_after=retry.max_retry_after,
        )


SECTIONS: dict[str, type[msgspec.Struct]] = {
    field.name: field.type
    for field in msgspec.structs.fields(Settings)
    if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct)  # not [pricing]
}
