"""Defining tools, decoding calls, and run_tool turning every ending into one ToolOutcome."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
import pytest
import trio

from tool_bridge.results import ToolOutcome, ToolResultError, ToolStatus
from tool_bridge.tools import (
    ProcessSpec,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolKind,
    ToolRegistry,
    run_tool,
    tool,
)


class Point(msgspec.Struct, frozen=True):
    x: int
    y: int


class AddArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Two numbers."""

    n: int
    m: int = 0


class MoveArgs(msgspec.Struct, frozen=True):
    to: Point


class Tagged(msgspec.Struct, tag=True):
    n: int


class Opaque(msgspec.Struct):
    lock: threading.Lock


@tool(parallel_safe=True, timeout=5)
async def add(args: AddArgs, context: ToolContext) -> str:
    """Add two numbers."""
    return str(args.n + args.m)


@tool()
def echo(args: AddArgs, context: ToolContext) -> str:
    """Echo n from a worker thread."""
    return f"{args.n} from {threading.get_ident()}"


async def move(args: MoveArgs, context: ToolContext) -> str:
    return f"moved to {args.to.x},{args.to.y}"


def context(call_id: str = "call-1") -> ToolContext:
    return ToolContext(workspace=Path("/nonexistent-workspace"), call_id=call_id)


def async_tool(fn, *, timeout: float = 5) -> Tool[AddArgs]:
    return Tool(name="t", description="A test tool.", args_type=AddArgs, fn=fn, timeout=timeout)


# Defining tools


def test_the_decorator_takes_name_description_arguments_and_kind_from_the_function():
    assert (add.name, add.description, add.args_type, add.kind) == (
        "add",
        "Add two numbers.",
        AddArgs,
        ToolKind.ASYNC,
    )
    assert (add.parallel_safe, add.timeout) == (True, 5)
    assert (echo.kind, echo.parallel_safe) == (ToolKind.THREAD, False)


def test_the_spec_shows_the_arguments_schema_as_an_object():
    spec = add.spec()
    assert spec["name"] == "add" and spec["description"] == "Add two numbers."
    parameters = spec["parameters"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["n"]
    assert parameters["properties"]["n"] == {"type": "integer"}
    assert "$ref" not in parameters
    spec["parameters"]["type"] = "changed"
    assert add.spec()["parameters"]["type"] == "object"


def test_tools_of_one_argument_type_share_one_schema_and_the_spec_is_a_copy_of_it():
    first, second = async_tool(add.fn), async_tool(add.fn)
    assert first.parameters is second.parameters
    first.spec()["parameters"]["properties"]["n"]["type"] = "changed"
    assert second.parameters["properties"]["n"] == {"type": "integer"}


def test_the_spec_keeps_the_definitions_of_nested_structs():
    mover = Tool(name="move", description="Move.", args_type=MoveArgs, fn=move)
    parameters = mover.spec()["parameters"]
    assert parameters["properties"]["to"] == {"$ref": "#/$defs/Point"}
    assert parameters["$defs"]["Point"]["required"] == ["x", "y"]


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "has space"},
        {"name": ""},
        {"name": "x" * 65},
        {"description": "  "},
        {"args_type": dict},
        {"args_type": Tagged},
        {"args_type": Opaque},
        {"kind": ToolKind.THREAD},
        {"timeout": 0},
        {"timeout": float("nan")},
    ],
)
def test_a_wrong_definition_is_refused(changes):
    fields = {"name": "ok", "description": "Fine.", "args_type": AddArgs, "fn": add.fn} | changes
    with pytest.raises(ToolDefinitionError):
        Tool(**fields)


def test_a_blocking_function_cannot_be_an_async_tool():
    with pytest.raises(ToolDefinitionError):
        Tool(name="t", description="d", args_type=AddArgs, fn=echo.fn, kind=ToolKind.ASYNC)


def test_the_decorator_needs_an_annotated_arguments_parameter():
    with pytest.raises(ToolDefinitionError):

        @tool()
        async def bare(args, context) -> str:
            """Nothing."""
            return ""


def test_a_name_can_be_registered_once():
    registry = ToolRegistry([add])
    with pytest.raises(ToolDefinitionError):
        registry.register(add)


def test_the_registry_lists_tools_in_registration_order():
    registry = ToolRegistry([echo, add])
    assert registry.names() == ["echo", "add"]
    assert [spec["name"] for spec in registry.specs()] == ["echo", "add"]
    assert "add" in registry and "nope" not in registry and len(registry) == 2
    assert registry.get("add") is add and registry.get("nope") is None


# Decoding calls


