"""``turnkeep chaos --kill-host-every S``: the host itself is killed with SIGKILL, and started again.

The host runs in a child process (:mod:`._host_child`) on a SQLite store, its sessions prompting turns of
three tool steps each: a read-only call (``read_file``), an idempotent one (``write_file``) and a
side-effecting one (``shell``, appending one line per run of the call to ``runs.log``), then an answer. At a
moment drawn from ``S * [0.5, 1.5)`` seconds after its host has started, the child is killed with SIGKILL
and started again on the same store (a child that ends its work first is not killed); after ``kills`` kills
it runs to the end. Then every session is checked: each turn started once and ended once, each prompt stored
once in its turn, every tool call with exactly one result; no side-effecting call ran twice; and no stored
step was requested again (a session's requests exceed its steps by at most the number of kills, each of
which can cut off one request in flight per session).
"""

from __future__ import annotations

import collections
import random
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

from sampler.fake import Conversation, FakeProvider, FinalAnswer, Script, Step, ToolStep

from ..store import StoreError, open_store
from ._host_names import prompt_text, session_name
from ._invariants import event_log_violations, history_violations

__all__ = ["HostKillReport", "host_kill_run", "print_host_kill_report"]

_TOOL_ROUNDS = 3
_CHILD_DEADLINE = 300.0
"""Seconds the last, unkilled, host may take to end every turn."""


class HostKillReport(msgspec.Struct, frozen=True):
    """What a host-kill run did and found: ``violations`` is empty when every invariant held."""

    seed: int
    sessions: int
    turns: int
    kills: int
    kill_every: float
    resumed: int
    """Turns that a host took up after the one running them was killed."""
    interrupted: int
    """Turns ended ``interrupted`` (resumed ``host.max_resumes_per_turn`` times already)."""
    extra_requests: int
    """Model requests beyond one per step, over all sessions (each a request a kill cut off)."""
    seconds: float
    violations: list[str]

    @property
    def ok(self) -> bool:
        """Whether no invariant was violated."""
        return not self.violations


