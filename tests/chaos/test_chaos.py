"""The chaos harness: a run under faults, crashes and cancels ends with every turn converged and nothing
lost or left behind; its report holds the counts; and each of its checks is able to fail."""

from __future__ import annotations

import contextlib
import io
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sampler import AssistantMessage, TextPart, ToolCall, ToolMessage, ToolResult, UserMessage
from shell import events as ev
from shell._chaos import (
    ChaosReport,
    Resources,
    TurnBound,
    event_log_violations,
    history_violations,
    leaks,
    print_report,
    replay_command,
    run,
    turn_bound,
)
from shell._chaos._driving import _Limits, _run_turn, _TurnLog
from shell._chaos._workload import _CancelPlan, _TurnPlan
from shell.config import load_settings
from shell.store import SessionStore

SEED, SESSIONS, TURNS, PROFILE = 13, 6, 3, "heavy"


def _run_json(actor_crash_rate: float, rate_limit: float | None = None) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(
            seed=SEED,
            sessions=SESSIONS,
            turns=TURNS,
            actor_crash_rate=actor_crash_rate,
            profile=PROFILE,
            as_json=True,
            rate_limit=rate_limit,
        )
    return code, msgspec.json.decode(out.getvalue())


@pytest.fixture(scope="module")
def faults_and_cancels() -> tuple[int, dict[str, Any]]:
    """The short run with provider faults, token expiry, compaction, oversized requests and cancels."""
    return _run_json(actor_crash_rate=0.0)


# -- whole runs ------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_short_run_under_provider_faults_and_cancels_exits_0_with_no_violation(
    faults_and_cancels: tuple[int, dict[str, Any]],
) -> None:
    code, report = faults_and_cancels
    assert report["violations"] == []
    assert code == 0
    assert sum(report["outcomes"].values()) == SESSIONS * TURNS
    assert all(o == "completed" or o.startswith(("failed: ", "cancelled: ")) for o in report["outcomes"])


