"""Defining tools, decoding the model's calls to them, and running one call to a `ToolOutcome`."""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import inspect
import logging
import re
import signal
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import msgspec
import trio

from tool_bridge._process import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_OUTPUT_CAP,
    DEFAULT_TERMINATE_GRACE,
    ProcessResult,
    run_process_group,
)
from tool_bridge.idempotency import Idempotency
from tool_bridge.results import ToolOutcome, ToolResultError, ToolStatus

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "ProcessSpec",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolFunction",
    "ToolKind",
    "ToolLimits",
    "ToolRegistry",
    "run_tool",
    "tool",
]

logger = logging.getLogger(__name__)

DEFAULT_TOOL_TIMEOUT = 60.0
"""Seconds a call may run when its tool does not say otherwise."""

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# How long past its own deadline a process tool may take to kill, drain and reap before the call is
# abandoned by the outer guard.
_PROCESS_GUARD_SLACK = 5.0

A = TypeVar("A", bound=msgspec.Struct)


class ToolKind(enum.Enum):
    """How a tool's function is run."""

    ASYNC = "async"
    """An async function, run on the trio loop; cancelled at its next checkpoint."""
    THREAD = "thread"
    """A blocking function, run in a worker thread; on cancellation the thread is abandoned, not stopped."""
    PROCESS = "process"
    """A function returning a `ProcessSpec`; the command runs in its own process group, killed as a whole."""


class ToolError(Exception):
    """Raised by a tool to fail with exactly this message: the call ends ``is_error`` with it as content.

    Any other exception also ends the call as an error, shown with its type name.
    """


class ToolDefinitionError(ValueError):
    """A tool is defined wrongly (bad name, arguments type, function or timeout) or its name is taken."""


class ToolLimits(msgspec.Struct, frozen=True):
    """Bounds applied to every call: characters of output kept (per stream for processes), the grace
    between SIGTERM and SIGKILL, and how long pipes may stay open after a process has ended."""

    output_cap: int = DEFAULT_OUTPUT_CAP
    terminate_grace: float = DEFAULT_TERMINATE_GRACE
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a call runs with: the workspace root, its call id, the limits, and its abort signal.

    Setting ``abort`` (from the trio thread) asks the call to stop early and keep what it has: a
    process tool's group is terminated and its output so far returned; other tools are cancelled.
    That is distinct from cancelling the scope `run_tool` runs in, which is the hard kill.
    """

    workspace: Path
    call_id: str = ""
    limits: ToolLimits = ToolLimits()
    abort: trio.Event = msgspec.field(default_factory=trio.Event)


class ProcessSpec(msgspec.Struct, frozen=True, kw_only=True):
    """The command a `ToolKind.PROCESS` tool wants run.

    ``cwd`` defaults to the workspace, ``env`` to this process's environment, ``timeout`` to the
    tool's.  ``note`` is shown to the model above the command's output.
    """

    argv: tuple[str, ...]
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    timeout: float | None = None
    note: str | None = None


ToolFunction = Callable[[A, ToolContext], Awaitable[str] | str | ProcessSpec]
"""A tool's function: ``(args, context)`` to the content (async or blocking) or to a `ProcessSpec`."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tool(Generic[A]):
    """A tool the model may call.

    ``args_type`` is an untagged msgspec Struct: its JSON schema is what the model sees, and the
    model's arguments are decoded into it.  ``fn`` matches ``kind``: an async function for
    ``ASYNC``, a blocking one for ``THREAD`` and ``PROCESS``.  ``parallel_safe`` says calls may run
    concurrently with other calls.  ``timeout`` (seconds) bounds a call; a ``PROCESS`` tool may set
    its own per call in its `ProcessSpec`.  ``idempotency`` is what running a call again does (see
    `Idempotency`); a tool that does not say is ``SIDE_EFFECTING``.  It is not part of `spec`: the model
    is offered the same definition whatever the class.  Raises `ToolDefinitionError` when any of this is
    wrong.
    """

    name: str
    description: str
    args_type: type[A]
    fn: ToolFunction[A]
    kind: ToolKind = ToolKind.ASYNC
    parallel_safe: bool = False
    timeout: float = DEFAULT_TOOL_TIMEOUT
    idempotency: Idempotency = Idempotency.SIDE_EFFECTING
    parameters: dict[str, Any] = dataclasses.field(init=False, repr=False, compare=False)
    """The JSON schema of ``args_type``: one object shared by every tool of that type, never to be
    changed (``spec()`` gives a copy of it)."""

    def __post_init__(self) -> None:
        if not _NAME_PATTERN.match(self.name):
            raise ToolDefinitionError(f"tool name {self.name!r} must be 1-64 of letters, digits, '_' or '-'")
        if not self.description.strip():
            raise ToolDefinitionError(f"tool {self.name!r} needs a description")
        if not (isinstance(self.args_type, type) and issubclass(self.args_type, msgspec.Struct)):
            raise ToolDefinitionError(f"tool {self.name!r}: args_type must be a msgspec.Struct subclass")
        config = self.args_type.__struct_config__
        if config.tag is not None or config.array_like:
            raise ToolDefinitionError(
                f"tool {self.name!r}: args_type must be an untagged, object-like Struct"
            )
        if inspect.iscoroutinefunction(self.fn) != (self.kind is ToolKind.ASYNC):
            raise ToolDefinitionError(
                f"tool {self.name!r}: an {self.kind.value} tool needs "
                + ("an async function" if self.kind is ToolKind.ASYNC else "a plain (not async) function")
            )
        if not self.timeout > 0:
            raise ToolDefinitionError(f"tool {self.name!r}: timeout must be > 0, got {self.timeout}")
        if not isinstance(self.idempotency, Idempotency):
            raise ToolDefinitionError(
                f"tool {self.name!r}: idempotency must be an Idempotency, got {self.idempotency!r}"
            )
        try:
            parameters = _parameters_schema(self.args_type)
        except TypeError as exc:
            raise ToolDefinitionError(
                f"tool {self.name!r}: no JSON schema for its arguments: {exc}"
            ) from None
        object.__setattr__(self, "parameters", parameters)

    def spec(self) -> dict[str, Any]:
        """The definition shown to the model: ``{"name", "description", "parameters"}``, the last a
        JSON schema of an object."""
        parameters = copy.deepcopy(self.parameters)
        return {"name": self.name, "description": self.description, "parameters": parameters}

    def decode_arguments(self, arguments: str | bytes | Mapping[str, Any]) -> A | ToolResultError:
        """Decode the model's arguments (JSON text, or an already parsed object) into ``args_type``.

        Empty text means no arguments (``{}``).  Malformed JSON or arguments not matching the schema
        give a `ToolResultError` whose message says what is wrong and where; this never raises.
        """
        try:
            if isinstance(arguments, Mapping):
                return msgspec.convert(arguments, type=self.args_type)
            if not arguments.strip():
                arguments = b"{}"
            return msgspec.json.decode(arguments, type=self.args_type)
        except msgspec.ValidationError as exc:
            return ToolResultError(self.name, f"invalid arguments for `{self.name}`: {exc}")
        except msgspec.DecodeError as exc:
            return ToolResultError(self.name, f"invalid arguments for `{self.name}`: not valid JSON ({exc})")


