"""Forks and rewinds of running sessions, through the host and the façades: a fork at every turn of a
session with tool calls holds exactly that turn's history, is accepted by a provider that refuses a tool
call without its result, and continues at the next turn; a fork of a session mid-turn, a fork before a
later compaction, and a rewind that archives its source."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest

from sampler import AssistantMessage, ToolMessage, UserMessage
from sampler.fake import Conversation, FakeProvider, Fault, FaultPlan, FinalAnswer, Script, Step, ToolStep
from sampler.fake.script import is_summary_request
from shell import events as ev
from shell.facade import Host, Session, open_host
from shell.host import AgentHost, HostError
from shell.messages import Subscribe, UserPrompt
from shell.store import ForkRejected, SessionStore, StoredMessage, TurnRunning
from tests.shell._settings import settings_for
from tests.shell.test_host import KEY

FILE = "f" * 2_000
"""What each turn's tool call reads: about 500 tokens, so that a long fifth prompt overflows."""


def reading() -> Script:
    """Each turn reads ``f.txt``, then answers; a compaction request gets a short summary."""

    def respond(conversation: Conversation) -> Step:
        if is_summary_request(conversation):
            return FinalAnswer("a short summary")
        if conversation.tool_rounds == 0:
            return ToolStep([("read_file", {"path": "f.txt"})])
        return FinalAnswer(f"read it after {conversation.last_user_text[:12]}")

    return Script(respond, name="reading", summarizes=True)


def rows(store: SessionStore, session_id: str) -> list[Any]:
    return [
        (m.seq, m.turn, m.message, m.replaced_by, m.is_summary)
        for m in store.load_messages(session_id, include_replaced=True)
    ]


def unpaired(history: list[StoredMessage]) -> list[str]:
    """The tool calls without a result after them, and results without a call before them."""
    calls: set[str] = set()
    problems = []
    for stored in history:
        message = stored.message
        if isinstance(message, AssistantMessage):
            calls |= {call.id for call in message.tool_calls}
        elif isinstance(message, ToolMessage):
            if message.result.call_id not in calls:
                problems.append(f"result {message.result.call_id} without its call")
            calls.discard(message.result.call_id)
    return problems + [f"call {call} without its result" for call in sorted(calls)]


def test_a_fork_at_every_turn_holds_that_turns_history_and_a_strict_provider_takes_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f.txt").write_text(FILE)
    with FakeProvider(reading(), context_window=3_000, strict_history=True) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_COMPACTION__KEEP_RECENT_TURNS="1")
        with Host(settings, credentials=KEY) as host:
            store = host.agent_host.store
            source = host.open(workspace, session_id="src")
            seen = {0: (rows(store, "src"), store.load_messages("src"))}
            for turn in range(1, 6):
                prompt = f"turn {turn}" + (" " + "p" * 6_000 if turn == 5 else "")
                events = list(source.prompt(prompt))
                assert isinstance(events[-1], ev.TurnCompleted), events[-1]
                assert any(isinstance(e, ev.ToolCallFinished) for e in events)
                seen[turn] = (rows(store, "src"), store.load_messages("src"))
            # Turn 5 overflowed and compacted earlier turns: the originals are replaced in the source.
            assert any(e.is_summary for e in store.load_messages("src", include_replaced=True))
            source_rows, source_events = rows(store, "src"), store.load_events("src")

            for k in range(6):
                fork = source.fork(at_turn=k, session_id=f"f{k}")
                record = host.session(fork.id)
                assert (record.current_turn, record.forked_from, record.workspace) == (
                    k,
                    ("src", k),
                    str(workspace),
                )
                assert rows(store, fork.id) == seen[k][0]
                assert store.load_messages(fork.id) == seen[k][1]
                assert unpaired(store.load_messages(fork.id)) == []
                assert [e.turn for e in store.load_events(fork.id)] == [
                    e.turn for e in source_events if e.turn <= k
                ]
                end = fork.run("and now?")
                assert isinstance(end, ev.TurnCompleted), end
                assert end.turn == k + 1
            assert (rows(store, "src"), store.load_events("src")) == (source_rows, source_events)
            assert provider.stats.rejections.get("bad_request", 0) == 0  # no history was refused


def test_a_fork_before_a_later_compaction_has_the_originals(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f.txt").write_text(FILE)
    with FakeProvider(reading(), context_window=3_000, strict_history=True) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_COMPACTION__KEEP_RECENT_TURNS="1")
        with Host(settings, credentials=KEY) as host:
            source = host.open(workspace, session_id="src")
            for turn in range(1, 6):
                source.run(f"turn {turn}" + (" " + "p" * 6_000 if turn == 5 else ""))
            fork = host.fork("src", 4, new_id="before")
            forked = host.agent_host.store.load_messages(fork.id, include_replaced=True)
            prompts = [m.message for m in host.agent_host.store.load_messages(fork.id)]
    assert not any(m.is_summary or m.replaced_by is not None for m in forked)
    assert [m.parts[0].text for m in prompts if isinstance(m, UserMessage)] == [
        f"turn {n}" for n in range(1, 5)
    ]


