"""``turnkeep acp`` run as a real process, and a client that checks every line it writes.

Every line the agent writes on stdout is parsed as JSON and validated against the protocol's v1 schema
(``data/acp-v1-schema.json``, Apache-2.0); a line that is not is a test failure at once. Every wait has
a deadline.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from sampler.fake import FakeProvider, FaultPlan, Script

REPO = Path(__file__).resolve().parents[3]
SCHEMA = Path(__file__).with_name("data") / "acp-v1-schema.json"
KEY_VAR = "TK_ACP_TEST_KEY"
DEADLINE = 20.0


@cache
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def check_line(raw: bytes) -> dict[str, Any]:
    """The line as JSON, validated as a message of the protocol (an agent's request, answer or
    notification); AssertionError otherwise."""
    assert raw.endswith(b"\n"), f"a line without its newline: {raw[:200]!r}"
    message: dict[str, Any] = json.loads(raw)
    errors = list(validator().iter_errors(message))
    assert not errors, f"not a valid ACP v1 message: {raw[:500]!r}: {errors[0].message[:500]}"
    return message


def environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("TURNKEEP_")}
    env[KEY_VAR] = "sk-acp-test-0000"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def agent_command(provider: FakeProvider, store: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "shell.cli",
        "acp",
        "--base-url",
        provider.base_url,
        "--api-key-env",
        KEY_VAR,
        "--store",
        str(store),
        *extra,
    ]


class AgentProcess:
    """A running ``turnkeep acp`` and the lines it wrote, each checked against the schema."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[dict[str, Any] | BaseException | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                self.lines.put(check_line(raw))
            except BaseException as error:  # reported to the test that reads it
                self.lines.put(error)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.stderr += raw

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def request(self, method: str, params: Any = None) -> int:
        request_id = next(self._ids)
        self.send({"id": request_id, "method": method, **({} if params is None else {"params": params})})
        return request_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def next(self, deadline: float = DEADLINE) -> dict[str, Any]:
        """The next line the agent writes, within ``deadline`` seconds."""
        try:
            item = self.lines.get(timeout=deadline)
        except queue.Empty:
            raise AssertionError(f"no line within {deadline} s; stderr: {self.stderr[-2000:]!r}") from None
        if item is None:
            raise AssertionError(f"the agent closed stdout; stderr: {self.stderr[-2000:]!r}")
        if isinstance(item, BaseException):
            raise item
        self.seen.append(item)
        return item

    def until_answer(
        self, request_id: int, *, permission: str | None = "allow_once", deadline: float = DEADLINE
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The answer of ``request_id`` and every line before it; permission requests met on the way are
        answered with the option ``permission`` (None: not answered)."""
        before: list[dict[str, Any]] = []
        end = time.monotonic() + deadline
        while True:
            message = self.next(max(0.01, end - time.monotonic()))
            if message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(message)
            if message.get("method") == "session/request_permission" and permission is not None:
                outcome = {"outcome": "selected", "optionId": permission}
                self.send({"id": message["id"], "result": {"outcome": outcome}})

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """A request and its answer (lines between are kept in :attr:`seen`)."""
        answer, _ = self.until_answer(self.request(method, params))
        return answer

    def initialize(self) -> dict[str, Any]:
        answer = self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        result: dict[str, Any] = answer["result"]
        return result

    def new_session(self, cwd: Path) -> str:
        answer = self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(answer["result"]["sessionId"])

    def prompt(self, session_id: str, text: str) -> int:
        return self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def rest(self, deadline: float = DEADLINE) -> list[dict[str, Any]]:
        """Every line up to the end of stdout."""
        out: list[dict[str, Any]] = []
        end = time.monotonic() + deadline
        while True:
            try:
                item = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError("stdout did not end in time") from None
            if item is None:
                return out
            if isinstance(item, BaseException):
                raise item
            out.append(item)

    def stop(self) -> None:
        if self.process.poll() is None:
            with suppress(BrokenPipeError, OSError):
                self.close_stdin()
            try:
                self.process.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@contextmanager
def running_agent(
    script: Script, store: Path, *extra: str, faults: FaultPlan | None = None
) -> Iterator[tuple[AgentProcess, FakeProvider]]:
    """An agent against the embedded provider playing ``script``, initialized."""
    with FakeProvider(script, faults=faults or FaultPlan.none()) as provider:
        agent = AgentProcess(agent_command(provider, store, *extra))
        try:
            agent.initialize()
            yield agent, provider
        finally:
            agent.stop()


def updates(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The ``session/update`` updates of ``kind`` among ``lines``."""
    return [
        line["params"]["update"]
        for line in lines
        if line.get("method") == "session/update" and line["params"]["update"]["sessionUpdate"] == kind
    ]