class _Requests:
    """The task every turn runs, with a count of the requests for each step of each turn."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, int, int]] = collections.Counter()
        self._lock = threading.Lock()
        self.script = Script(self._respond, name="host-kills")

    def _respond(self, conversation: Conversation) -> Step:
        prompt = next(text for text in reversed(conversation.user_texts) if text.startswith("chaos "))
        session_id, turn = prompt.split()[1], int(prompt.split()[3].rstrip(":"))
        step = conversation.tool_rounds
        with self._lock:
            self.counts[(session_id, turn, step)] += 1
        marker = f"{session_id}-{turn}"
        if step == 0:
            return ToolStep([("read_file", {"path": "notes.txt"})])
        if step == 1:
            return ToolStep([("write_file", {"path": f"turn-{turn}.txt", "content": marker})])
        if step == 2:
            return ToolStep([("shell", {"command": f"echo {marker} >> runs.log"})])
        return FinalAnswer(f"turn {turn} done", chunks=6)


def host_kill_run(
    *, seed: int, sessions: int, turns: int, kill_every: float, kills: int = 5
) -> HostKillReport:
    """Run the sessions' turns in a host killed ``kills`` times (see the module's description) and check
    them. Raises ValueError for out-of-range numbers."""
    if sessions < 1 or turns < 1 or kills < 0 or not kill_every > 0:
        raise ValueError("--sessions and --turns must be >= 1, --host-kills >= 0 and --kill-host-every > 0")
    rng = random.Random(seed)
    requests = _Requests()
    started = time.monotonic()
    violations: list[str] = []
    with tempfile.TemporaryDirectory(prefix="turnkeep-host-kills-") as scratch:
        root = Path(scratch)
        store, workspaces = root / "store.db", root / "workspaces"
        for index in range(sessions):
            workspace = workspaces / session_name(index)
            workspace.mkdir(parents=True)
            (workspace / "notes.txt").write_text("notes to read\n")
        with FakeProvider(requests.script) as provider:
            killed, failure = _run_with_kills(
                [str(store), provider.base_url, str(workspaces), str(sessions), str(turns)],
                rng,
                kill_every,
                kills,
            )
        if failure:
            violations.append(failure)
        resumed, interrupted = _check(store, workspaces, sessions, turns, violations)
    again: collections.Counter[str] = collections.Counter()
    for (session_id, _, _), count in requests.counts.items():
        again[session_id] += count - 1
    extra = sum(again.values())
    for session_id, count in sorted(again.items()):
        if count > killed:
            violations.append(f"{session_id}: {count} requests were sent again, with only {killed} kills")
    return HostKillReport(
        seed,
        sessions,
        turns,
        killed,
        kill_every,
        resumed,
        interrupted,
        extra,
        time.monotonic() - started,
        violations,
    )


def _run_with_kills(args: list[str], rng: random.Random, kill_every: float, kills: int) -> tuple[int, str]:
    """Start the host; SIGKILL it at drawn moments ``kills`` times, starting it again each time; then let
    it end. How many kills there were, and what the last host said if it failed."""
    command = [sys.executable, "-m", "shell._chaos._host_child", *args]
    killed = 0
    while True:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if killed < kills:
                if not _came_up(child):
                    return killed, f"the host did not start within {_CHILD_DEADLINE:g} s"
                try:
                    child.wait(timeout=kill_every * rng.uniform(0.5, 1.5))
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    killed += 1
                    continue
            else:
                child.wait(timeout=_CHILD_DEADLINE)
            _, stderr = child.communicate()
            if child.returncode != 0:
                return killed, f"the last host ended with status {child.returncode}: {stderr.strip()[-2000:]}"
            return killed, ""
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def _came_up(child: subprocess.Popen[str]) -> bool:
    """Whether the child said its host is up (or ended) within :data:`_CHILD_DEADLINE`."""
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], _CHILD_DEADLINE)
    if ready:
        child.stdout.readline()  # "up", or "" when it ended
    return bool(ready)


def _check(
    store: Path, workspaces: Path, sessions: int, turns: int, violations: list[str]
) -> tuple[int, int]:
    """Check every session in ``store`` (appending to ``violations``); the resumed and interrupted turns."""
    resumed = interrupted = 0
    with open_store(store) as reader:
        for index in range(sessions):
            session_id = session_name(index)
            acknowledged = {turn: prompt_text(session_id, turn) for turn in range(1, turns + 1)}
            try:
                found = history_violations(reader, session_id, acknowledged)
                found += event_log_violations(reader, session_id, dict.fromkeys(acknowledged, ""))
            except StoreError as exc:
                violations.append(f"{session_id}: {exc}")
                continue
            violations += [f"{session_id}: {problem}" for problem in found]
            for event in reader.load_events(session_id):
                resumed += event.type == "TurnResumed"
                interrupted += event.type == "TurnCancelled" and b'"interrupted"' in event.body
            runs = workspaces / session_id / "runs.log"
            lines = runs.read_text().split() if runs.exists() else []
            for marker, count in sorted(collections.Counter(lines).items()):
                if count > 1:
                    violations.append(f"{session_id}: the side-effecting call of {marker} ran {count} times")
    return resumed, interrupted


def print_host_kill_report(report: HostKillReport, *, stream: Any = None) -> None:
    """Print the report as a few lines, the violations last."""
    out = stream or sys.stdout
    print(
        f"host kills: seed {report.seed}, {report.sessions} sessions x {report.turns} turns, "
        f"{report.kills} kills (every ~{report.kill_every:g} s), {report.seconds:.1f} s",
        file=out,
    )
    print(
        f"  turns resumed by the next host: {report.resumed}; ended interrupted: {report.interrupted}; "
        f"requests sent again: {report.extra_requests}",
        file=out,
    )
    if report.ok:
        print("  invariants: every turn ended once, nothing stored twice, no side effect repeated", file=out)
    for violation in report.violations:
        print(f"  VIOLATION: {violation}", file=out)
