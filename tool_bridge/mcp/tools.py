"""An MCP server's tools as the bridge's tools: named ``SERVER__tool``, described by the server's JSON
schema, checked by the same permission rules and ending in the same `ToolOutcome` discipline."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import threading
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

import msgspec
import trio

from tool_bridge.idempotency import Idempotency
from tool_bridge.mcp.handle import McpServerHandle
from tool_bridge.mcp.machine import ServerStatus
from tool_bridge.results import ToolResultError, ToolStatus
from tool_bridge.tools import Tool, ToolContext, ToolError, ToolKind, ToolRegistry

__all__ = ["McpArguments", "McpTool", "McpToolRegistry", "annotated_idempotency", "exposed_name", "mcp_tools"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SEPARATOR = "__"


def exposed_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``: ``server__tool``, characters other than letters,
    digits, ``_`` and ``-`` replaced by ``_``, cut to 64 characters."""
    return (server + _SEPARATOR + _UNSAFE.sub("_", tool))[:64]


def annotated_idempotency(annotations: object) -> Idempotency:
    """The idempotency class a server's tool annotations (the SDK's ``ToolAnnotations``, or None) declare:
    ``readOnlyHint: true`` is read-only; else ``idempotentHint: true`` is idempotent; else, or without
    annotations, side-effecting (MCP's defaults are false for both hints). Only a hint that is exactly
    true counts."""
    if getattr(annotations, "read_only_hint", None) is True:
        return Idempotency.READ_ONLY
    if getattr(annotations, "idempotent_hint", None) is True:
        return Idempotency.IDEMPOTENT
    return Idempotency.SIDE_EFFECTING


class McpArguments(msgspec.Struct, frozen=True):
    """The arguments of an MCP call, as the JSON object the model sent. Attribute access reads an argument
    (``args.path``), so permission rules with argument patterns apply to MCP tools as to built-in ones."""

    values: dict[str, Any] = msgspec.field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class McpTool(Tool[McpArguments]):
    """A tool of an MCP server. ``remote`` is its name on the server, ``schema`` its input schema (what the
    model sees as ``parameters``). Arguments are decoded to a JSON object and validated against the schema
    (a mismatch is ``invalid``, as for any tool); a call waits for the server to be ready (bounded by the
    tool's timeout), and a result the server marks ``isError`` ends ``is_error``. Its idempotency class is
    what the server's annotations say (`annotated_idempotency`)."""

    remote: str = ""
    schema: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    _validator: Any = dataclasses.field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        parameters: dict[str, Any] = (
            dict(self.schema) if self.schema.get("type") == "object" else {"type": "object"}
        )
        parameters.setdefault("properties", {})
        object.__setattr__(self, "parameters", parameters)
        object.__setattr__(self, "_validator", _validator(parameters))

    def decode_arguments(self, arguments: str | bytes | Mapping[str, Any]) -> McpArguments | ToolResultError:
        """The model's arguments as an `McpArguments`, or a `ToolResultError` saying what is wrong."""
        if isinstance(arguments, Mapping):
            values: object = dict(arguments)
        else:
            text = arguments.decode(errors="replace") if isinstance(arguments, bytes) else arguments
            try:
                values = json.loads(text) if text.strip() else {}
            except ValueError as exc:
                return ToolResultError(
                    self.name, f"invalid arguments for `{self.name}`: not valid JSON ({exc})"
                )
        if not isinstance(values, dict):
            return ToolResultError(self.name, f"invalid arguments for `{self.name}`: expected a JSON object")
        problem = _schema_problem(self._validator, values)
        if problem:
            return ToolResultError(self.name, f"invalid arguments for `{self.name}`: {problem}")
        return McpArguments(values)


def _validator(schema: dict[str, Any]) -> Any:
    """A validator of the server's schema, or None when the schema itself is invalid (then the server
    judges the arguments)."""
    import jsonschema

    try:
        validator_type = jsonschema.validators.validator_for(schema)
        validator_type.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return validator_type(schema)


def _schema_problem(validator: Any, values: dict[str, Any]) -> str | None:
    import jsonschema

    if validator is None:
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(values))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{error.message}" + (f" (at `{where}`)" if where else "")


async def _call_when_ready(
    handle: McpServerHandle, remote: str, args: McpArguments, context: ToolContext
) -> str:
    from tool_bridge.mcp._session import ServerGone, render_result

    wait = handle.settings.startup_timeout * 2
    deadline = trio.current_time() + wait
    while True:
        connection = None
        with trio.move_on_at(deadline):
            connection = await handle.ready_connection()
        if connection is None:
            state = handle.state().status.value
            raise ToolError(f"the MCP server {handle.name} was not ready within {wait:g} s (it is {state})")
        try:
            result = await connection.call(remote, args.values)
        except ServerGone:
            continue
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"the MCP tool {remote} of {handle.name} failed without a message")
        return text