def test_a_valid_call_decodes_to_its_tool_and_arguments():
    assert ToolRegistry([add]).decode_call("add", '{"n": 2, "m": 3}') == (add, AddArgs(2, 3))


def test_empty_argument_text_means_no_arguments():
    registry = ToolRegistry([Tool(name="p", description="d", args_type=MoveArgs, fn=move)])
    assert registry.decode_call("p", "  ") == ToolResultError(
        "p", "invalid arguments for `p`: Object missing required field `to`"
    )


def test_already_parsed_arguments_are_accepted():
    assert ToolRegistry([add]).decode_call("add", {"n": 1}) == (add, AddArgs(1))


def test_malformed_json_is_an_invalid_call_saying_so():
    registry = ToolRegistry([add])
    truncated = registry.decode_call("add", '{"n": 1,')
    assert truncated == ToolResultError(
        "add", "invalid arguments for `add`: not valid JSON (Input data was truncated)"
    )
    assert truncated.status is ToolStatus.INVALID
    garbage = registry.decode_call("add", "{n: 1}")
    assert isinstance(garbage, ToolResultError)
    assert garbage.message.startswith("invalid arguments for `add`: not valid JSON (JSON is malformed")


def test_a_schema_mismatch_is_an_invalid_call_saying_what_and_where():
    decoded = ToolRegistry([add]).decode_call("add", '{"n": "two"}')
    assert decoded == ToolResultError(
        "add", "invalid arguments for `add`: Expected `int`, got `str` - at `$.n`"
    )


def test_arguments_that_are_not_an_object_are_an_invalid_call():
    decoded = ToolRegistry([add]).decode_call("add", b"[1, 2]")
    assert decoded == ToolResultError("add", "invalid arguments for `add`: Expected `object`, got `array`")


def test_an_unknown_tool_is_an_invalid_call_listing_the_available_ones():
    decoded = ToolRegistry([add, echo]).decode_call("ad", "{}")
    assert decoded == ToolResultError("ad", "unknown tool `ad`; available tools: `add`, `echo`")


def test_a_refusal_becomes_an_error_outcome_for_its_call():
    outcome = ToolResultError("ad", "unknown tool `ad`").to_outcome("c7")
    assert outcome == ToolOutcome(
        call_id="c7", tool="ad", content="unknown tool `ad`", is_error=True, status=ToolStatus.INVALID
    )


def test_an_outcome_survives_a_round_trip_through_json_with_its_tag():
    outcome = ToolOutcome("c1", "add", "5", False, ToolStatus.OK, interrupted=False, duration=0.5)
    encoded = msgspec.json.encode(outcome)
    assert b'"type":"ToolOutcome"' in encoded
    assert msgspec.json.decode(encoded, type=ToolOutcome) == outcome


# Running calls


@pytest.mark.trio
async def test_a_successful_call_reports_its_content_and_duration(autojump_clock):
    async def slow(args: AddArgs, context: ToolContext) -> str:
        await trio.sleep(3)
        return "done"

    outcome = await run_tool(async_tool(slow), AddArgs(1), context("c9"))
    assert (outcome.call_id, outcome.tool, outcome.content) == ("c9", "t", "done")
    assert (outcome.status, outcome.is_error, outcome.interrupted) == (ToolStatus.OK, False, False)
    assert outcome.duration == pytest.approx(3)


@pytest.mark.trio
async def test_a_tool_error_becomes_an_error_outcome_with_exactly_its_message():
    async def fails(args: AddArgs, context: ToolContext) -> str:
        raise ToolError("the file is locked")

    outcome = await run_tool(async_tool(fails), AddArgs(1), context())
    assert (outcome.status, outcome.is_error, outcome.content) == (
        ToolStatus.ERROR,
        True,
        "the file is locked",
    )


@pytest.mark.trio
async def test_any_other_exception_becomes_an_error_outcome_with_its_type_and_message():
    async def crashes(args: AddArgs, context: ToolContext) -> str:
        raise ValueError("bad input")

    outcome = await run_tool(async_tool(crashes), AddArgs(1), context())
    assert (outcome.status, outcome.content) == (ToolStatus.ERROR, "ValueError: bad input")


@pytest.mark.trio
async def test_an_exception_alone_in_a_group_is_reported_as_itself():
    async def crashes_in_nursery(args: AddArgs, context: ToolContext) -> str:
        async def boom() -> None:
            raise RuntimeError("inner")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(boom)
        return "unreachable"

    outcome = await run_tool(async_tool(crashes_in_nursery), AddArgs(1), context())
    assert outcome.content == "RuntimeError: inner"