def test_the_table_report_names_the_outcome_and_the_command_to_replay(
    faults_and_cancels: tuple[int, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = faults_and_cancels
    print_report(msgspec.convert(report, ChaosReport))
    shown = capsys.readouterr().out
    assert "no violations" in shown
    assert "faults and recoveries" in shown
    assert report["replay"] in shown.splitlines()


@pytest.mark.timeout(120)
def test_the_json_report_holds_the_counts_and_the_command_to_replay(
    faults_and_cancels: tuple[int, dict[str, Any]],
) -> None:
    _, report = faults_and_cancels
    assert sum(report["faults"].values()) > 0
    assert report["provider_requests"] > sum(report["faults"].values())
    assert report["retries_absorbed"] > 0
    assert report["auth_refreshes"] > 0
    assert report["projection_fallbacks"] > 0
    assert sum(report["cancels"].values()) > 0
    for key in ("compactions", "crashes", "runtime", "dead_letters", "cancels", "tool_calls"):
        assert key in report
    assert all(d["explanation"] != "unexplained" for d in report["dead_letters"])
    assert report["replay"] == replay_command(
        seed=SEED, sessions=SESSIONS, turns=TURNS, actor_crash_rate=0.0, profile=PROFILE
    )
    assert report["bound_seconds"] > report["slowest_turn"]


@pytest.mark.timeout(600)
def test_a_short_run_with_actor_crashes_too_exits_0_with_no_violation() -> None:
    code, report = _run_json(actor_crash_rate=0.02)
    assert report["violations"] == []
    assert code == 0
    assert sum(report["crashes"].values()) > 0


@pytest.mark.timeout(600)
def test_a_short_run_against_a_rate_limited_provider_with_crashes_exits_0_with_no_violation() -> None:
    code, report = _run_json(actor_crash_rate=0.02, rate_limit=8)
    assert report["violations"] == []
    assert code == 0
    assert report["rate_limit"] == 8
    assert report["replay"].endswith("--rate-limit 8")


# -- the checks can fail ---------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore.open(tmp_path / "store.db") as opened:
        opened.create_session("s", workspace=str(tmp_path), model="m")
        yield opened


def _prompt(text: str) -> UserMessage:
    return UserMessage((TextPart(text),))


def _call(call_id: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(call_id, "list_dir", "{}"),))


def _result(call_id: str) -> ToolMessage:
    return ToolMessage(ToolResult(call_id, "a.txt"))


def test_a_history_that_matches_what_was_acknowledged_has_no_violation(store: SessionStore) -> None:
    store.append_message("s", 1, _prompt("first"))
    store.append_message("s", 1, _call("c1"))
    store.append_message("s", 1, _result("c1"))
    store.append_message("s", 1, AssistantMessage("done"))
    store.append_message("s", 2, _prompt("second"))
    store.append_message("s", 2, AssistantMessage("done"))
    assert history_violations(store, "s", {1: "first", 2: "second"}) == []


def test_a_message_stored_twice_in_a_turn_is_a_violation(store: SessionStore) -> None:
    store.append_message("s", 1, _prompt("first"))
    store.append_message("s", 1, AssistantMessage("done"))
    store.append_message("s", 1, AssistantMessage("done"))
    assert history_violations(store, "s", {1: "first"}) == [
        "message 3 (AssistantMessage, turn 1) duplicates message 2"
    ]


def test_an_acknowledged_prompt_stored_twice_or_never_is_a_violation(store: SessionStore) -> None:
    store.append_message("s", 1, _prompt("first"))
    store.append_message("s", 2, _prompt("first"))
    problems = history_violations(store, "s", {1: "first", 3: "lost"})
    assert "the prompt of turn 1 is stored 2 times, not once" in problems
    assert "the prompt of turn 3 is stored 0 times, not once" in problems


def test_a_tool_call_without_a_result_and_a_result_without_a_call_are_violations(
    store: SessionStore,
) -> None:
    store.append_message("s", 1, _prompt("first"))
    store.append_message("s", 1, _call("c1"))
    store.append_message("s", 1, _result("c2"))
    problems = history_violations(store, "s", {1: "first"})
    assert "stored: tool call c1 has 0 results, not one" in problems
    assert "stored: a result answers tool call c2, which no message made" in problems
    assert "projection: tool call c1 has 0 results, not one" in problems


def test_a_tool_call_with_two_results_is_a_violation(store: SessionStore) -> None:
    store.append_message("s", 1, _prompt("first"))
    store.append_message("s", 1, _call("c1"))
    store.append_message("s", 1, _result("c1"))
    store.append_message("s", 1, ToolMessage(ToolResult("c1", "aborted", is_error=True)))
    assert "stored: tool call c1 has 2 results, not one" in history_violations(store, "s", {1: "first"})


def test_an_event_log_missing_an_end_or_left_in_a_turn_is_a_violation(store: SessionStore) -> None:
    store.begin_turn("s", 1)
    store.append_event("s", 1, ev.TurnStarted("s", 1, "first"))
    assert event_log_violations(store, "s", {1: "TurnCompleted"}) == [
        "turn 1 has 0 stored ends, not one",
        "the session is left 'in_turn'",
    ]
    store.append_event("s", 1, ev.TurnFailed("s", 1, "internal", "x"))
    store.end_turn("s")
    assert event_log_violations(store, "s", {1: "TurnCompleted"}) == [
        "turn 1 was seen to end as TurnCompleted but is stored as TurnFailed"
    ]


def test_a_thread_a_child_process_and_a_file_descriptor_left_behind_are_each_reported(
    tmp_path: Path,
) -> None:
    before = Resources.take()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="left-behind")
    thread.start()
    child = subprocess.Popen(["sleep", "30"])
    file = (tmp_path / "open.txt").open("w")
    try:
        found = leaks(before, Resources.take())
    finally:
        stop.set()
        thread.join()
        child.kill()
        child.wait()
        file.close()
    assert "thread 'left-behind' is still running" in found
    assert any(p.startswith(f"process {child.pid} (sleep") for p in found)
    assert any(
        p.startswith("file descriptor") and p.endswith(f"({tmp_path / 'open.txt'}) is still open")
        for p in found
    )
    assert leaks(before, Resources.take()) == []


# -- the harness never hangs -----------------------------------------------------------------------------


class _SilentSession:
    """A session address that acknowledges every prompt and then never says anything."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        self.asked.append(message)
        return 1 if type(message).__name__ == "UserPrompt" else True


def test_a_turn_that_never_ends_is_reported_hung_at_its_deadline() -> None:
    session = _SilentSession()
    entry = _TurnLog(_TurnPlan(0, "hello", "answer", cancel=_CancelPlan(after_seconds=0.05)))
    limits = _Limits(TurnBound(0.3, "0.3 s for the test"), start_wait=0.0, ask_timeout=1.0)
    _run_turn(session, queue.Queue(), entry, limits)  # type: ignore[arg-type]
    assert entry.outcome == "hung"
    assert entry.cancel == "requested"
    assert [type(m).__name__ for m in session.asked] == ["UserPrompt", "Cancel"]


def test_the_bound_covers_every_attempt_of_every_model_call() -> None:
    settings = load_settings(environ={"TURNKEEP_RETRY__MAX_ATTEMPTS": "6", "TURNKEEP_TIMEOUTS__IDLE": "1"})
    bound = turn_bound(settings, model_calls=3, tool_rounds=0, retry_after=0.0, restart_wait=0.0)
    retry = settings.retry
    assert bound.seconds >= 3 * retry.max_attempts * (settings.timeouts.idle + retry.max_delay)
    more = load_settings(environ={"TURNKEEP_RETRY__MAX_ATTEMPTS": "7", "TURNKEEP_TIMEOUTS__IDLE": "1"})
    assert (
        turn_bound(more, model_calls=3, tool_rounds=0, retry_after=0.0, restart_wait=0.0).seconds
        > bound.seconds
    )
