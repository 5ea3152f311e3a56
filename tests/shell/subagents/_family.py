"""A host whose sessions hand tasks to children, against the embedded provider: the scripted parent fans out
to children, each child doing what its prompt says."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sampler.fake import Conversation, FakeProvider, FinalAnswer, Script, Step, ToolStep
from shell import AgentHost, load_settings
from shell import events as ev
from shell.config import Settings
from shell.session import SessionChaos

CONFIG = """
[agents.quick]
description = "answers at once"
deadline = 60

[agents.flaky]
description = "its sampler crashes"
deadline = 60

[agents.sleepy]
description = "runs past a short deadline"
deadline = 1.5
"""


@dataclass
class Requests:
    """The script, and the first user text of every request it answered (one per model step)."""

    texts: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def script(self) -> Script:
        return Script(self._respond, name="family")

    def count(self, text: str) -> int:
        with self.lock:
            return self.texts.count(text)

    def _respond(self, conversation: Conversation) -> Step:
        first = conversation.user_texts[0] if conversation.user_texts else ""
        with self.lock:
            self.texts.append(first)
        if first.startswith("fan "):
            # "fan PROFILE:TASK PROFILE:TASK …": one agent call per item, then the results joined.
            # A task's "+" are spaces: "quick:fan+quick:x" is a child told to fan out in its turn.
            if conversation.tool_rounds == 0:
                calls = []
                for item in first.split()[1:]:
                    profile, _, task = item.partition(":")
                    task = task.replace("+", " ")  # a child told to fan out: "quick:fan+quick:x"
                    calls.append(("agent", {"description": task, "prompt": task, "agent": profile}))
                return ToolStep(calls)
            return FinalAnswer("results: " + " | ".join(conversation.tool_results))
        if first.startswith("sleep"):  # "sleepN": a command that takes N seconds
            if conversation.tool_rounds == 0:
                return ToolStep(
                    [("shell", {"command": f"echo started-{first}; sleep {first[5:]}"})], text="working"
                )
            return FinalAnswer(f"{first} woke")
        return FinalAnswer(f"{first} done", chunks=3)


def settings(provider: FakeProvider, tmp_path: Path, config: str = CONFIG, **env: str) -> Settings:
    path = tmp_path / "turnkeep.toml"
    path.write_text(config)
    return load_settings(
        path,
        environ={
            "TURNKEEP_STORE__PATH": str(tmp_path / "store.db"),
            "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
            "TURNKEEP_TOOLS__ALLOW": "shell",
            **env,
        },
    )


@contextmanager
def family_host(
    tmp_path: Path, requests: Requests, *, chaos: SessionChaos | None = None, **env: str
) -> Iterator[tuple[AgentHost, FakeProvider]]:
    with (
        FakeProvider(requests.script) as provider,
        AgentHost(settings(provider, tmp_path, **env), chaos=chaos) as host,
    ):
        yield host, provider


def run_turn(host: AgentHost, tmp_path: Path, prompt: str, session_id: str = "p") -> tuple[Any, list[Any]]:
    """Open ``session_id``, run one turn of ``prompt``; its end and every event it published (no deltas)."""
    events: queue.Queue[Any] = queue.Queue()
    address = host.open(tmp_path / "w", session_id=session_id)
    host.subscribe(session_id, events)
    from shell.messages import UserPrompt

    address.ask(UserPrompt(prompt))
    return until_end(events)


def until_end(events: queue.Queue[Any], timeout: float = 60.0) -> tuple[Any, list[Any]]:
    seen: list[Any] = []
    while True:
        event = events.get(timeout=timeout)
        if isinstance(event, ev.TextDelta):
            continue
        seen.append(event)
        if isinstance(event, ev.TERMINAL_EVENTS):
            return event, seen


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def results(end: ev.TurnCompleted) -> list[str]:
    return end.text.removeprefix("results: ").split(" | ")


def arguments(event: ev.ToolCallStarted) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(event.arguments)
    return decoded