@pytest.mark.trio
async def test_a_result_that_is_not_text_is_an_error():
    async def returns_int(args: AddArgs, context: ToolContext) -> str:
        return 5  # type: ignore[return-value]

    outcome = await run_tool(async_tool(returns_int), AddArgs(1), context())
    assert (outcome.status, outcome.content) == (
        ToolStatus.ERROR,
        "TypeError: tool 't' returned int, expected str",
    )


@pytest.mark.trio
async def test_a_call_past_its_timeout_is_timed_out(autojump_clock):
    async def hangs(args: AddArgs, context: ToolContext) -> str:
        await trio.sleep(600)
        return "late"

    outcome = await run_tool(async_tool(hangs, timeout=5), AddArgs(1), context())
    assert (outcome.status, outcome.is_error, outcome.interrupted) == (ToolStatus.TIMED_OUT, True, True)
    assert outcome.content == "timed out after 5 s"
    assert outcome.duration == pytest.approx(5)


@pytest.mark.trio
async def test_setting_abort_stops_the_call_as_aborted(autojump_clock):
    async def hangs(args: AddArgs, context: ToolContext) -> str:
        await trio.sleep(600)
        return "late"

    call_context = context()
    outcomes: list[ToolOutcome] = []

    async def call() -> None:
        outcomes.append(await run_tool(async_tool(hangs, timeout=60), AddArgs(1), call_context))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.sleep(1)
        call_context.abort.set()
    (outcome,) = outcomes
    assert (outcome.status, outcome.is_error, outcome.interrupted) == (ToolStatus.ABORTED, True, True)
    assert outcome.content == "aborted before completion"
    assert outcome.duration == pytest.approx(1)


@pytest.mark.trio
async def test_cancelling_the_enclosing_scope_propagates_instead_of_reporting(autojump_clock):
    async def hangs(args: AddArgs, context: ToolContext) -> str:
        await trio.sleep(600)
        return "late"

    with trio.move_on_after(1) as scope:
        await run_tool(async_tool(hangs, timeout=60), AddArgs(1), context())
    assert scope.cancelled_caught


@pytest.mark.trio
async def test_a_thread_tool_runs_in_a_worker_thread():
    outcome = await run_tool(echo, AddArgs(4), context())
    assert outcome.status is ToolStatus.OK
    value, thread = outcome.content.split(" from ")
    assert value == "4" and int(thread) != threading.get_ident()


@pytest.mark.trio
async def test_a_thread_tool_past_its_timeout_is_abandoned_and_timed_out():
    release = threading.Event()

    def blocks(args: AddArgs, context: ToolContext) -> str:
        release.wait(5)
        return "late"

    blocking = Tool(
        name="b", description="d", args_type=AddArgs, fn=blocks, kind=ToolKind.THREAD, timeout=0.1
    )
    try:
        outcome = await run_tool(blocking, AddArgs(1), context())
    finally:
        release.set()
    assert outcome.status is ToolStatus.TIMED_OUT
    assert (
        outcome.content
        == "timed out after 0.1 s (it ran in a thread, which may still finish in the background)"
    )


@pytest.mark.trio
async def test_a_process_tool_must_return_a_process_spec():
    def wrong(args: AddArgs, context: ToolContext) -> ProcessSpec:
        return "ls"  # type: ignore[return-value]

    process = Tool(name="p", description="d", args_type=AddArgs, fn=wrong, kind=ToolKind.PROCESS)
    outcome = await run_tool(process, AddArgs(1), context())
    assert (outcome.status, outcome.content) == (
        ToolStatus.ERROR,
        "TypeError: process tool 'p' returned str, expected ProcessSpec",
    )


@pytest.mark.trio
async def test_a_process_tool_whose_program_is_missing_is_an_error(tmp_path):
    def missing(args: AddArgs, context: ToolContext) -> ProcessSpec:
        return ProcessSpec(argv=("/nonexistent/program",))

    process = Tool(name="p", description="d", args_type=AddArgs, fn=missing, kind=ToolKind.PROCESS)
    outcome = await run_tool(process, AddArgs(1), ToolContext(workspace=tmp_path))
    assert outcome.status is ToolStatus.ERROR
    assert outcome.content.startswith("FileNotFoundError: ")


@pytest.mark.trio
async def test_a_tool_error_raised_inside_a_nursery_keeps_exactly_its_message():
    async def fails_in_nursery(args: AddArgs, context: ToolContext) -> str:
        async def locked() -> None:
            raise ToolError("the file is locked")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(locked)
        return "unreachable"

    outcome = await run_tool(async_tool(fails_in_nursery), AddArgs(1), context())
    assert (outcome.status, outcome.content) == (ToolStatus.ERROR, "the file is locked")
