"""A turn survives ``kill -9`` of its host: a host started on the same store finishes it from its stored
steps, and nothing is requested or run twice that must not be.

Each run starts ``turnkeep run`` in a process of its own on a six-step turn whose tools are read-only
(``read_file``), idempotent (``write_file``) and side-effecting (``shell``, which appends one line per run
of a call to ``runs.log``), kills it with SIGKILL at a random moment of the turn, then resumes the session in
a host of this process. Every run must end the turn exactly once, completed; request no stored step again
(at most one request more than the steps, the one the kill cut off); run no side-effecting call twice; and
leave a history a strict provider takes. ``TURNKEEP_KILL_RUNS`` sets the number of runs on SQLite (``make
chaos`` runs 100); PostgreSQL gets a quarter of them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sampler import AssistantMessage, Message, ToolMessage, UserMessage
from sampler.fake import Conversation, FakeProvider, FaultPlan, FinalAnswer, Script, Step, ToolStep
from shell import Host, load_settings
from shell.store import open_store
from tests._waiting import wait_until
from tests.shell.cli.test_cli import KEY_VAR, REPO, TERMINAL, TIMEOUT, command, environment

RUNS = int(os.environ.get("TURNKEEP_KILL_RUNS", "6"))
SEED = int(os.environ.get("TURNKEEP_KILL_SEED", "27"))
ANSWER = "all six steps done"
STALLS = FaultPlan(seed=SEED, stall=1.0, stall_seconds=0.05, max_consecutive=9)
"""Every model call pauses once mid-stream, so that kills land mid-stream too."""


def shell_step(label: str) -> tuple[str, dict[str, Any]]:
    # A kill can land before, during or after the append: the call may or may not have taken effect.
    return ("shell", {"command": f"sleep 0.05; echo {label} >> runs.log; sleep 0.05"})


STEPS: list[Step] = [
    ToolStep([("read_file", {"path": "notes.txt"})], text="Reading the notes first."),
    ToolStep([("write_file", {"path": "out.txt", "content": "one"})]),
    ToolStep([shell_step("s3")]),
    ToolStep(
        [
            ("read_file", {"path": "out.txt"}),
            ("write_file", {"path": "two.txt", "content": "two"}),
            shell_step("s4"),
        ]
    ),
    ToolStep([shell_step("s5")]),
    FinalAnswer(ANSWER, chunks=8),
]


class SixSteps:
    """The six-step task, with a log of the step each request asked for, by the run named in its prompt."""

    def __init__(self) -> None:
        self.requests: dict[str, Counter[int]] = {}
        self._lock = threading.Lock()
        self._task = Script.task(STEPS)
        self.script = Script(self._respond, name="six_steps")

    def _respond(self, conversation: Conversation) -> Step:
        run = conversation.user_texts[0].split(":", 1)[0]
        with self._lock:
            self.requests.setdefault(run, Counter())[conversation.tool_rounds] += 1
        return self._task.respond(conversation)


def start_and_kill(
    provider: FakeProvider, store: str, workspace: Path, run: str, delay: float | None
) -> tuple[str, float]:
    """Run the turn in a ``turnkeep run`` process and SIGKILL it ``delay`` s after its turn started (with
    None, let it end); the session's id and the seconds from the turn's start to its end or the kill."""
    env = environment(TURNKEEP_STORE__PATH=store, TURNKEEP_TOOLS__ALLOW="shell,write_file")
    args = ["--base-url", provider.base_url, "--api-key-env", KEY_VAR, "--workspace", str(workspace)]
    args += ["--json", "--allow-all", f"{run}: do the six steps"]
    process = subprocess.Popen(
        command("run", *args), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        session_id, began = "", 0.0
        for line in process.stdout:
            event = json.loads(line)
            if event["type"] == "turn_started":
                session_id, began = str(event["session"]), time.monotonic()
                if delay is not None:
                    time.sleep(delay)  # the random moment of the kill: not a wait for anything
                    process.send_signal(signal.SIGKILL)
                    return session_id, delay
            elif event["type"] in TERMINAL:
                return session_id, time.monotonic() - began
        raise AssertionError(f"run {run}: the turn never started or ended (exit {process.wait(TIMEOUT)})")
    finally:
        process.kill()
        process.wait(TIMEOUT)


def assert_paired(messages: list[Message]) -> None:
    """Every tool call has exactly one result, after its call and before the next answer; no result
    without its call; as a strict provider requires."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"calls without a result before the next answer: {open_calls}"
            open_calls = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolMessage):
            call_id = message.result.call_id
            assert call_id in open_calls and call_id not in answered, f"a stray or repeated result {call_id}"
            open_calls.discard(call_id)
            answered.add(call_id)
        elif isinstance(message, UserMessage):
            assert not open_calls, f"a user message before the results of {open_calls}"
    assert not open_calls