@functools.lru_cache(maxsize=512)
def _parameters_schema(args_type: type[msgspec.Struct]) -> dict[str, Any]:
    schema = msgspec.json.schema(args_type)
    definitions: dict[str, Any] = schema.get("$defs", {})
    reference: str = schema.get("$ref", "")
    root = definitions.pop(reference.rsplit("/", 1)[-1], None) if reference else None
    if root is None:
        return schema
    root = dict(root)
    if definitions:
        root["$defs"] = definitions
    return root


def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind | None = None,
    parallel_safe: bool = False,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    idempotency: Idempotency = Idempotency.SIDE_EFFECTING,
) -> Callable[[ToolFunction[A]], Tool[A]]:
    """Make a `Tool` of the decorated function.

    The name defaults to the function's, the description to its docstring, the arguments type to
    the annotation of its first parameter, the kind to ``ASYNC`` for an async function and
    ``THREAD`` otherwise (``PROCESS`` must be asked for), and the idempotency class to
    ``SIDE_EFFECTING``.  Raises `ToolDefinitionError`.
    """

    def decorate(fn: ToolFunction[A]) -> Tool[A]:
        parameters = list(inspect.signature(fn).parameters)
        if not parameters:
            raise ToolDefinitionError(f"{fn!r} must take (args, context)")
        args_type = typing.get_type_hints(fn).get(parameters[0])
        if args_type is None:
            raise ToolDefinitionError(f"{fn!r}: annotate its first parameter with the arguments Struct")
        chosen = kind or (ToolKind.ASYNC if inspect.iscoroutinefunction(fn) else ToolKind.THREAD)
        return Tool(
            name=name or str(getattr(fn, "__name__", "")),
            description=description or inspect.getdoc(fn) or "",
            args_type=args_type,
            fn=fn,
            kind=chosen,
            parallel_safe=parallel_safe,
            timeout=timeout,
            idempotency=idempotency,
        )

    return decorate


