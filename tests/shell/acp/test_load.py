"""Many sessions, each with queued prompts, under the embedded provider's heavy faults and actor crashes
(each session actor crashes on a message with probability 0.04): every prompt gets exactly one
schema-valid answer, after its session's updates, with the mapping of the outcome table.

The short run (3 sessions x 2 prompts) is part of every test run; ``ACP_LOAD_RUNS=N`` runs the long one
(16 sessions x 5 prompts) N times with different seeds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sampler.fake import FaultPlan, FinalAnswer, Script, ToolStep
from tests.shell.acp._agent_process import running_agent

LONG_RUNS = int(os.environ.get("ACP_LOAD_RUNS", "0"))
TASK = Script.task([ToolStep([("list_dir", {"path": "."})]), FinalAnswer("Listed.")])
STOP_REASONS = {"end_turn", "max_tokens", "max_turn_requests", "cancelled"}


def _run(tmp_path: Path, sessions: int, prompts: int, seed: int) -> None:
    faults = FaultPlan.profile("heavy", seed=seed)
    crashes = ("--actor-crash-rate", "0.04", "--chaos-seed", str(seed))
    with running_agent(TASK, tmp_path / "s.db", "--allow", "list_dir", *crashes, faults=faults) as (agent, _):
        ids = [agent.new_session(tmp_path / f"ws{n}") for n in range(sessions)]
        owed: dict[int, str] = {}
        for _round in range(prompts):
            for session in ids:
                owed[agent.prompt(session, "list it")] = session
        answered: dict[int, dict[str, Any]] = {}
        updates_after: list[str] = []
        done_sessions: set[str] = set()
        remaining = {session: prompts for session in ids}
        while len(answered) < len(owed):
            line = agent.next(deadline=60)
            if line.get("method") == "session/update":
                if line["params"]["sessionId"] in done_sessions:
                    updates_after.append(line["params"]["sessionId"])
                continue
            assert "method" not in line, line
            request_id = line["id"]
            assert request_id in owed and request_id not in answered, f"an answer owed to nobody: {line}"
            answered[request_id] = line
            remaining[owed[request_id]] -= 1
            if remaining[owed[request_id]] == 0:
                done_sessions.add(owed[request_id])
        agent.close_stdin()
        assert [line for line in agent.rest() if "method" not in line] == []
    assert not updates_after, "updates of a session came after its last answer"
    for line in answered.values():
        if "result" in line:
            assert line["result"]["stopReason"] in STOP_REASONS
        else:
            error = line["error"]
            assert error["code"] in (-32603, -32000)
            assert set(error["data"]) == {"kind", "message", "retryable", "session", "turn"}
            assert (error["code"] == -32000) == (error["data"]["kind"] == "auth")


def test_a_few_sessions_under_heavy_faults_answer_every_prompt_once(tmp_path: Path) -> None:
    _run(tmp_path, sessions=3, prompts=2, seed=1)


@pytest.mark.skipif(not LONG_RUNS, reason="the long run: set ACP_LOAD_RUNS=N")
@pytest.mark.timeout(900)
@pytest.mark.parametrize("seed", range(1, LONG_RUNS + 1))
def test_sixteen_sessions_of_five_prompts_under_heavy_faults_answer_every_prompt_once(
    tmp_path: Path, seed: int
) -> None:
    _run(tmp_path, sessions=16, prompts=5, seed=seed)
