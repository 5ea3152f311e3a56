"""The agent on its trio loop with a scripted host: what it writes, in which order, whatever order the
session's events and acknowledgements reach it in. No process, no provider: the host is a stand-in whose
session publishes exactly the events a test gives it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio

from shell import events as ev
from shell.acp import AcpAgent, AcpSettings
from shell.config import Settings
from shell.messages import Cancel, UserPrompt
from tool_bridge import PermissionDecision, PermissionRequested

DEADLINE = 10.0


class FakeAddress:
    """A session's mailbox: prompts get the next turn number; everything told is kept."""

    def __init__(self) -> None:
        self.subscribers: list[Any] = []
        self.told: list[Any] = []
        self.turn = 0

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        assert isinstance(message, UserPrompt)
        self.turn += 1
        return self.turn

    def tell(self, message: Any) -> None:
        self.told.append(message)

    def publish(self, event: Any) -> None:
        for subscriber in self.subscribers:
            subscriber(event)


class FakeHost:
    """The part of :class:`AgentHost` the agent uses, for one session."""

    def __init__(self) -> None:
        self.settings = Settings()
        self.address = FakeAddress()
        self.opened: list[str] = []

    def open(
        self, workspace: Any, *, session_id: str | None = None, mcp_servers: Any = None, subscribers: Any = ()
    ) -> FakeAddress:
        assert session_id is not None and not mcp_servers
        self.opened.append(session_id)
        self.address.subscribers.extend(subscribers)
        return self.address


class Client:
    """The agent's output, line by line, and its input."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[bytes](math.inf)
        self.lines_in, self.lines_out = trio.open_memory_channel[Any](math.inf)

    async def write(self, line: bytes) -> bool:
        await self.send.send(line)
        return True

    async def next(self) -> dict[str, Any]:
        with trio.fail_after(DEADLINE):
            message: dict[str, Any] = json.loads(await self.receive.receive())
        return message

    def line(self, **message: Any) -> None:
        self.lines_in.send_nowait(json.dumps({"jsonrpc": "2.0", **message}).encode())


async def start(nursery: trio.Nursery, **settings: Any) -> tuple[AcpAgent, FakeHost, Client, str]:
    host = FakeHost()
    client = Client()
    agent = AcpAgent(host, AcpSettings(**settings), client.write)  # type: ignore[arg-type]
    nursery.start_soon(agent.run, client.lines_out)
    client.line(id=1, method="session/new", params={"cwd": "/tmp/ws", "mcpServers": []})
    answer = await client.next()
    return agent, host, client, answer["result"]["sessionId"]


def prompt(client: Client, request_id: int, session: str) -> None:
    client.line(
        id=request_id,
        method="session/prompt",
        params={"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]},
    )


async def told(host: FakeHost, kind: type) -> Any:
    """The first message of ``kind`` told to the session, once it is."""
    with trio.fail_after(DEADLINE):
        while True:
            found = [m for m in host.address.told if isinstance(m, kind)]
            if found:
                return found[0]
            await trio.lowlevel.checkpoint()


@pytest.mark.trio
async def test_updates_are_written_before_the_answer_of_their_turn() -> None:
    async with trio.open_nursery() as nursery:
        agent, host, client, session = await start(nursery)
        prompt(client, 2, session)
        with trio.fail_after(DEADLINE):
            while host.address.turn < 1:
                await trio.lowlevel.checkpoint()
        host.address.publish(ev.TurnStarted(session, 1, "hi"))
        host.address.publish(ev.TextDelta(session, 1, "hello"))
        host.address.publish(ev.TurnCompleted(session, 1, "hello", 1))
        kinds = []
        while True:
            line = await client.next()
            if "id" in line:
                break
            kinds.append(line["params"]["update"]["sessionUpdate"])
        assert kinds == ["session_info_update", "agent_message_chunk", "usage_update"]
        assert line == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}
        agent.stop()


@pytest.mark.trio
async def test_stopping_cancels_the_turn_aborted_and_answers_the_owed_prompt_cancelled() -> None:
    async with trio.open_nursery() as nursery:
        _agent, host, client, session = await start(nursery, abort_grace=0.0)
        prompt(client, 2, session)
        with trio.fail_after(DEADLINE):
            while host.address.turn < 1:
                await trio.lowlevel.checkpoint()
        client.lines_in.send_nowait(None)  # the input ends
        cancel = await told(host, Cancel)
        assert cancel.reason == "aborted"
        host.address.publish(ev.TurnCancelled(session, 1, "aborted"))
        lines = [await client.next(), await client.next()]
    assert lines[-1] == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}


@pytest.mark.trio
async def test_a_permission_request_unanswered_when_the_input_ends_is_a_denial() -> None:
    async with trio.open_nursery() as nursery:
        _agent, host, client, _session = await start(nursery)
        host.address.publish(PermissionRequested("c1", "shell", '{"command": "ls"}', "ask"))
        announced = await client.next()
        asked = await client.next()
        assert announced["params"]["update"]["sessionUpdate"] == "tool_call"
        assert asked["method"] == "session/request_permission"
        client.lines_in.send_nowait(None)
        decision = await told(host, PermissionDecision)
    assert decision.decision == "deny" and decision.call_id == "c1"


@pytest.mark.trio
async def test_an_answer_to_the_permission_request_is_told_to_the_session() -> None:
    async with trio.open_nursery() as nursery:
        agent, host, client, _session = await start(nursery)
        host.address.publish(PermissionRequested("c1", "shell", '{"command": "ls"}', "ask"))
        await client.next()
        asked = await client.next()
        outcome = {"outcome": "selected", "optionId": "allow_always"}
        client.line(id=asked["id"], result={"outcome": outcome})
        decision = await told(host, PermissionDecision)
        agent.stop()
    assert decision.decision == "allow_always"
