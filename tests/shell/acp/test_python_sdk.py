"""An independent client: the protocol's Python SDK (``agent-client-protocol``) drives ``turnkeep acp``
through a whole session: initialize, new, a prompt with a tool call it allows, list, cancel, load."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from tests.shell.acp._agent_process import DEADLINE, REPO, agent_command, environment

acp = pytest.importorskip("acp")
schema = pytest.importorskip("acp.schema")

WRITE = Script.task([ToolStep([("write_file", {"path": "a.txt", "content": "hi"})]), FinalAnswer("Done.")])


class Editor:
    """The SDK's client side: allows every tool call once and keeps every update it is sent."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[str] = []

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.asked.append(tool_call.tool_call_id)
        allow = next(option for option in options if option.kind == "allow_once")
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    def kinds(self) -> list[str]:
        return [update.session_update for _, update in self.updates]


async def _drive(provider: FakeProvider, tmp_path: Path) -> dict[str, Any]:
    editor = Editor()
    program, *args = agent_command(provider, tmp_path / "s.db")
    found: dict[str, Any] = {}
    with_deadline = asyncio.timeout(DEADLINE * 2)
    async with (
        with_deadline,
        acp.spawn_agent_process(editor, program, *args, env=environment(), cwd=str(REPO)) as (
            connection,
            _process,
        ),
    ):
        hello = await connection.initialize(protocol_version=1)
        found["load"] = hello.agent_capabilities.load_session
        session = await connection.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])
        answer = await connection.prompt(session_id=session.session_id, prompt=[acp.text_block("write")])
        found["stop"] = answer.stop_reason
        found["asked"] = list(editor.asked)
        found["kinds"] = editor.kinds()
        listed = await connection.list_sessions()
        found["listed"] = [info.session_id for info in listed.sessions]
        editor.updates.clear()
        await connection.load_session(cwd=str(tmp_path / "ws"), session_id=session.session_id, mcp_servers=[])
        found["replayed"] = editor.kinds()
        found["session"] = session.session_id
    return found


def test_the_python_sdk_runs_a_session_through_turnkeep_acp(tmp_path: Path) -> None:
    with FakeProvider(WRITE) as provider:
        found = asyncio.run(_drive(provider, tmp_path))
    assert found["load"] is True
    assert found["stop"] == "end_turn"
    assert len(found["asked"]) == 1
    assert found["kinds"].index("tool_call") < found["kinds"].index("agent_message_chunk")
    assert found["listed"] == [found["session"]]
    assert found["replayed"][0] == "user_message_chunk"
    assert "tool_call" in found["replayed"]
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"
