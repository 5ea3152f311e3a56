"""run_process_group: a command in its own process group, stopped and reaped as a whole.

These tests start real processes, so they run in real time with short limits and bound the wall time.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import trio

from tool_bridge._process import kill_process_group, process_group_alive, run_process_group

from .conftest import wait_for_output


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie awaiting its parent."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][0] not in "ZX"
    except FileNotFoundError:
        return False


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.trio
async def test_a_command_that_exits_reports_its_code_and_both_streams(tmp_path):
    result = await run_process_group(
        ["bash", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout=5
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.interrupted
    assert group_gone(result.pid)


@pytest.mark.trio
async def test_the_command_runs_in_cwd_with_stdin_at_end_of_file(tmp_path):
    result = await run_process_group(["bash", "-c", "pwd; cat"], cwd=tmp_path, timeout=5)
    assert result.stdout == f"{os.path.realpath(tmp_path)}\n"
    assert result.returncode == 0


@pytest.mark.trio
async def test_env_replaces_the_environment(tmp_path):
    result = await run_process_group(
        ["/bin/sh", "-c", 'echo "$ONLY_THIS"'], cwd=tmp_path, env={"ONLY_THIS": "yes"}, timeout=5
    )
    assert result.stdout == "yes\n"


@pytest.mark.trio
async def test_a_command_past_its_timeout_is_terminated_quickly_and_nothing_is_left(tmp_path):
    started = time.monotonic()
    result = await run_process_group(["sleep", "600"], cwd=tmp_path, timeout=0.3)
    assert time.monotonic() - started < 2
    assert result.timed_out and result.interrupted and not result.aborted
    assert result.returncode == -signal.SIGTERM
    assert group_gone(result.pid)


@pytest.mark.trio
async def test_a_timed_out_command_keeps_the_output_it_produced(tmp_path):
    result = await run_process_group(["bash", "-c", "echo started; sleep 600"], cwd=tmp_path, timeout=0.3)
    assert result.timed_out
    assert result.stdout == "started\n"


@pytest.mark.trio
async def test_background_children_of_a_timed_out_command_are_killed_too(tmp_path):
    result = await run_process_group(
        ["bash", "-c", "sleep 600 & echo $!; sleep 600"], cwd=tmp_path, timeout=0.3
    )
    background = int(result.stdout)
    assert result.timed_out
    assert not process_group_alive(result.pid)
    assert not running(background)


@pytest.mark.trio
async def test_a_command_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
    started = time.monotonic()
    result = await run_process_group(
        ["bash", "-c", "trap '' TERM; sleep 600"], cwd=tmp_path, timeout=0.2, terminate_grace=0.2
    )
    assert time.monotonic() - started < 2
    assert result.returncode == -signal.SIGKILL
    assert not process_group_alive(result.pid)


@pytest.mark.trio
async def test_a_background_child_holding_the_pipes_does_not_hang_a_finished_command(tmp_path):
    started = time.monotonic()
    result = await run_process_group(
        ["bash", "-c", "sleep 600 & echo finished"], cwd=tmp_path, timeout=60, drain_timeout=0.3
    )
    assert time.monotonic() - started < 2
    assert (result.returncode, result.stdout) == (0, "finished\n")
    assert not result.interrupted
    assert not process_group_alive(result.pid)


@pytest.mark.trio
async def test_a_detached_background_child_is_killed_when_the_command_finishes(tmp_path):
    result = await run_process_group(
        ["bash", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], cwd=tmp_path, timeout=60
    )
    assert result.returncode == 0
    assert not process_group_alive(result.pid)


@pytest.mark.trio
async def test_output_beyond_the_cap_is_cut_and_the_cut_bytes_counted(tmp_path):
    result = await run_process_group(
        ["bash", "-c", "head -c 5000 /dev/zero | tr '\\0' a; head -c 7 /dev/zero | tr '\\0' b >&2"],
        cwd=tmp_path,
        timeout=5,
        output_cap=100,
    )
    assert result.stdout == "a" * 100
    assert result.stdout_cut_bytes == 4900
    assert (result.stderr, result.stderr_cut_bytes) == ("b" * 7, 0)


@pytest.mark.trio
async def test_the_cap_counts_characters_and_the_cut_counts_bytes(tmp_path):
    result = await run_process_group(["printf", "\u00e9" * 10], cwd=tmp_path, timeout=5, output_cap=3)
    assert result.stdout == "\u00e9" * 3
    assert result.stdout_cut_bytes == 14


@pytest.mark.trio
async def test_undecodable_bytes_are_shown_as_replacement_characters(tmp_path):
    result = await run_process_group(["printf", "a\\377b"], cwd=tmp_path, timeout=5)
    assert result.stdout == "a\ufffdb"


@pytest.mark.trio
async def test_abort_terminates_the_group_and_keeps_the_output_so_far(tmp_path):
    abort = trio.Event()
    result = None

    async def run() -> None:
        nonlocal result
        result = await run_process_group(
            ["bash", "-c", f"echo before; echo up > {ready}; sleep 600"],
            cwd=tmp_path,
            timeout=60,
            abort=abort,
        )

    ready = tmp_path / "ready"
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await wait_for_output(ready)
        abort.set()
    assert time.monotonic() - started < 2
    assert result is not None
    assert result.aborted and result.interrupted and not result.timed_out
    assert result.stdout == "before\n"
    assert group_gone(result.pid)


@pytest.mark.trio
async def test_cancellation_from_outside_kills_and_reaps_the_group_then_propagates(tmp_path):
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    with trio.move_on_after(0.3) as scope:
        await run_process_group(
            ["bash", "-c", f"echo $$ > {pid_file}; exec sleep 600"], cwd=tmp_path, timeout=60
        )
    assert scope.cancelled_caught
    assert time.monotonic() - started < 2
    assert group_gone(int(pid_file.read_text()))


@pytest.mark.trio
async def test_a_command_that_cannot_start_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        await run_process_group(["/nonexistent/program"], cwd=tmp_path, timeout=5)


@pytest.mark.trio
@pytest.mark.parametrize(("timeout", "cap"), [(0, 10), (-1, 10), (1, -1)])
async def test_a_non_positive_timeout_or_negative_cap_is_refused(tmp_path, timeout, cap):
    with pytest.raises(ValueError):
        await run_process_group(["true"], cwd=tmp_path, timeout=timeout, output_cap=cap)


def test_killing_or_probing_a_group_that_is_gone_is_harmless():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert kill_process_group(pid) is False
    assert process_group_alive(pid) is False


@pytest.mark.trio
async def test_kill_process_group_signals_every_member(tmp_path):
    pid_file = tmp_path / "pid"
    async with trio.open_nursery() as nursery:
        results = []

        async def run() -> None:
            results.append(
                await run_process_group(
                    ["bash", "-c", f"echo $$ > {pid_file}; sleep 600 & wait"], cwd=tmp_path, timeout=60
                )
            )

        nursery.start_soon(run)
        while not pid_file.exists() or not pid_file.read_text():
            await trio.sleep(0.01)
        pgid = int(pid_file.read_text())
        assert process_group_alive(pgid)
        assert kill_process_group(pgid) is True
    assert results[0].returncode == -signal.SIGKILL
    assert not process_group_alive(pgid)
