"""Each scenario, played as whole turns by a real host that ``chat --fake`` would build, ends as it says:
coding completes through its tool calls, flaky completes after retries, expiring after refreshes,
compacting compacts, looping fails as a doom loop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sampler.fake import SCENARIOS, HostNeeds
from shell import events as ev
from shell.cli import _fake
from shell.cli._settings import CliUsageError, policy_factory
from shell.config import load_settings
from shell.facade import Host, Session

EVENT_TIMEOUT = 60


@contextmanager
def playing(name: str, tmp_path: Path) -> Iterator[Session]:
    """A session of a host pointed at the scenario ``name`` as ``chat --fake`` points it."""
    with _fake.started(name, {}, store=str(tmp_path / "sessions.db")) as fake:
        settings = load_settings(environ=fake.environ)
        permissions = policy_factory(settings, allow=fake.scenario.needs.allow_tools, interactive=False)
        extra: dict[str, Any] = {} if fake.credentials is None else {"credentials": fake.credentials}
        with Host(settings, permissions=permissions, **extra) as host:
            yield host.open(fake.workspace)


def turn(session: Session, text: str) -> list[Any]:
    return list(session.prompt(text, event_timeout=EVENT_TIMEOUT))


def of(kind: type, events: list[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def test_coding_completes_after_listing_writing_running_and_reading(tmp_path: Path) -> None:
    with playing("coding", tmp_path) as session:
        events = turn(session, "anything at all")
    assert isinstance(events[-1], ev.TurnCompleted)
    finished = of(ev.ToolCallFinished, events)
    assert [call.tool for call in finished] == ["list_dir", "write_file", "shell", "read_file"]
    assert not any(call.is_error for call in finished), [call.preview for call in finished]
    assert "7 notes.md" in finished[2].preview
    assert [retry.status for retry in of(ev.Retrying, events)] == [429]


def test_flaky_completes_after_a_429_a_500_and_a_reset(tmp_path: Path) -> None:
    with playing("flaky", tmp_path) as session:
        events = turn(session, "hello")
    assert isinstance(events[-1], ev.TurnCompleted)
    retries = of(ev.Retrying, events)
    assert [retry.status for retry in retries][:2] == [429, 500]
    assert retries[0].delay >= 1.0  # the Retry-After of the 429
    assert any(retry.discard_partial for retry in retries)  # the reset cut a streamed answer


def test_expiring_completes_after_refreshing_its_tokens(tmp_path: Path) -> None:
    with playing("expiring", tmp_path) as session:
        events = turn(session, "hello")
    assert isinstance(events[-1], ev.TurnCompleted)
    assert len(of(ev.AuthRefreshed, events)) >= 2


def test_compacting_compacts_by_the_third_prompt_and_every_turn_completes(tmp_path: Path) -> None:
    with playing("compacting", tmp_path) as session:
        turns = [turn(session, f"prompt {n}") for n in range(1, 4)]
    assert all(isinstance(events[-1], ev.TurnCompleted) for events in turns)
    assert not of(ev.CompactionFinished, turns[0])
    compacted = [event for events in turns for event in of(ev.CompactionFinished, events)]
    assert compacted and all(event.ok for event in compacted)
    started = [event for events in turns for event in of(ev.CompactionStarted, events)]
    assert [event.reason for event in started] == ["proactive"] * len(compacted)


def test_looping_fails_as_a_doom_loop_and_the_session_stays_usable(tmp_path: Path) -> None:
    with playing("looping", tmp_path) as session:
        first = turn(session, "look around")
        second = turn(session, "and again")
    assert isinstance(first[-1], ev.TurnFailed) and first[-1].kind == "doom_loop"
    assert of(ev.DoomLoopWarning, first)
    assert isinstance(second[-1], ev.TurnFailed) and second[-1].kind == "doom_loop"


def test_a_scenarios_needs_become_the_hosts_variables_over_the_environment() -> None:
    needs = HostNeeds(context_window=1000, max_output_tokens=200, keep_recent_turns=1, retry_base_delay=0.3)
    environ = {"TURNKEEP_PROVIDER__API_KEY_ENV": "SOME_KEY", "TURNKEEP_CONFIG": "x.toml", "HOME": "/home/x"}
    got = _fake.fake_environ(needs, "http://127.0.0.1:1/v1", Path("/s.db"), environ)
    assert got == {
        "HOME": "/home/x",
        "TURNKEEP_PROVIDER__BASE_URL": "http://127.0.0.1:1/v1",
        "TURNKEEP_PROVIDER__MODEL": "fake-model",
        "TURNKEEP_STORE__PATH": "/s.db",
        "TURNKEEP_WINDOW__CONTEXT_WINDOW": "1000",
        "TURNKEEP_WINDOW__MAX_OUTPUT_TOKENS": "200",
        "TURNKEEP_COMPACTION__KEEP_RECENT_TURNS": "1",
        "TURNKEEP_RETRY__BASE_DELAY": "0.3",
    }
    assert load_settings(environ=got).window.context_window == 1000
    assert _fake.fake_environ(SCENARIOS["coding"].needs, "http://h:1/v1", Path("/s.db"), {}).keys() == {
        "TURNKEEP_PROVIDER__BASE_URL",
        "TURNKEEP_PROVIDER__MODEL",
        "TURNKEEP_STORE__PATH",
    }


def test_an_unknown_scenario_is_a_usage_error() -> None:
    with pytest.raises(CliUsageError, match="coding, flaky, expiring, compacting, looping"):
        _fake.scenario_named("nope")
