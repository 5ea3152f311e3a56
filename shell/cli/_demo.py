"""`turnkeep demo`: several sessions at once through real tools, against the embedded provider with faults.

Shows a live view (one row per session) and a final summary; exits 0 only if every turn converged and
the store holds everything that was acknowledged.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from sampler import AssistantMessage, ToolMessage, UserMessage
from sampler.fake import (
    DEFAULT_REFRESH_TOKEN,
    FakeProvider,
    FaultPlan,
    FinalAnswer,
    Script,
    TokenExpiry,
    ToolStep,
)

from .. import events as ev
from ..config import load_settings
from ..credentials import OAuthCredential
from ..facade import Host, Session
from ..store import SessionStore

__all__ = ["run"]

TASK = Script.task(
    [
        ToolStep([("write_file", {"path": "plan.md", "content": "# Plan\n1. look around\n2. report\n"})]),
        ToolStep([("shell", {"command": "ls -1 && wc -l plan.md"}), ("read_file", {"path": "plan.md"})]),
        ToolStep([("edit_file", {"path": "plan.md", "old": "2. report", "new": "2. report back"})]),
        FinalAnswer("The plan is written, checked and updated."),
    ]
)
_LOG = "\n".join(f"step {n}: compiled module_{n}.py in {n % 7 + 1} ms" for n in range(120))
PROMPTS = (
    "Write a short plan in plan.md and check it.",
    f"Here is the build log, keep it in mind:\n{_LOG}\nNow look at the workspace again and sum up.",
)

_PROMPT_PARTS = tuple(UserMessage.of_text(prompt).parts[0] for prompt in PROMPTS)


@dataclass
class _Row:
    state: str = "waiting"
    turn: int = 0
    steps: int = 0
    retries: int = 0
    auth: int = 0
    compactions: int = 0
    tools: int = 0
    tool_errors: int = 0
    outcomes: list[str] = field(default_factory=list)

    def see(self, event: Any) -> None:
        if isinstance(event, ev.TurnStarted):
            self.state, self.turn = "running", event.turn
        elif isinstance(event, ev.Retrying):
            self.retries += 1
        elif isinstance(event, ev.AuthRefreshed):
            self.auth += 1
        elif isinstance(event, ev.CompactionFinished):
            self.compactions += 1
        elif isinstance(event, ev.ToolCallStarted):
            self.state = f"tool {event.tool}"
        elif isinstance(event, ev.ToolCallFinished):
            self.tools += 1
            self.tool_errors += event.is_error
            self.state = "running"
        elif isinstance(event, ev.TurnCompleted):
            self.steps += event.steps
            self.outcomes.append("completed")
            self.state = "completed"
        elif isinstance(event, ev.TurnFailed):
            self.outcomes.append(f"failed: {event.kind}")
            self.state = f"failed ({event.kind})"
        elif isinstance(event, ev.TurnCancelled):
            self.outcomes.append(f"cancelled: {event.reason}")
            self.state = f"cancelled ({event.reason})"


def _table(rows: dict[str, _Row], title: str) -> Table:
    table = Table(title=title)
    for column in (
        "session",
        "turn",
        "steps",
        "retries absorbed",
        "auth refreshes",
        "compactions",
        "tool calls",
        "state",
    ):
        table.add_column(column)
    for name, row in rows.items():
        tools = f"{row.tools}" + (f" ({row.tool_errors} errors)" if row.tool_errors else "")
        table.add_row(
            name,
            str(row.turn),
            str(row.steps),
            str(row.retries),
            str(row.auth),
            str(row.compactions),
            tools,
            row.state,
        )
    return table


def _lost(store: SessionStore, session_id: str, turns: int) -> list[str]:
    """What the store lacks of what a session acknowledged: prompts, answers, tool results."""
    problems = []
    stored = store.load_messages(session_id, include_replaced=True)
    history = [m.message for m in stored]
    prompts = [
        m.message
        for m in stored
        if isinstance(m.message, UserMessage) and not m.is_summary and m.message.parts[0] in _PROMPT_PARTS
    ]
    if len(prompts) != turns:
        problems.append(f"{len(prompts)} prompts stored, {turns} sent")
    calls = {c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls}
    results = [m.result.call_id for m in history if isinstance(m, ToolMessage)]
    if sorted(calls) != sorted(results):
        problems.append("a tool call without exactly one result")
    terminal = [
        e for e in store.load_events(session_id) if e.type in ("TurnCompleted", "TurnFailed", "TurnCancelled")
    ]
    if len(terminal) != turns:
        problems.append(f"{len(terminal)} turn endings stored for {turns} turns")
    return problems


def run(*, sessions: int = 8, profile: str = "light", seed: int = 1) -> int:
    """Run the demo; returns the exit code."""
    console = Console() if sys.stdout.isatty() else Console(width=120)
    with tempfile.TemporaryDirectory(prefix="turnkeep-demo-") as tmp:
        root = Path(tmp)
        faults = FaultPlan.profile(profile, seed=seed)
        expiry = TokenExpiry(requests_per_token=20)
        with FakeProvider(TASK, faults=faults, token_expiry=expiry, context_window=6_000) as provider:
            settings = load_settings(
                environ={
                    "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
                    "TURNKEEP_PROVIDER__MODEL": "fake-model",
                    "TURNKEEP_STORE__PATH": str(root / "sessions.db"),
                    "TURNKEEP_RETRY__BASE_DELAY": "0.05",
                    "TURNKEEP_RETRY__MAX_DELAY": "0.5",
                    "TURNKEEP_TIMEOUTS__IDLE": "5",
                    "TURNKEEP_TOOLS__ALLOW": "shell,write_file,edit_file,read_file,list_dir",
                    "TURNKEEP_WINDOW__CONTEXT_WINDOW": "2100",
                    "TURNKEEP_WINDOW__MAX_OUTPUT_TOKENS": "500",
                    "TURNKEEP_COMPACTION__KEEP_RECENT_TURNS": "1",
                }
            )
            credential = OAuthCredential(provider.token_url, DEFAULT_REFRESH_TOKEN, access_token="demo-token")
            rows = {f"session {n + 1}": _Row() for n in range(sessions)}
            lock = threading.Lock()
            started = time.monotonic()
            console.print(
                f"[bold]turnkeep demo[/bold]: {sessions} sessions x {len(PROMPTS)} turns, "
                f"embedded provider at "
                f"{provider.base_url}, fault profile {profile!r} (seed {seed}), tokens expire every "
                f"{expiry.requests_per_token} requests"
            )
            with Host(settings, credentials=credential) as host:
                opened: list[tuple[str, Session]] = [
                    (name, host.open(root / name.replace(" ", "-"))) for name in rows
                ]

                def drive(name: str, session: Session) -> None:
                    for prompt in PROMPTS:
                        for event in session.prompt(prompt, event_timeout=120):
                            with lock:
                                rows[name].see(event)

                workers = [threading.Thread(target=drive, args=pair, daemon=True) for pair in opened]
                with Live(
                    _table(rows, "sessions"),
                    console=console,
                    refresh_per_second=8,
                    transient=not sys.stdout.isatty(),
                ) as live:
                    for worker in workers:
                        worker.start()
                    while any(worker.is_alive() for worker in workers):
                        time.sleep(0.1)
                        with lock:
                            live.update(_table(rows, "sessions"))
                for worker in workers:
                    worker.join(5)
                ids = [(name, session.id) for name, session in opened]
            stats = provider.stats
        with SessionStore.open(root / "sessions.db") as store:
            lost = {name: _lost(store, sid, len(PROMPTS)) for name, sid in ids}
    console.print(_table(rows, "summary"))
    turns = sessions * len(PROMPTS)
    converged = sum(len(row.outcomes) for row in rows.values())
    completed = sum(outcome == "completed" for row in rows.values() for outcome in row.outcomes)
    problems = [f"{name}: {p}" for name, ps in lost.items() for p in ps]
    console.print(
        f"{turns} turns: {converged} converged ({completed} completed), "
        f"{sum(r.retries for r in rows.values())} retries absorbed, "
        f"{sum(r.auth for r in rows.values())} auth refreshes, "
        f"{sum(r.compactions for r in rows.values())} compactions; provider injected "
        f"{stats.total_faults} faults over {stats.requests} requests; "
        f"{'nothing lost' if not problems else 'LOST: ' + '; '.join(problems)} "
        f"({time.monotonic() - started:.1f} s)"
    )
    return 0 if converged == turns and not problems else 1