def test_a_fork_of_a_session_mid_turn_is_taken_at_its_last_converged_turn(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f.txt").write_text("small")
    # Two turns of two model calls each, then the third turn's first call hangs.
    faults = FaultPlan.scripted([None] * 4 + [Fault.stall(after_chunks=1, hang=True)])
    script = Script.task([ToolStep([("read_file", {"path": "f.txt"})]), FinalAnswer("done")])
    with (
        FakeProvider(script, faults=faults, strict_history=True) as provider,
        AgentHost(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        address = host.open(workspace, session_id="src")
        inbox: queue.Queue[Any] = queue.Queue()
        address.ask(Subscribe(inbox))
        for _ in range(2):
            address.ask(UserPrompt("read"))
            while not isinstance(inbox.get(timeout=30), ev.TurnCompleted):
                pass
        address.ask(UserPrompt("read again"))
        while not isinstance(inbox.get(timeout=30), ev.TurnStarted):
            pass
        assert host.session("src").status == "in_turn"

        record = host.fork("src", session_id="mid")
        with pytest.raises(ForkRejected, match="last converged turn is 2; turn 3 is still running"):
            host.fork("src", at_turn=3)
        with pytest.raises(TurnRunning, match="'src'"):
            host.rewind("src", to_turn=1)
        assert host.session("src").status == "in_turn"
        stored = host.store.load_messages("mid")
        assert (record.current_turn, record.forked_from) == (2, ("src", 2))
        assert [m.turn for m in stored] == [1] * 4 + [2] * 4
        assert unpaired(stored) == []
        session = Session(host, "mid", host.resume("mid"))
        end = session.run("go on")
    assert isinstance(end, ev.TurnCompleted) and end.turn == 3


def test_a_rewind_archives_the_source_which_is_listed_and_resumed_only_when_asked(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo(), strict_history=True) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        source = host.open(tmp_path / "ws", session_id="src")
        for n in range(1, 4):
            source.run(f"say {n}")

        rewound = source.rewind(1, session_id="back")

        assert "src" not in host.agent_host.active()
        statuses = {record.id: record.status for record in host.sessions()}
        assert statuses == {"src": "archived", "back": "idle"}
        assert host.session("back").forked_from == ("src", 1)
        end = rewound.run("say again")
        assert (end.turn, end.text) == (2, "echo: say again")
        with pytest.raises(HostError, match=r"'src' is archived .* archived=True"):
            host.resume("src")
        with pytest.raises(ForkRejected, match="numbered from 0"):
            rewound.rewind(-1)
        again = host.resume("src", archived=True)
        assert host.session("src").status == "idle"
        assert again.run("say 4").turn == 4
        history = [
            m for m in host.agent_host.store.load_messages("back") if isinstance(m.message, UserMessage)
        ]
    assert [m.message.parts[0].text for m in history] == ["say 1", "say again"]


def test_a_fork_may_work_in_another_workspace_and_a_pool_like_backend_cannot_fork(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        source = host.open(tmp_path / "ws", session_id="src")
        source.run("one")
        fork = source.fork(workspace=tmp_path / "other")
        assert host.session(fork.id).workspace == str((tmp_path / "other").resolve())
        assert (tmp_path / "other").is_dir()
        with pytest.raises(HostError, match="there is no session 'nope'"):
            host.agent_host.fork("nope")
        with pytest.raises(HostError, match="session id"):
            source.fork(session_id="a/b")

    class Elsewhere:
        def ask(self, message: Any, timeout: float | None = None) -> Any:
            return None

        def shutdown(self, timeout: float = 30.0) -> None:
            pass

    elsewhere = Session(Elsewhere(), "x", Elsewhere())  # type: ignore[arg-type]
    with pytest.raises(HostError, match="AgentHost"):
        elsewhere.fork()


@pytest.mark.trio
async def test_the_trio_facade_forks_and_rewinds(tmp_path: Path) -> None:
    with FakeProvider(Script.echo()) as provider:
        async with open_host(settings_for(provider, tmp_path), credentials=KEY) as host:
            session = await host.open(tmp_path / "ws", session_id="t1")
            for n in range(2):
                _ = [event async for event in session.prompt(f"n{n}")]
            fork = await session.fork(1)
            events = [event async for event in fork.prompt("forked")]
            rewound = await session.rewind(0, session_id="t0")
            first = [event async for event in rewound.prompt("from scratch")]
            listed = {record.id: record.status for record in await host.sessions()}
    assert events[-1].turn == 2
    assert first[-1].turn == 1
    assert listed["t1"] == "archived" and listed["t0"] == "idle"
