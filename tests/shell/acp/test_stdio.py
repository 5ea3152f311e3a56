"""The agent as a process: stdout carries protocol lines only, and the process ends when its editor goes
(stdin closed, SIGTERM), answering what it still owes, within the abort grace and 2 s."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from sampler.fake import Fault, FaultPlan, Script
from tests.shell.acp._agent_process import running_agent, updates

GRACE = 2.5

HANG = FaultPlan.scripted([Fault.stall(hang=True, after_chunks=4)] * 4)


@pytest.mark.parametrize("how", ["stdin closed", "SIGTERM"])
def test_the_editor_going_mid_turn_answers_the_prompt_and_ends_the_process_in_time(
    tmp_path: Path, how: str
) -> None:
    with running_agent(Script.text("words " * 100, chunks=20), tmp_path / "s.db", faults=HANG) as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        prompt = agent.prompt(session, "talk")
        while not updates([agent.next()], "agent_message_chunk"):
            pass
        gone = time.monotonic()
        if how == "SIGTERM":
            agent.process.send_signal(signal.SIGTERM)
        else:
            agent.close_stdin()
        rest = agent.rest(deadline=GRACE + 2)
        agent.process.wait(GRACE + 2)
        took = time.monotonic() - gone
    answers = [line for line in rest if line.get("id") == prompt]
    assert [a["result"] for a in answers] == [{"stopReason": "cancelled"}]
    assert took < GRACE + 2
    assert agent.process.returncode == 0


def test_stdout_carries_only_protocol_lines_even_when_a_tool_writes_to_it(tmp_path: Path) -> None:
    from sampler.fake import FinalAnswer, ToolStep

    # the tool's parent is the agent: writing to its fd 1 must not reach the editor
    noisy = Script.task(
        [ToolStep([("shell", {"command": "echo noise; echo more > /proc/$PPID/fd/1"})]), FinalAnswer("ok")]
    )
    with running_agent(noisy, tmp_path / "s.db", "--allow", "shell") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, _ = agent.until_answer(agent.prompt(session, "run"))
    assert answer["result"] == {"stopReason": "end_turn"}  # every line before it parsed and validated


def test_closing_stdin_while_a_tool_runs_ends_the_process_in_time_and_leaves_no_descendant(
    tmp_path: Path,
) -> None:
    from sampler.fake import FinalAnswer, ToolStep

    marker = "37.25"
    sleepy = Script.task([ToolStep([("shell", {"command": f"sleep {marker}"})]), FinalAnswer("never")])
    with running_agent(sleepy, tmp_path / "s.db", "--allow", "shell") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        prompt = agent.prompt(session, "sleep")
        while True:
            line = [agent.next()]
            calls = updates(line, "tool_call") + updates(line, "tool_call_update")
            if any(call.get("status") == "in_progress" for call in calls):
                break
        gone = time.monotonic()
        agent.close_stdin()
        rest = agent.rest(deadline=GRACE + 2)
        agent.process.wait(GRACE + 2)
        took = time.monotonic() - gone
    assert [line["result"] for line in rest if line.get("id") == prompt] == [{"stopReason": "cancelled"}]
    assert took < GRACE + 2
    assert not _processes_running(marker)


def _processes_running(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"sleep {marker}" in cmdline and "bash" not in cmdline:
            found.append(cmdline)
    return found


def test_the_protocol_keeps_stdout_and_fd_1_goes_to_stderr(tmp_path: Path) -> None:
    import subprocess
    import sys

    program = (
        "import os, sys\n"
        "from shell.acp import claim_stdio\n"
        "claim = claim_stdio()\n"
        "print('stray print')\n"
        "sys.stdout.flush()\n"
        "os.system('echo from a child')\n"
        "os.write(claim.write_fd, b'protocol\\n')\n"
        "print(os.read(0, 10) == b'', flush=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], input=b"not for children", capture_output=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"protocol\n"
    assert b"stray print" in result.stderr and b"from a child" in result.stderr
    assert b"True" in result.stderr  # fd 0 is /dev/null: nothing of the protocol's input leaks to it
