"""An independent client: the protocol's TypeScript SDK (``@agentclientprotocol/sdk``, driven by
``node/client.mjs``) runs a session through ``turnkeep acp``. It needs node and the package installed
(``npm install --prefix tests/shell/acp/node``, as ``.ci/run`` does); without them it is skipped,
unless ``REQUIRE_NODE_TESTS=1``, which makes that a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from tests.shell.acp._agent_process import REPO, agent_command, environment

NODE_DIR = Path(__file__).with_name("node")
WRITE = Script.task([ToolStep([("write_file", {"path": "a.txt", "content": "hi"})]), FinalAnswer("Done.")])


def _node() -> str:
    node = shutil.which("node")
    installed = (NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir()
    if node is None or not installed:
        missing = "node" if node is None else "the @agentclientprotocol/sdk package (npm install)"
        if os.environ.get("REQUIRE_NODE_TESTS") == "1":
            pytest.fail(f"REQUIRE_NODE_TESTS=1 but {missing} is missing")
        pytest.skip(f"{missing} is missing")
    return node


def test_the_typescript_sdk_runs_a_session_through_turnkeep_acp(tmp_path: Path) -> None:
    node = _node()
    with FakeProvider(WRITE) as provider:
        command = agent_command(provider, tmp_path / "s.db")
        result = subprocess.run(
            [node, str(NODE_DIR / "client.mjs"), str(tmp_path / "ws"), *command],
            cwd=REPO,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["protocolVersion"] == 1
    assert found["loadSession"] is True
    assert found["stopReason"] == "end_turn"
    assert found["asked"] == 1
    assert found["live"].index("tool_call") < found["live"].index("agent_message_chunk")
    assert found["listed"] == [found["sessionId"]]
    assert found["unknown"] == -32601
    assert found["replayed"][0] == "user_message_chunk"
    assert found["exitCode"] == 0
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"