def mcp_tools(handle: McpServerHandle) -> list[McpTool]:
    """The tools ``handle``'s server lists now and its settings offer, as bridge tools."""
    tools: list[McpTool] = []
    seen: set[str] = set()
    for remote in handle.remote_tools():
        if not handle.settings.offers(remote.name):
            continue
        name = exposed_name(handle.name, remote.name)
        if name in seen:
            continue
        seen.add(name)
        description = (
            remote.description or ""
        ).strip() or f"The tool {remote.name} of the MCP server {handle.name}."
        tools.append(
            McpTool(
                name=name,
                description=description,
                args_type=McpArguments,
                fn=functools.partial(_call_when_ready, handle, remote.name),
                kind=ToolKind.ASYNC,
                timeout=handle.settings.tool_timeout,
                remote=remote.name,
                schema=dict(remote.input_schema),
                idempotency=annotated_idempotency(getattr(remote, "annotations", None)),
            )
        )
    return tools


def _pending_tool(handle: McpServerHandle, name: str) -> McpTool:
    """A stand-in for the tool ``name`` of a server still starting: it waits for the server, then calls
    the listed tool of that name (the server checks the arguments). Its annotations are not known yet, so
    it is side-effecting."""
    return McpTool(
        name=name,
        description=f"A tool of the MCP server {handle.name}, which is starting.",
        args_type=McpArguments,
        fn=functools.partial(_call_when_listed, handle, name),
        kind=ToolKind.ASYNC,
        timeout=handle.settings.tool_timeout,
        remote=name.removeprefix(handle.name + _SEPARATOR),
    )


async def _call_when_listed(
    handle: McpServerHandle, name: str, args: McpArguments, context: ToolContext
) -> str:
    wait = handle.settings.startup_timeout * 2
    with trio.move_on_after(wait):
        await handle.ready_connection()
    listed = {tool.name: tool.remote for tool in mcp_tools(handle)}
    if name not in listed:
        offered = ", ".join(f"`{each}`" for each in listed) or "none"
        state = handle.state().status.value
        raise ToolError(
            f"the MCP server {handle.name} ({state}) offers no tool `{name}`; it offers: {offered}"
        )
    return await _call_when_ready(handle, listed[name], args, context)


class McpToolRegistry(ToolRegistry):
    """The tools of ``base`` followed by those the servers of ``handles`` offer now; the MCP part follows
    each server's tool list as it changes (a call to a tool no longer listed is ``invalid``). The idempotency
    classes set on ``base`` by name are kept, and apply to the MCP tools of those names too. With ``only``,
    only the MCP tools of those names are offered."""

    def __init__(
        self, base: ToolRegistry, handles: Sequence[McpServerHandle], *, only: Collection[str] | None = None
    ) -> None:
        super().__init__(base, idempotency=base.idempotency_overrides)
        self._handles = tuple(handles)
        self._only = None if only is None else frozenset(only)
        self._lock = threading.Lock()
        self._mcp: dict[str, Tool[Any]] = {}
        self._refresh()
        me = weakref.ref(self)
        for handle in self._handles:
            handle.on_tools_changed(lambda _: _refresh_if_alive(me))

    @property
    def handles(self) -> tuple[McpServerHandle, ...]:
        """The servers whose tools this registry offers."""
        return self._handles

    def _not_listed_yet(self, name: str) -> McpTool | ToolResultError | None:
        """For a call to a server whose tools are not known yet (it has not started once): a tool that waits
        for the list while the server starts, an error once it has failed."""
        for handle in self._handles:
            if name.startswith(handle.name + _SEPARATOR) and not handle.remote_tools():
                state = handle.state()
                if state.status in (ServerStatus.STARTING, ServerStatus.RESTARTING):
                    return _pending_tool(handle, name)
                why = f"; last error: {state.last_error}" if state.last_error else ""
                return ToolResultError(
                    name,
                    f"the MCP server {handle.name} is {state.status.value} and has not listed its tools "
                    f"yet{why}",
                    status=ToolStatus.ERROR,
                )
        return None

    def _refresh(self) -> None:
        tools: dict[str, Tool[Any]] = {}
        for handle in self._handles:
            for each in mcp_tools(handle):
                if each.name not in self._tools and (self._only is None or each.name in self._only):
                    tools.setdefault(each.name, each)
        with self._lock:
            self._mcp = tools

    def _all(self) -> dict[str, Tool[Any]]:
        with self._lock:
            return {**self._tools, **self._mcp}

    def get(self, name: str) -> Tool[Any] | None:
        return self._all().get(name)

    def names(self) -> list[str]:
        return list(self._all())

    def specs(self) -> list[dict[str, Any]]:
        return [each.spec() for each in self._all().values()]

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(list(self._all().values()))

    def __len__(self) -> int:
        return len(self._all())

    def decode_call(
        self, name: str, arguments: str | bytes | Mapping[str, Any]
    ) -> tuple[Tool[Any], msgspec.Struct] | ToolResultError:
        tools = self._all()
        found = tools.get(name)
        unlisted = None if found is not None else self._not_listed_yet(name)
        if isinstance(unlisted, ToolResultError):
            return unlisted
        found = found or unlisted
        if found is None:
            available = ", ".join(f"`{each}`" for each in tools) or "none"
            return ToolResultError(name, f"unknown tool `{name}`; available tools: {available}")
        decoded = found.decode_arguments(arguments)
        if isinstance(decoded, ToolResultError):
            return decoded
        return found, decoded


def _refresh_if_alive(registry: weakref.ref[McpToolRegistry]) -> None:
    alive = registry()
    if alive is not None:
        alive._refresh()
