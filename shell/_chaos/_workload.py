"""The chaos run's workload: the seeded plan of sessions, turns, cancels and tool calls, and the
settings and tools it runs with."""

from __future__ import annotations

import base64
import os
import random
from dataclasses import dataclass
from pathlib import Path

from sampler import ImagePart
from sampler.fake import (
    FinalAnswer,
    Script,
    ToolStep,
)
from tool_bridge import ToolRegistry
from tool_bridge.builtins import EDIT_FILE, LIST_DIR, READ_FILE, WRITE_FILE, shell_tool

from ..config import Settings, load_settings

_NOTE = "# Notes\n" + "".join(f"- item {n}: checked the module and kept the result\n" for n in range(12))
_SCRIPTS: dict[str, Script] = {
    "answer": Script.task([FinalAnswer("The answer, streamed in many small pieces. " * 3, chunks=30)]),
    "files": Script.task(
        [
            ToolStep([("write_file", {"path": "notes.md", "content": _NOTE})], text="Writing the notes."),
            ToolStep([("read_file", {"path": "notes.md"}), ("list_dir", {"path": "."})]),
            FinalAnswer("The notes are written and read back."),
        ]
    ),
    "shell": Script.task(
        [
            ToolStep([("shell", {"command": "echo begin; sleep 0.3; echo end"})]),
            ToolStep([("edit_file", {"path": "notes.md", "old": "item 1:", "new": "item one:"})]),
            FinalAnswer("The command ran and the notes are updated."),
        ]
    ),
    "look": Script.task([FinalAnswer("Two pictures, both of a build log.")]),
    "fanout": Script.task(
        [
            ToolStep(
                [
                    ("agent", {"description": "notes", "prompt": "Write the notes. [[script:files]]"}),
                    ("agent", {"description": "answer", "prompt": "Answer at length. [[script:answer]]"}),
                    ("agent", {"description": "command", "prompt": "Run the command. [[script:shell]]"}),
                ],
                text="Handing the parts to subagents.",
            ),
            FinalAnswer("The subagents have answered."),
        ]
    ),
}
"""The model's behaviours; a prompt picks one with a ``[[script:NAME]]`` directive."""

_MODEL_CALLS = 3
"""The most model calls any script needs for one turn (tool rounds and the final answer)."""
_TOOL_ROUNDS = 2
"""The most tool rounds any script makes in one turn."""
_SHELL_TIMEOUT = 3.0
_IMAGE_BYTES = 15_000
_MAX_BODY_BYTES = 36_000
"""Two images of a prompt that shows some (20 KB of base64 each) make a request too large, so it is sent
again without them; a text prompt of ``_OVERSIZED_CHARS`` is too large whatever is done."""
_OVERSIZED_CHARS = 48_000
_PROVIDER_WINDOW = 2_400
"""The provider's real window, in tokens: a few turns overflow it, so sessions compact and learn it."""
_ESTIMATED_WINDOW = 4_000
"""The window the sessions are told of, larger than the real one, so that overflows do happen."""
_REQUESTS_PER_TOKEN = 10
"""Model calls an access token serves, per turn that may run at once (the sessions share one credential,
so a token lasts a couple of seconds however many sessions run; longer than the auth back-off)."""
_PROMPT_TRIES = 6
_PROMPT_BACKOFF = 0.25
"""A refused prompt is sent again after 0.25 s, then 0.5 s, 1 s…: 7.75 s in all, longer than a subtree
takes to come back from an escalation."""
_ASK_TRIES = 3
_SHUTDOWN_TIMEOUT = 30.0
_THREAD_GRACE = 12.0
"""How long threads that are ending may take after shutdown (trio retires an idle worker thread after
10 s; the IoLoop's worker threads are such threads)."""
_WORDS = ["build", "module", "compiled", "linked", "tested", "cached", "warning", "package", "step", "report"]
_MARK = "TURNKEEP_CHAOS_MARK"
"""The environment variable every tool process of a run inherits, so that an orphan is still found."""


@dataclass(frozen=True, slots=True)
class _CancelPlan:
    after_events: int | None = None
    after_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class _TurnPlan:
    index: int
    text: str
    script: str
    images: tuple[ImagePart, ...] = ()
    cancel: _CancelPlan | None = None
    oversized: bool = False