def resume_and_check(
    provider: FakeProvider, store: str, workspace: Path, session_id: str, run: str, steps: SixSteps
) -> bool:
    """Finish the session's turn in a host here and check the run; whether the kill cut the turn off."""
    with open_store(store) as reader:
        cut_off = reader.get_session(session_id).status == "in_turn"
    environ = {
        "TURNKEEP_STORE__PATH": store,
        "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
        "TURNKEEP_PROVIDER__API_KEY_ENV": KEY_VAR,
        KEY_VAR: "sk-cli-test-0000",
        "TURNKEEP_TOOLS__ALLOW": "shell,write_file",
    }
    with Host(load_settings(environ=environ)) as host:
        host.resume(session_id)
        with open_store(store) as reader:
            assert wait_until(lambda: reader.get_session(session_id).status == "idle", 60), (
                f"run {run} never ended"
            )
            events = [e for e in reader.load_events(session_id) if e.turn == 1]
            history = [m.message for m in reader.load_messages(session_id, include_replaced=True)]
    types = [e.type for e in events]
    ends = [e for e in events if e.type in ("TurnCompleted", "TurnFailed", "TurnCancelled")]
    assert len(ends) == 1, f"run {run}: the turn ended {len(ends)} times: {types}"
    end = json.loads(ends[0].body)
    assert (ends[0].type, end["text"], end["steps"]) == ("TurnCompleted", ANSWER, 6), f"run {run}: {end}"
    assert types.count("TurnResumed") == (1 if cut_off else 0), f"run {run}: {types}"
    requested = steps.requests[run]
    assert sum(requested.values()) <= 6 + 1 and max(requested.values()) <= 2, f"run {run}: {requested}"
    runs_log = workspace / "runs.log"
    lines = runs_log.read_text().split() if runs_log.exists() else []
    assert max(Counter(lines).values(), default=0) <= 1, (
        f"run {run}: a side-effecting call ran twice: {lines}"
    )
    assert_paired(history)
    return cut_off


def kill_runs(
    provider: FakeProvider, steps: SixSteps, store_for: Any, tmp_path: Path, runs: int, seed: int
) -> int:
    """One run without a kill, which measures how long the turn takes here, then ``runs`` runs killed at a
    moment drawn from that span; how many kills cut the turn off."""
    rng = random.Random(seed)
    cut = 0
    span = 0.0
    for n in range(runs + 1):
        workspace = tmp_path / f"ws{n}"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("the notes")
        store = store_for(n)
        run = f"run-{seed}-{n}"
        delay = None if n == 0 else rng.uniform(0.0, span)
        session_id, took = start_and_kill(provider, store, workspace, run, delay)
        if n == 0:
            span = took * 1.1
        cut += resume_and_check(provider, store, workspace, session_id, run, steps)
    print(f"{cut} of {runs} kills cut the turn off (turn span {span:.2f} s)")
    return cut


RUN_BOUND = 120 + 10 * RUNS
"""Seconds the runs may take in all: each is a process start, a turn and a host's start (1-2 s here)."""


@pytest.mark.timeout(RUN_BOUND)
def test_a_turn_killed_at_random_moments_is_finished_once_by_the_next_host(tmp_path: Path) -> None:
    steps = SixSteps()
    with FakeProvider(steps.script, strict_history=True, faults=STALLS) as provider:
        cut = kill_runs(provider, steps, lambda n: str(tmp_path / f"store{n}.db"), tmp_path, RUNS, SEED)
    assert cut >= RUNS // 3, f"only {cut} of {RUNS} kills landed mid-turn: the test did not test resuming"


@pytest.mark.timeout(RUN_BOUND)
def test_a_turn_killed_at_random_moments_is_finished_once_on_postgresql(
    tmp_path: Path, postgres_store_url: str
) -> None:
    steps = SixSteps()
    runs = max(3, RUNS // 4)
    with FakeProvider(steps.script, strict_history=True, faults=STALLS) as provider:
        cut = kill_runs(provider, steps, lambda n: postgres_store_url, tmp_path, runs, SEED + 1)
    assert cut >= 1, f"none of {runs} kills landed mid-turn"
