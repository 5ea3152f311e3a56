"""The shell tool: bash in the workspace, output capped, every stop kills the whole process group.

Real processes, so real time with short limits; wall times are bounded.
"""

from __future__ import annotations

import os
import time

import pytest
import trio

from tool_bridge._process import process_group_alive
from tool_bridge.builtins import builtin_registry, shell_tool
from tool_bridge.builtins.shell import ShellArgs
from tool_bridge.results import ToolResultError, ToolStatus
from tool_bridge.tools import ToolContext, ToolDefinitionError, ToolLimits, run_tool

from .conftest import wait_for_output


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


async def shell(tmp_path, command, *, timeout=None, tool=None, limits=None, context=None):
    context = context or ToolContext(workspace=tmp_path, call_id="c1", limits=limits or ToolLimits())
    return await run_tool(tool or shell_tool(), ShellArgs(command=command, timeout=timeout), context)


@pytest.mark.trio
async def test_a_successful_command_returns_its_output(tmp_path):
    outcome = await shell(tmp_path, "echo hello")
    assert (outcome.status, outcome.is_error, outcome.content) == (ToolStatus.OK, False, "hello")
    assert (outcome.call_id, outcome.tool) == ("c1", "shell")


@pytest.mark.trio
async def test_the_command_runs_in_the_workspace(tmp_path):
    outcome = await shell(tmp_path, "pwd")
    assert outcome.content == os.path.realpath(tmp_path)


@pytest.mark.trio
async def test_a_command_without_output_says_so(tmp_path):
    outcome = await shell(tmp_path, "true")
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "(no output)")


@pytest.mark.trio
async def test_stderr_of_a_successful_command_is_shown_in_its_own_section(tmp_path):
    outcome = await shell(tmp_path, "echo out; echo warn >&2")
    assert outcome.status is ToolStatus.OK
    assert outcome.content == "out\n[stderr]\nwarn"


@pytest.mark.trio
async def test_a_non_zero_exit_is_an_error_with_the_exit_code_and_the_output(tmp_path):
    outcome = await shell(tmp_path, "echo out; echo oops >&2; exit 3")
    assert outcome.is_error and outcome.status is ToolStatus.ERROR
    assert outcome.content == "exit code 3\nout\n[stderr]\noops"
    assert not outcome.interrupted


@pytest.mark.trio
async def test_death_by_a_signal_names_the_signal(tmp_path):
    outcome = await shell(tmp_path, "kill -9 $$")
    assert outcome.status is ToolStatus.ERROR
    assert outcome.content == "killed by signal 9 (SIGKILL)"


@pytest.mark.trio
async def test_a_timed_out_command_keeps_its_output_and_leaves_no_process(tmp_path):
    started = time.monotonic()
    outcome = await shell(tmp_path, "echo $$; echo partial; sleep 600", timeout=0.3)
    assert time.monotonic() - started < 2
    assert outcome.is_error and outcome.interrupted and outcome.status is ToolStatus.TIMED_OUT
    header, pgid, partial = outcome.content.splitlines()
    assert header == "timed out after 0.3 s; the process group was killed. Output so far:"
    assert partial == "partial"
    assert group_gone(int(pgid))


@pytest.mark.trio
async def test_the_default_timeout_applies_when_the_call_gives_none(tmp_path):
    outcome = await shell(tmp_path, "sleep 600", tool=shell_tool(default_timeout=0.3))
    assert outcome.status is ToolStatus.TIMED_OUT
    assert outcome.content.startswith("timed out after 0.3 s")


@pytest.mark.trio
async def test_a_timeout_above_the_maximum_is_clamped_and_the_output_says_so(tmp_path):
    tool = shell_tool(default_timeout=0.2, max_timeout=0.3)
    started = time.monotonic()
    outcome = await shell(tmp_path, "sleep 600", timeout=5, tool=tool)
    assert time.monotonic() - started < 2
    assert outcome.status is ToolStatus.TIMED_OUT
    assert outcome.content.splitlines()[:2] == [
        "note: timeout 5 s is above the maximum; used 0.3 s",
        "timed out after 0.3 s; the process group was killed. Output so far:",
    ]


@pytest.mark.trio
async def test_a_background_child_does_not_hang_a_completed_call(tmp_path):
    started = time.monotonic()
    outcome = await shell(tmp_path, "sleep 600 & echo $$")
    assert time.monotonic() - started < 2
    assert outcome.status is ToolStatus.OK
    # The orphaned sleep may linger as a zombie until init reaps it, so killpg(0) cannot tell yet.
    assert not process_group_alive(int(outcome.content))


@pytest.mark.trio
async def test_output_beyond_the_cap_is_cut_with_a_note_of_the_bytes_cut(tmp_path):
    outcome = await shell(tmp_path, "head -c 1000 /dev/zero | tr '\\0' x", limits=ToolLimits(output_cap=100))
    assert outcome.status is ToolStatus.OK
    assert outcome.content == "x" * 100 + "\n[stdout truncated: 900 more bytes not shown]"


@pytest.mark.trio
async def test_an_aborted_call_stops_and_keeps_its_output_so_far(tmp_path):
    context = ToolContext(workspace=tmp_path, call_id="c1")
    outcomes = []

    async def call() -> None:
        outcomes.append(await shell(tmp_path, f"echo $$; echo up > {ready}; sleep 600", context=context))

    ready = tmp_path / "ready"
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await wait_for_output(ready)
        context.abort.set()
    assert time.monotonic() - started < 2
    (outcome,) = outcomes
    assert outcome.status is ToolStatus.ABORTED and outcome.interrupted and outcome.is_error
    header, pgid = outcome.content.splitlines()
    assert header == "aborted; the process group was killed. Output so far:"
    assert group_gone(int(pgid))


@pytest.mark.trio
async def test_cancelling_the_call_is_a_hard_kill_of_the_group(tmp_path):
    pid_file = tmp_path / "pid"
    with trio.move_on_after(0.3) as scope:
        await shell(tmp_path, f"echo $$ > {pid_file}; exec sleep 600")
    assert scope.cancelled_caught
    assert group_gone(int(pid_file.read_text()))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"command": ""}', "Expected `str` of length >= 1 - at `$.command`"),
        ('{"command": "ls", "timeout": 0}', "Expected `float` > 0.0 - at `$.timeout`"),
        ('{"command": "ls", "cwd": "/"}', "Object contains unknown field `cwd`"),
    ],
)
def test_bad_shell_arguments_are_an_invalid_call(arguments, message):
    decoded = builtin_registry().decode_call("shell", arguments)
    assert decoded == ToolResultError("shell", f"invalid arguments for `shell`: {message}")


def test_a_default_timeout_above_the_maximum_is_a_definition_error():
    with pytest.raises(ToolDefinitionError):
        shell_tool(default_timeout=10, max_timeout=5)