@dataclass(frozen=True, slots=True)
class _SessionPlan:
    label: str
    session_id: str
    turns: tuple[_TurnPlan, ...]


def _plan(
    seed: int, sessions: int, turns: int, cancel_rate: float, mcp: bool = False, subagents: bool = False
) -> list[_SessionPlan]:
    rng = random.Random(f"turnkeep-chaos/{seed}")
    # Their own generators, so that a run without MCP or subagents draws exactly what it drew before.
    mcp_rng = random.Random(f"turnkeep-chaos-mcp/{seed}")
    family_rng = random.Random(f"turnkeep-chaos-subagents/{seed}")
    plans = []
    for s in range(sessions):
        oversized_turn = turns - 1 if turns > 1 and rng.random() < 0.1 else None
        turn_plans = []
        for t in range(turns):
            script = rng.choice(("answer", "files", "files", "shell", "look"))
            padding = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(0, 400)))
            oversized = t == oversized_turn
            if oversized:
                padding = " ".join(rng.choice(_WORDS) for _ in range(_OVERSIZED_CHARS // 6))
            text = f"Session {s + 1}, request {t + 1}: please go on. {padding} [[script:{script}]]"
            images: tuple[ImagePart, ...] = ()
            if script == "look":
                images = tuple(
                    ImagePart("image/png", base64.b64encode(rng.randbytes(_IMAGE_BYTES)).decode())
                    for _ in range(2)
                )
            cancel = None
            if rng.random() < cancel_rate:
                if rng.random() < 0.5:
                    cancel = _CancelPlan(after_events=rng.randint(1, 8))
                else:
                    cancel = _CancelPlan(after_seconds=rng.uniform(0.0, 0.8))
            if mcp and mcp_rng.random() < 0.5:
                # Drawn last, so that every other draw is the one a run without MCP makes.
                text, images = text.replace(f"[[script:{script}]]", "[[script:mcp]]"), ()
                script = "mcp"
            elif subagents and family_rng.random() < 0.4:
                text, images = text.replace(f"[[script:{script}]]", "[[script:fanout]]"), ()
                script = "fanout"
            turn_plans.append(_TurnPlan(t, text, script, images, cancel, oversized))
        plans.append(_SessionPlan(f"session {s + 1}", f"chaos-{seed}-{s + 1:03d}", tuple(turn_plans)))
    return plans


def _registry(mark: str) -> ToolRegistry:
    shell = shell_tool(
        default_timeout=_SHELL_TIMEOUT, max_timeout=_SHELL_TIMEOUT, env={**os.environ, _MARK: mark}
    )
    return ToolRegistry([shell, READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIR])


def _settings(base_url: str, store: Path, concurrent_turns: int) -> Settings:
    return load_settings(
        environ={
            "TURNKEEP_PROVIDER__BASE_URL": base_url,
            "TURNKEEP_PROVIDER__MODEL": "fake-model",
            "TURNKEEP_STORE__PATH": str(store),
            "TURNKEEP_RETRY__MAX_ATTEMPTS": "5",
            "TURNKEEP_RETRY__BASE_DELAY": "0.01",
            "TURNKEEP_RETRY__MAX_DELAY": "0.2",
            "TURNKEEP_RETRY__MAX_RETRY_AFTER": "1",
            "TURNKEEP_TIMEOUTS__CONNECT": "2",
            "TURNKEEP_TIMEOUTS__IDLE": "0.5",
            "TURNKEEP_TOOLS__ALLOW": "shell,write_file,edit_file,read_file,list_dir",
            "TURNKEEP_TOOLS__SHELL_TIMEOUT": str(_SHELL_TIMEOUT),
            "TURNKEEP_TOOLS__SHELL_MAX_TIMEOUT": str(_SHELL_TIMEOUT),
            "TURNKEEP_TOOLS__ABORT_GRACE": "0.5",
            "TURNKEEP_TOOLS__KILL_AFTER": "2",
            "TURNKEEP_WINDOW__CONTEXT_WINDOW": str(_ESTIMATED_WINDOW),
            "TURNKEEP_WINDOW__MAX_OUTPUT_TOKENS": "400",
            "TURNKEEP_COMPACTION__KEEP_RECENT_TURNS": "1",
            "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": str(concurrent_turns),
        }
    )
