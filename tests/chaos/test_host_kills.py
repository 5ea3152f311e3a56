"""The host-kill chaos mode: a host SIGKILLed at random moments and started again on the same store ends
every turn once, repeats no side effect and requests no stored step again; and its checks can fail."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import msgspec

from sampler import UserMessage
from shell import events as ev
from shell._chaos import HostKillReport, host_kill_run, print_host_kill_report
from shell._chaos._host_kills import _check
from shell._chaos._host_names import prompt_text, session_name
from shell.store import open_store

REPO = Path(__file__).resolve().parents[2]


def test_a_host_killed_mid_turns_and_started_again_converges_every_turn_once() -> None:
    # Enough work that the host is still at it at each kill, however fast it runs.
    report = host_kill_run(seed=3, sessions=6, turns=20, kill_every=0.3, kills=2)
    assert report.violations == []
    assert report.kills == 2
    out = io.StringIO()
    print_host_kill_report(report, stream=out)
    assert "2 kills" in out.getvalue() and "every turn ended once" in out.getvalue()


def test_the_command_line_runs_it_and_reports_json() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shell.cli",
            "chaos",
            "--kill-host-every",
            "0.2",
            "--host-kills",
            "1",
            "--sessions",
            "2",
            "--turns",
            "10",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = msgspec.json.decode(done.stdout, type=HostKillReport)
    assert (report.sessions, report.turns, report.kills, report.violations) == (2, 10, 1, [])


def test_the_command_line_refuses_to_mix_host_kills_with_actor_crashes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shell.cli", "chaos", "--kill-host-every", "1", "--actor-crash-rate", "0.1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "--kill-host-every takes no" in done.stderr


def test_the_checks_find_a_turn_ended_twice_a_lost_prompt_and_a_repeated_side_effect(tmp_path: Path) -> None:
    sid = session_name(0)
    workspace = tmp_path / sid
    workspace.mkdir()
    (workspace / "runs.log").write_text(f"{sid}-1\n{sid}-1\n")
    with open_store(tmp_path / "store.db") as store:
        store.create_session(sid, workspace=str(workspace), model="m")
        store.start_turn(sid, 1, UserMessage.of_text(prompt_text(sid, 1)))
        store.append_event(sid, 1, ev.TurnStarted(sid, 1, prompt_text(sid, 1)))
        store.finish_turn(sid, 1, ev.TurnCompleted(sid, 1, "done", 1))
        store.append_event(sid, 1, ev.TurnCancelled(sid, 1, "interrupted"))
    violations: list[str] = []
    _check(tmp_path / "store.db", tmp_path, 1, 2, violations)
    assert any("turn 1 has 2 stored ends" in v for v in violations), violations
    assert any("prompt of turn 2 is stored 0 times" in v for v in violations), violations
    assert any("side-effecting call" in v and "ran 2 times" in v for v in violations), violations