class ToolRegistry:
    """The tools offered to the model, by name, in registration order, and the idempotency class of each
    (`idempotency_of`).

    ``idempotency`` sets the class of tools by name over the one they declare (see
    `override_idempotency`).
    """

    def __init__(
        self, tools: Iterable[Tool[Any]] = (), *, idempotency: Mapping[str, Idempotency] | None = None
    ) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._idempotency: dict[str, Idempotency] = {}
        for each in tools:
            self.register(each)
        self.override_idempotency(idempotency or {})

    def override_idempotency(self, classes: Mapping[str, Idempotency]) -> None:
        """Set the idempotency class of the tools named in ``classes`` over the one they declare, a name
        set again replacing its earlier class. A name need not be registered: it applies to a tool of
        that name registered later (an MCP server's tool listed at run time). Raises
        `ToolDefinitionError` for a class that is not an `Idempotency`."""
        for name, chosen in classes.items():
            if not isinstance(chosen, Idempotency):
                raise ToolDefinitionError(
                    f"the idempotency class of {name!r} must be an Idempotency, got {chosen!r}"
                )
        self._idempotency.update(classes)

    @property
    def idempotency_overrides(self) -> Mapping[str, Idempotency]:
        """The classes set by name (`override_idempotency`), a copy."""
        return dict(self._idempotency)

    def idempotency_of(self, name: str) -> Idempotency:
        """The idempotency class of the tool the model calls ``name``: the one set for that name if any,
        else the one the tool declares (for an MCP registry, as its server lists it now), else (no such
        tool) ``SIDE_EFFECTING``. Never raises."""
        chosen = self._idempotency.get(name)
        if chosen is not None:
            return chosen
        found = self.get(name)
        return Idempotency.SIDE_EFFECTING if found is None else found.idempotency

    def register(self, tool: Tool[A]) -> Tool[A]:
        """Add ``tool``; raises `ToolDefinitionError` if its name is already registered."""
        if tool.name in self._tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool[Any] | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        """Every tool's `Tool.spec`, in registration order."""
        return [each.spec() for each in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def decode_call(
        self, name: str, arguments: str | bytes | Mapping[str, Any]
    ) -> tuple[Tool[Any], msgspec.Struct] | ToolResultError:
        """Find the tool the model called and decode its arguments.

        An unknown name (the message lists the available tools), malformed JSON or a schema mismatch
        gives a `ToolResultError` with status ``invalid``; this never raises.
        """
        found = self._tools.get(name)
        if found is None:
            available = ", ".join(f"`{each}`" for each in self._tools) or "none"
            return ToolResultError(name, f"unknown tool `{name}`; available tools: {available}")
        decoded = found.decode_arguments(arguments)
        if isinstance(decoded, ToolResultError):
            return decoded
        return found, decoded


async def run_tool(tool: Tool[A], args: A, context: ToolContext) -> ToolOutcome:
    """Run one call and report it as a `ToolOutcome`; a failing tool never raises here.

    Within ``tool.timeout`` (a process tool's own per-call timeout when it sets one), the outcome is
    ``ok``; ``error`` for a `ToolError` (its message) or any other exception (its type and message),
    or a process exiting non-zero; ``timed_out`` past the limit; ``aborted`` once ``context.abort``
    is set, unless a function tool completes anyway (it shielded its work), which keeps its result.
    Interrupted process calls keep their output so far.  Cancelling the enclosing scope is
    the hard kill: the call is stopped (a process group killed and reaped) and Cancelled propagates.
    """
    started = trio.current_time()
    try:
        if tool.kind is ToolKind.PROCESS:
            ended = await _run_process_tool(tool, args, context)
        else:
            ended = await _run_function_tool(tool, args, context)
    except Exception as exc:
        ended = _failed(tool, context, _unwrap(exc))
    return ToolOutcome(
        call_id=context.call_id,
        tool=tool.name,
        content=ended.content,
        is_error=ended.status is not ToolStatus.OK,
        status=ended.status,
        interrupted=ended.interrupted,
        duration=trio.current_time() - started,
    )


class _Ended(typing.NamedTuple):
    content: str
    status: ToolStatus
    interrupted: bool = False


async def _run_function_tool(tool: Tool[A], args: A, context: ToolContext) -> _Ended:
    note = (
        " (it ran in a thread, which may still finish in the background)"
        if tool.kind is ToolKind.THREAD
        else ""
    )
    with trio.move_on_after(tool.timeout):
        how, value = await _call_until_abort(tool, args, context)
        if how == "aborted":
            return _Ended(f"aborted before completion{note}", ToolStatus.ABORTED, interrupted=True)
        if isinstance(value, Exception):
            raise value
        return _Ended(value, ToolStatus.OK)
    return _Ended(f"timed out after {tool.timeout:g} s{note}", ToolStatus.TIMED_OUT, interrupted=True)


async def _call_until_abort(
    tool: Tool[A], args: A, context: ToolContext
) -> tuple[Literal["done", "aborted"], str | Exception]:
    ended: list[tuple[Literal["done", "aborted"], str | Exception]] = []

    async def call(nursery: trio.Nursery) -> None:
        try:
            ended.append(("done", await _invoke(tool, args, context)))
        except Exception as exc:
            ended.append(("done", exc))
        nursery.cancel_scope.cancel()

    async def watch(nursery: trio.Nursery) -> None:
        await context.abort.wait()
        ended.append(("aborted", ""))
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, nursery)
        nursery.start_soon(watch, nursery)
    # A tool that completed although the abort came first (it shielded its work) has a real result.
    return next((each for each in ended if each[0] == "done" and isinstance(each[1], str)), ended[0])


