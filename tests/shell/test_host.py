"""The host: many sessions in one process, passivation, a turn limit, shutdown with turns in flight,
resuming, describing, and a subtree that gives up."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from actors import ChaosPolicy
from sampler import AssistantMessage, ToolMessage, UserMessage
from sampler.fake import FakeProvider, Fault, FaultPlan, FinalAnswer, Script, ToolStep
from shell import events as ev
from shell._protocol import Calibrate, Passivate
from shell.credentials import StaticKey
from shell.facade import Host
from shell.host import AgentHost, HostError
from shell.messages import Subscribe, UserPrompt
from shell.session import SessionChaos
from tests._waiting import wait_until
from tests.actors.conftest import system_threads
from tests.shell._settings import settings_for
from tool_bridge import READ_FILE, ToolRegistry, builtin_registry

KEY = StaticKey(env_var="K", environ={"K": "sk-host-test-1234"})


def test_a_blocking_session_streams_a_turn_and_remembers_it(tmp_path: Path) -> None:
    before = system_threads()
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        session = host.open(tmp_path / "ws")
        events = list(session.prompt("hello host"))
        second = session.run("and again")
        history = session.history()
    assert isinstance(events[0], ev.TurnStarted)
    assert isinstance(events[-1], ev.TurnCompleted)
    assert any(isinstance(e, ev.TextDelta) for e in events)
    assert isinstance(second, ev.TurnCompleted) and second.turn == 2
    assert [m.parts[0].text for m in history if isinstance(m, UserMessage)] == ["hello host", "and again"]
    assert system_threads() - before == set()


@pytest.mark.parametrize("group_commit", [True, False])
def test_the_store_groups_its_writes_as_the_settings_say(tmp_path: Path, group_commit: bool) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_STORE__GROUP_COMMIT=str(group_commit).lower())
        with Host(settings, credentials=KEY) as host:
            assert host.agent_host.store.group_commit is group_commit
            assert isinstance(host.open(tmp_path / "ws").run("hello"), ev.TurnCompleted)


def test_an_opened_session_makes_its_parts_only_when_its_first_message_comes(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        AgentHost(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        address = host.open(tmp_path / "ws", session_id="lazy")
        assert not host._sessions["lazy"].built
        assert host.active() == []
        inbox: queue.Queue[Any] = queue.Queue()
        address.ask(Subscribe(inbox), timeout=10)
        assert host._sessions["lazy"].built


def test_an_idle_session_is_passivated_and_comes_back_on_the_next_message(tmp_path: Path) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_HOST__PASSIVATE_AFTER="0.2")
        with Host(settings, credentials=KEY) as host:
            session = host.open(tmp_path / "ws")
            session.run("first words")
            deadline = time.monotonic() + 10
            while host.agent_host.active() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert host.agent_host.active() == []
            threads_while_passive = {t.name for t in threading.enumerate()}
            assert not any(
                name.startswith(f"actor:host/session/{session.id}") for name in threads_while_passive
            )
            reply = session.run("second words")
            history = session.history()
    assert isinstance(reply, ev.TurnCompleted) and reply.turn == 2
    assert [m.parts[0].text for m in history if isinstance(m, UserMessage)] == ["first words", "second words"]


def test_a_prompt_that_reaches_a_session_after_it_agreed_to_passivate_runs_in_its_next_incarnation(
    tmp_path: Path,
) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        session = host.open(tmp_path / "ws")
        session.run("first words")
        agent_host = host.agent_host
        question = Passivate(idle_for=-1.0, deadline=time.monotonic() + 10)
        assert agent_host._address(session.id).ask(question, timeout=10) is True
        replies: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=lambda: replies.put(session.run("second words")), daemon=True).start()
        assert wait_until(lambda: bool(agent_host._sessions[session.id].runtime.prompts), 10)
        assert agent_host.passivate(session.id)
        reply = replies.get(timeout=30)
        history = session.history()
    assert isinstance(reply, ev.TurnCompleted) and reply.turn == 2
    assert [m.parts[0].text for m in history if isinstance(m, UserMessage)] == ["first words", "second words"]


def test_sessions_offered_the_same_tools_share_one_copy_of_their_definitions(tmp_path: Path) -> None:
    registries = iter([builtin_registry(), builtin_registry(), ToolRegistry([READ_FILE])])
    with (
        FakeProvider(Script.echo()) as provider,
        AgentHost(
            settings_for(provider, tmp_path), credentials=KEY, registry=lambda: next(registries)
        ) as host,
    ):
        for name in ("a", "b", "c"):
            host.open(tmp_path / name, session_id=name)
        first, second, other = (host._sessions[name].runtime.tool_specs for name in ("a", "b", "c"))
    assert first is second
    # The host adds the ``agent`` tool to a session's own ([agents] enabled, depth 0 below max_depth 1).
    assert [spec.name for spec in first] == [*builtin_registry().names(), "agent"]
    assert [spec.name for spec in other] == ["read_file", "agent"]


def test_turns_beyond_the_limit_wait_in_order_and_do_not_fail(tmp_path: Path) -> None:
    faults = FaultPlan.scripted([Fault.stall(seconds=0.3, after_chunks=2)] * 2)
    with FakeProvider(Script.echo(), faults=faults) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_HOST__MAX_CONCURRENT_TURNS="1")
        with Host(settings, credentials=KEY) as host:
            sessions = [host.open(tmp_path / f"ws{n}") for n in range(3)]
            outcomes: list[Any] = []
            workers = [threading.Thread(target=lambda s=s: outcomes.append(s.run("go"))) for s in sessions]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(30)
            peak = host.agent_host.gate.running
    assert [type(o) for o in outcomes] == [ev.TurnCompleted] * 3
    # One at a time: as persisted, every turn started after the previous one ended.
    from shell.store import SessionStore

    with SessionStore.open(tmp_path / "store.db") as store:
        marks = sorted(
            (e.created_at, e.type)
            for s in sessions
            for e in store.load_events(s.id)
            if e.type in ("TurnStarted", "TurnCompleted")
        )
    assert [kind for _, kind in marks] == ["TurnStarted", "TurnCompleted"] * 3
    assert peak == 0


def test_shutdown_with_turns_in_flight_ends_them_as_aborted_and_keeps_them(tmp_path: Path) -> None:
    faults = FaultPlan.scripted([Fault.stall(after_chunks=3, hang=True)] * 2)
    before = system_threads()
    with FakeProvider(Script.text("a long answer that hangs"), faults=faults) as provider:
        settings = settings_for(provider, tmp_path)
        host = AgentHost(settings, credentials=KEY)
        addresses = [host.open(tmp_path / f"ws{n}", session_id=f"s{n}") for n in range(2)]
        inboxes = []
        import queue

        from shell.messages import Subscribe, UserPrompt

        for address in addresses:
            inbox: queue.Queue[Any] = queue.Queue()
            address.ask(Subscribe(inbox))
            address.ask(UserPrompt("talk"))
            inboxes.append(inbox)
        for inbox in inboxes:
            while not isinstance(inbox.get(timeout=10), ev.TextDelta):
                pass
        host.shutdown()
        ends = []
        for inbox in inboxes:
            event = inbox.get(timeout=10)
            while not isinstance(event, ev.TERMINAL_EVENTS):
                event = inbox.get(timeout=10)
            ends.append(event)
    assert [e.reason for e in ends] == ["aborted", "aborted"]
    from shell.store import SessionStore

    with SessionStore.open(tmp_path / "store.db") as store:
        for n in range(2):
            assert [e.type for e in store.load_events(f"s{n}")][-1] == "TurnCancelled"
            assert store.get_session(f"s{n}").status == "idle"
    assert system_threads() - before == set()
    with pytest.raises(HostError):
        host.open(tmp_path / "late")


def test_resume_continues_a_stored_session_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path)
        with Host(settings, credentials=KEY) as host:
            first = host.open(tmp_path / "ws", session_id="keep")
            first.run("one")
        with Host(settings, credentials=KEY) as host:
            again = host.resume("keep")
            reply = again.run("two")
            with pytest.raises(HostError, match="no session 'nope'"):
                host.resume("nope")
            listed = [record.id for record in host.sessions()]
    assert reply.turn == 2
    assert listed == ["keep"]


def test_describe_gives_an_account_of_a_session_between_turns_and_of_one_not_open(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        session = host.open(tmp_path / "ws")
        session.run("hello")
        between = host.agent_host.describe(session.id)
        missing = host.agent_host.describe("no-such-session")
    assert between == "active; no turn; 0 prompts waiting; sampler running [], queued []"
    assert missing == "session 'no-such-session' is not open in this host"


def test_a_session_subtree_that_gives_up_mid_turn_is_restarted_and_its_turn_fails_with_a_paired_history(
    tmp_path: Path,
) -> None:
    script = Script.task([ToolStep([("shell", {"command": "sleep 2; echo slept"})]), FinalAnswer("done")])
    chaos = SessionChaos(chat_state=ChaosPolicy(crash_probability=1.0, crash_on=(Calibrate,)))
    with FakeProvider(script) as provider:
        settings = settings_for(provider, tmp_path, TURNKEEP_TOOLS__ALLOW="shell")
        with AgentHost(settings, credentials=KEY, chaos=chaos) as host:
            address = host.open(tmp_path / "ws", session_id="s1")
            inbox: queue.Queue[Any] = queue.Queue()
            address.ask(Subscribe(inbox))
            address.ask(UserPrompt("sleep a while"))
            queued = address.ask(UserPrompt("and then answer"))
            while not isinstance(inbox.get(timeout=10), ev.ToolCallStarted):
                pass
            chat_state = host.system.address("host/session/s1/chat_state")
            for _ in range(50):  # each crashes it 4 times: far beyond the subtree's restart intensity
                chat_state.tell(Calibrate(1, 1))
            ends = []
            while len(ends) < 2:
                event = inbox.get(timeout=30)
                if isinstance(event, ev.TERMINAL_EVENTS):
                    ends.append(event)
            stored = host.store.load_messages("s1")
    failed, answered = ends
    assert isinstance(failed, ev.TurnFailed) and failed.kind == "internal", failed
    assert "restarted" in failed.message
    assert answered.turn == queued == 2
    calls = [c.id for m in stored if isinstance(m.message, AssistantMessage) for c in m.message.tool_calls]
    results = [m.message.result.call_id for m in stored if isinstance(m.message, ToolMessage)]
    assert calls and sorted(calls) == sorted(results)
