"""The façades: one Host, Session and their trio faces over any HostBackend; a session is closed, its
history read and a bad session id refused from every one of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from sampler import UserMessage
from sampler.fake import FakeProvider, Script
from shell import events as ev
from shell.cluster import HostPool
from shell.facade import AsyncHost, Host, HostBackend, Mailbox, open_host
from shell.host import AgentHost, HostError
from shell.store import SessionNotFound, open_store
from tests.shell._settings import settings_for
from tests.shell.test_host import KEY


def test_the_local_host_and_the_pool_are_the_same_kind_of_backend(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        assert isinstance(host.backend, HostBackend)
        assert isinstance(host.open(tmp_path / "ws").address, Mailbox)
    for method in ("open", "resume", "list_sessions", "history", "close", "shutdown"):
        assert callable(getattr(HostPool, method)), method


def test_a_session_closed_from_the_facade_is_closed_in_the_store_and_refuses_a_resume(tmp_path: Path) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path)
        with Host(settings, credentials=KEY) as host:
            session = host.open(tmp_path / "ws", session_id="s1")
            session.run("one")
            session.close()
            assert "s1" not in host.agent_host.active()
            closed = open_store(settings.store.path).get_session("s1").status
            with pytest.raises(HostError, match="'s1' is closed"):
                host.resume("s1")
            history = [stored.message for stored in open_store(settings.store.path).load_messages("s1")]
    assert closed == "closed"
    assert [m.parts[0].text for m in history if isinstance(m, UserMessage)] == ["one"]


def test_a_stored_session_is_shown_by_the_facade_and_an_unknown_one_refused(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        session = host.open(tmp_path / "ws", session_id="shown")
        session.run("one")
        record = host.session("shown")
        with pytest.raises(SessionNotFound):
            host.session("unknown")
        usage = host.agent_host.turn_usage("shown")
        assert host.agent_host.last_event_seq("shown") > 0
    assert (record.id, record.current_turn) == ("shown", 1)
    assert [u.turn for u in usage] == [1]


def test_history_comes_from_the_host_for_an_open_session_and_is_refused_for_another(tmp_path: Path) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        session = host.open(tmp_path / "ws")
        session.run("remember me")
        assert host.agent_host.passivate(session.id)
        history = host.agent_host.history(session.id)
        with pytest.raises(HostError, match="not open"):
            host.agent_host.history("elsewhere")
    assert [m.parts[0].text for m in history if isinstance(m, UserMessage)] == ["remember me"]


@pytest.mark.parametrize("bad", ["a/b", " x", "x/"])
def test_a_session_id_that_cannot_name_an_actor_is_refused_as_a_host_error(tmp_path: Path, bad: str) -> None:
    with (
        FakeProvider(Script.echo()) as provider,
        Host(settings_for(provider, tmp_path), credentials=KEY) as host,
    ):
        with pytest.raises(HostError, match="session id"):
            host.agent_host.open(tmp_path / "ws", session_id=bad)
        with pytest.raises(HostError, match="session id"):
            host.resume(bad)


def test_a_host_over_a_backend_takes_no_configuration_and_knows_what_it_runs_on(tmp_path: Path) -> None:
    with FakeProvider(Script.echo()) as provider:
        settings = settings_for(provider, tmp_path)
        with Host(backend=AgentHost(settings, credentials=KEY)) as host:
            assert host.open(tmp_path / "ws").run("hi").text == "echo: hi"
        with pytest.raises(TypeError, match="no configuration"):
            Host(settings, backend=host.backend)

    class Elsewhere:
        def shutdown(self, timeout: float = 30.0) -> None:
            pass

    with pytest.raises(HostError, match="Elsewhere"):
        _ = Host(backend=Elsewhere()).agent_host  # type: ignore[arg-type]


@pytest.mark.trio
async def test_the_trio_facade_streams_reads_the_history_lists_and_closes(tmp_path: Path) -> None:
    with FakeProvider(Script.text("from trio")) as provider:
        async with open_host(settings_for(provider, tmp_path), credentials=KEY) as host:
            assert isinstance(host, AsyncHost)
            session = await host.open(tmp_path / "ws", session_id="t1")
            events = [event async for event in session.prompt("hi")]
            history = await session.history()
            assert not await session.cancel()
            await session.close()
            listed = await host.sessions()
    assert isinstance(events[-1], ev.TurnCompleted) and events[-1].text == "from trio"
    assert [m.parts[0].text for m in history if isinstance(m, UserMessage)] == ["hi"]
    assert [(record.id, record.status) for record in listed] == [("t1", "closed")]
    await trio.lowlevel.checkpoint()