async def _invoke(tool: Tool[A], args: A, context: ToolContext) -> str:
    if tool.kind is ToolKind.ASYNC:
        returned = tool.fn(args, context)
        assert inspect.isawaitable(returned)
        value: object = await returned
    else:
        value = await trio.to_thread.run_sync(tool.fn, args, context, abandon_on_cancel=True)
    if not isinstance(value, str):
        raise TypeError(f"tool {tool.name!r} returned {type(value).__name__}, expected str")
    return value


async def _run_process_tool(tool: Tool[A], args: A, context: ToolContext) -> _Ended:
    spec = tool.fn(args, context)
    if not isinstance(spec, ProcessSpec):
        raise TypeError(f"process tool {tool.name!r} returned {type(spec).__name__}, expected ProcessSpec")
    limit = spec.timeout if spec.timeout is not None else tool.timeout
    limits = context.limits
    guard = limit + limits.terminate_grace + limits.drain_timeout + _PROCESS_GUARD_SLACK
    with trio.move_on_after(guard):
        result = await run_process_group(
            spec.argv,
            cwd=spec.cwd if spec.cwd is not None else context.workspace,
            env=spec.env,
            timeout=limit,
            output_cap=limits.output_cap,
            abort=context.abort,
            terminate_grace=limits.terminate_grace,
            drain_timeout=limits.drain_timeout,
        )
        return _render_process(result, limit, spec.note)
    return _Ended(f"timed out after {limit:g} s", ToolStatus.TIMED_OUT, interrupted=True)


def _render_process(result: ProcessResult, limit: float, note: str | None) -> _Ended:
    lines: list[str] = [note] if note else []
    if result.timed_out:
        status = ToolStatus.TIMED_OUT
        lines.append(f"timed out after {limit:g} s; the process group was killed. Output so far:")
    elif result.aborted:
        status = ToolStatus.ABORTED
        lines.append("aborted; the process group was killed. Output so far:")
    elif result.returncode == 0:
        status = ToolStatus.OK
    else:
        status = ToolStatus.ERROR
        lines.append(_describe_exit(result.returncode))
    lines += _stream_section("stdout", result.stdout, result.stdout_cut_bytes, header=False)
    lines += _stream_section("stderr", result.stderr, result.stderr_cut_bytes, header=True)
    return _Ended("\n".join(lines) or "(no output)", status, result.interrupted)


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "exit status unknown: the process could not be reaped"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"exit code {returncode}"


def _stream_section(name: str, text: str, cut_bytes: int, *, header: bool) -> list[str]:
    if not text and not cut_bytes:
        return []
    lines = [f"[{name}]"] if header else []
    lines.append(text.removesuffix("\n"))
    if cut_bytes:
        lines.append(f"[{name} truncated: {cut_bytes} more bytes not shown]")
    return lines


def _unwrap(exc: Exception) -> Exception:
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _failed(tool: Tool[Any], context: ToolContext, exc: Exception) -> _Ended:
    if isinstance(exc, ToolError):
        return _Ended(str(exc), ToolStatus.ERROR)
    logger.warning("tool %s (call %s) raised", tool.name, context.call_id, exc_info=exc)
    message = str(exc)
    return _Ended(f"{type(exc).__name__}: {message}" if message else type(exc).__name__, ToolStatus.ERROR)
