"""`turnkeep chaos`: many sessions under provider faults, actor crashes and cancels, then the invariants.

A run opens ``sessions`` sessions of ``turns`` turns each against the embedded provider, whose fault plan
(the chosen profile's transient faults, expiring access tokens, a context window small enough that turns
compact, a body limit that some requests exceed) is seeded, while every actor of every session subtree
crashes with probability ``actor_crash_rate`` per message and a seeded fraction of the turns is cancelled
at a random point. Afterwards it checks that every turn converged within a bound derived from the retry
policy, that each session's stored history is what was acknowledged, and that nothing (thread, child
process, file descriptor) outlived the run; it prints the counts and any violation, and exits non-zero
when there is one. The same seed chooses the same workload and the same faults; the order in which the
sessions' requests interleave is up to the scheduler, so a replay injects the same mix, not necessarily
at the same instants.
"""

from __future__ import annotations

import base64
import collections
import gc
import math
import os
import queue
import random
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from actors import (
    Actor,
    ActorError,
    ActorSystem,
    Address,
    AskTimeout,
    ChaosCrash,
    ChaosPolicy,
    ChildSpec,
    DeadLetter,
    Down,
    ExitReason,
    SupervisorEscalation,
    handles,
)
from sampler import AssistantMessage, ImagePart, LlmErrorKind, TextPart, ToolMessage, UserMessage
from sampler.fake import (
    DEFAULT_REFRESH_TOKEN,
    FakeProvider,
    FaultPlan,
    FinalAnswer,
    ProviderStats,
    Script,
    TokenExpiry,
    ToolStep,
)
from tool_bridge import ToolRegistry
from tool_bridge.builtins import EDIT_FILE, LIST_DIR, READ_FILE, WRITE_FILE, shell_tool

from . import events as ev
from .bridge import MAX_AUTH_REFRESHES
from .config import Settings, load_settings
from .credentials import REFRESH_TIMEOUT, OAuthCredential
from .host import AgentHost
from .messages import Cancel, Subscribe, UserPrompt
from .session import SessionOptions
from .session_tree import SessionChaos
from .store import SessionStore, StoreError

__all__ = [
    "ChaosReport",
    "DeadLetterCount",
    "Resources",
    "TurnBound",
    "chaos_run",
    "event_log_violations",
    "history_violations",
    "leaks",
    "print_report",
    "replay_command",
    "run",
    "turn_bound",
]

# -- the workload ----------------------------------------------------------------------------------------

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


def _plan(seed: int, sessions: int, turns: int, cancel_rate: float) -> list[_SessionPlan]:
    rng = random.Random(f"turnkeep-chaos/{seed}")
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


# -- the bound -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnBound:
    """How long a turn may take, from its start to its end, before it counts as hung; ``formula`` says
    how ``seconds`` was computed."""

    seconds: float
    formula: str


def turn_bound(
    settings: Settings,
    *,
    model_calls: int,
    tool_rounds: int,
    retry_after: float,
    restart_wait: float,
) -> TurnBound:
    """How long a turn may take when each of its model calls spends its whole retry budget.

    A model call makes at most ``retry.max_attempts`` attempts, each silent for at most the idle timeout
    and followed by the longest back-off (``retry_after`` when the provider asks for longer than the
    policy's own). A turn makes ``model_calls`` calls, plus two compaction summaries per cycle (whole,
    then in chunks), the resubmissions after the auth refreshes one step may make, and one resubmission
    after a restart; a turn re-sends at most three times with a degraded projection; each auth refresh
    waits its back-off and may take the refresh timeout; its tools run at most ``tool_rounds`` batches,
    each within the shell timeout plus the kill delay; a restart makes messages wait up to
    ``restart_wait``, twice.
    """
    retry, timeouts, tools = settings.retry, settings.timeouts, settings.tools
    backoff = max(retry.max_delay * (1 + retry.jitter), retry_after)
    call = retry.max_attempts * (timeouts.idle + backoff)
    calls = model_calls + 2 * settings.compaction.max_cycles + MAX_AUTH_REFRESHES + 1
    reshaped = 3 * timeouts.idle
    auth_backoff = SessionOptions("-", "-").auth_backoff
    auth = sum(auth_backoff * n + REFRESH_TIMEOUT for n in range(1, MAX_AUTH_REFRESHES + 1))
    tool_time = tool_rounds * (tools.shell_timeout + tools.kill_after)
    restarts = 2 * restart_wait
    seconds = calls * call + reshaped + auth + tool_time + restarts
    formula = (
        f"{calls} model calls x {retry.max_attempts} attempts x ({timeouts.idle:g} s idle + {backoff:g} s "
        f"back-off) + 3 re-shaped x {timeouts.idle:g} s + {auth:g} s auth refreshes + {tool_rounds} tool "
        f"rounds x ({tools.shell_timeout:g} + {tools.kill_after:g}) s + 2 x {restart_wait:g} s restart "
        f"wait = {seconds:.0f} s"
    )
    return TurnBound(seconds, formula)


# -- what the actors did ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Tally:
    """Every incarnation that ended, by actor kind; written by the watcher, read after the run."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    other: collections.Counter[str] = field(default_factory=collections.Counter)
    other_errors: list[str] = field(default_factory=list)
    killed: collections.Counter[str] = field(default_factory=collections.Counter)
    escalated: collections.Counter[str] = field(default_factory=collections.Counter)
    dead: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    crashed_on: collections.defaultdict[str, list[str]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def down(self, message: Down) -> None:
        kind = _actor_kind(message.address)
        with self.lock:
            if message.reason is ExitReason.CRASHED:
                if isinstance(message.error, ChaosCrash):
                    self.injected[kind] += 1
                    parts = message.address.split("/")
                    if parts[:2] == ["host", "session"] and len(parts) > 3:
                        # The runtime's text for it ends with "on <message type>".
                        on = str(message.error).rsplit(" on ", 1)[-1]
                        self.crashed_on[parts[2]].append(f"{kind} on {on}")
                elif isinstance(message.error, SupervisorEscalation):
                    self.escalated[kind] += 1
                else:
                    self.other[kind] += 1
                    self.other_errors.append(f"{message.address}: {message.error!r}")
            elif message.reason is ExitReason.KILLED:
                self.killed[kind] += 1

    def dead_letter(self, letter: DeadLetter) -> None:
        key = (_actor_kind(letter.address), type(letter.message).__name__, _reason_class(letter.reason))
        with self.lock:
            self.dead[key] += 1
            parts = letter.address.split("/")
            if key[2].startswith("crashed on it") and parts[:2] == ["host", "session"] and len(parts) > 3:
                self.crashed_on[parts[2]].append(f"{key[0]} gave up on {key[1]}")


class _Watcher(Actor):
    """Counts the ``Down`` notices of the actors it watches."""

    def __init__(self, tally: _Tally) -> None:
        super().__init__()
        self._tally = tally

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        self._tally.down(message)


_KINDS = ("session", "chat_state", "sampler", "tools")


def _actor_kind(address: str) -> str:
    """``session``, ``chat_state``, ``sampler``, ``tools``, ``tool actor`` or ``session_supervisor`` for an
    address inside a session subtree (``host/session/<id>/...``); the first component otherwise."""
    parts = address.split("/")
    if parts[:2] != ["host", "session"] or len(parts) < 3:
        return parts[0]
    if len(parts) == 3:
        return "session_supervisor"
    if parts[3] == "tools" and len(parts) > 4:
        return "tool actor"
    return parts[3]


_REASONS: tuple[tuple[str, str], ...] = (
    ("the actor crashed twice while handling it", "crashed on it twice"),
    ("injected crashes ended", "crashed on it in a row"),
    ("the actor crashed while handling it", "crashed on it"),
    ("the asker gave up before delivery", "asker gave up"),
    ("did not come back within", "restart too slow"),
    ("the system has shut down", "after shutdown"),
    ("the actor has stopped", "after stop"),
    ("the actor is stopping", "while stopping"),
    ("actor ended and is not restarted", "after the actor ended"),
    ("queued while it was stopping", "queued behind a stop"),
    ("its supervisor stopped before restarting it", "supervisor stopping"),
    ("dropped by the chaos policy", "dropped"),
    ("refused:", "refused"),
    ("has no handler for", "unhandled"),
)
"""How a dead letter's reason is classified: the first needle found in it names its class."""

_EXPLANATIONS: dict[tuple[str, str], str] = {
    ("*", "crashed on it"): (
        "a told message on which an injected crash fell: the runtime records it instead of handling it "
        "(whether its turn recovered is what the convergence check says)"
    ),
    ("*", "crashed on it twice"): (
        "a told message whose handler crashed twice (it is handed to the next incarnation once): "
        "the runtime gives up on it (whether its turn recovered is what the convergence check says)"
    ),
    ("*", "crashed on it in a row"): (
        "a told message on which injected crashes fell four times in a row (an injected crash happens "
        "before the handler, so the message survives three): the runtime gives up on it (whether its "
        "turn recovered is what the convergence check says)"
    ),
    ("*", "while stopping"): "sent to an actor while it was being stopped for good (at shutdown)",
    ("Down", "after stop"): (
        "the session watches its sampler and tool runner; at shutdown they stop after it, so their last "
        "Down notices find it stopped"
    ),
    ("*", "after stop"): "sent to an actor already stopped for good by the shutdown",
    ("*", "after shutdown"): "sent after the system shut down (late notices of cancelled jobs)",
    ("*", "after the actor ended"): "sent to a tool actor that had already ended (a late abort or kill)",
    ("*", "asker gave up"): "an ask withdrawn at its deadline while its actor was restarting",
    ("*", "restart too slow"): "its actor did not come back within restart_wait",
    ("*", "queued behind a stop"): "queued behind the stop of an incarnation that was not restarted",
    ("*", "supervisor stopping"): (
        "sent to an actor that crashed while its session subtree was stopping (it gave up after too many "
        "restarts, or the session was closed): the subtree is started again whole, and the turn in "
        "flight ends as recorded"
    ),
}
"""What explains each kind of dead letter a run can produce: (message type or "*", reason class)."""


def _reason_class(reason: str) -> str:
    for needle, name in _REASONS:
        if needle in reason:
            return name
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "…", reason)[:80]


def _explain(message: str, reason_class: str) -> str | None:
    return _EXPLANATIONS.get((message, reason_class)) or _EXPLANATIONS.get(("*", reason_class))


# -- driving the sessions --------------------------------------------------------------------------------


@dataclass(eq=False)
class _TurnLog:
    plan: _TurnPlan
    text: str = ""
    number: int | None = None
    refusals: list[str] = field(default_factory=list)
    outcome: str = "not sent"
    detail: str = ""
    began: float | None = None
    elapsed: float = 0.0
    events: collections.Counter[str] = field(default_factory=collections.Counter)
    tool_status: collections.Counter[str] = field(default_factory=collections.Counter)
    compactions_ok: int = 0
    cancel: str = ""
    last_event: str = ""


@dataclass(eq=False)
class _SessionLog:
    plan: _SessionPlan
    turns: list[_TurnLog] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Limits:
    bound: TurnBound
    start_wait: float
    ask_timeout: float
    gate: Callable[[], str] = lambda: "no turn gate"
    describe: Callable[[str], str] = lambda session_id: "no account of the session"


def _ask(address: Address, message: Any, timeout: float, *, tries: int = _ASK_TRIES) -> Any:
    """Ask, again when the message was surely not handled (an injected crash, a restart in progress)."""
    for attempt in range(tries):
        try:
            return address.ask(message, timeout=timeout)
        except AskTimeout as exc:
            if exc.delivered or attempt == tries - 1:
                raise
        except ActorError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _drive(host: AgentHost, root: Path, plan: _SessionPlan, log: _SessionLog, limits: _Limits) -> None:
    try:
        address = host.open(root / plan.session_id, session_id=plan.session_id)
        events: queue.Queue[Any] = queue.Queue()
        _ask(address, Subscribe(events), limits.ask_timeout)
    except Exception as exc:
        log.problems.append(f"{plan.label}: the session could not be opened: {exc!r}")
        log.turns = [_TurnLog(turn) for turn in plan.turns]
        return
    hung = False
    for turn in plan.turns:
        entry = _TurnLog(turn)
        log.turns.append(entry)
        if hung:
            entry.outcome = "skipped"
            continue
        _run_turn(address, events, entry, limits)
        hung = entry.outcome == "hung"


def _run_turn(address: Address, events: queue.Queue[Any], entry: _TurnLog, limits: _Limits) -> None:
    plan = entry.plan
    for attempt in range(_PROMPT_TRIES):
        if attempt:
            time.sleep(_PROMPT_BACKOFF * 2 ** (attempt - 1))
        text = plan.text if attempt == 0 else f"{plan.text} (sent again, {attempt})"
        try:
            entry.number = address.ask(UserPrompt(text, plan.images), timeout=limits.ask_timeout)
            entry.text = text
            break
        except ActorError as exc:
            entry.refusals.append(text)
            entry.detail = f"{type(exc).__name__}: {exc}"
    if entry.number is None:
        entry.outcome = "refused"
        return
    acked = time.monotonic()
    deadline = acked + limits.start_wait + limits.bound.seconds
    cancel = plan.cancel
    cancel_at = acked + cancel.after_seconds if cancel and cancel.after_seconds is not None else None
    seen = 0
    while True:
        now = time.monotonic()
        if cancel_at is not None and now >= cancel_at:
            entry.cancel = _cancel(address, limits.ask_timeout)
            cancel_at = None
        wake = min(deadline, cancel_at if cancel_at is not None else math.inf)
        try:
            event = events.get(timeout=max(0.0, wake - now))
        except queue.Empty:
            if time.monotonic() >= deadline:
                entry.outcome = "hung"
                entry.elapsed = time.monotonic() - (entry.began or acked)
                if entry.began is None:
                    entry.detail = f"it never started; {limits.gate()}"
                else:
                    entry.detail = (
                        f"no end within the bound; the last event was {entry.last_event}; "
                        f"now: {limits.describe(address.name.rsplit('/', 1)[-1])}"
                    )
                return
            continue
        if getattr(event, "turn", None) != entry.number:
            continue
        seen += 1
        name = type(event).__name__
        entry.events[name] += 1
        entry.last_event = name
        if isinstance(event, ev.TurnStarted):
            entry.began = time.monotonic()
            deadline = entry.began + limits.bound.seconds
        elif isinstance(event, ev.ToolCallFinished):
            entry.tool_status[event.status] += 1
        elif isinstance(event, ev.CompactionFinished) and event.ok:
            entry.compactions_ok += 1
        elif isinstance(event, ev.TERMINAL_EVENTS):
            entry.elapsed = time.monotonic() - (entry.began or acked)
            if isinstance(event, ev.TurnCompleted):
                entry.outcome = "completed"
            elif isinstance(event, ev.TurnFailed):
                entry.outcome, entry.detail = "failed", event.kind
            else:
                entry.outcome, entry.detail = "cancelled", event.reason
            return
        if cancel is not None and cancel.after_events is not None and seen == cancel.after_events:
            entry.cancel = _cancel(address, limits.ask_timeout)


def _cancel(address: Address, timeout: float) -> str:
    try:
        return "requested" if _ask(address, Cancel(), timeout) else "no turn running"
    except ActorError as exc:
        return f"refused ({type(exc).__name__})"


# -- the invariants --------------------------------------------------------------------------------------


def history_violations(
    store: SessionStore,
    session_id: str,
    acknowledged: Mapping[int, str],
    refused: Iterable[str] = (),
) -> list[str]:
    """What is wrong with the stored history of ``session_id``, given the prompts acknowledged (turn
    number → text) and those refused: each acknowledged prompt must be stored exactly once, in its turn,
    and a refused one at most once; no message may be stored twice in the same turn; every tool call
    must have exactly one result (whatever it says), and every result a call — among the messages as
    they were appended, and in the projection the model is sent."""
    problems: list[str] = []
    stored = store.load_messages(session_id, include_replaced=True)
    originals = [m for m in stored if not m.is_summary]
    prompts: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    for m in originals:
        if isinstance(m.message, UserMessage):
            prompts[_text_of(m.message)].append(m.turn)
    for number, text in sorted(acknowledged.items()):
        turns = prompts.get(text, [])
        if len(turns) != 1:
            problems.append(f"the prompt of turn {number} is stored {len(turns)} times, not once")
        elif turns[0] != number:
            problems.append(f"the prompt of turn {number} is stored under turn {turns[0]}")
    for text in refused:
        if len(prompts.get(text, [])) > 1:
            problems.append(f"a refused prompt is stored {len(prompts[text])} times")
    first: dict[tuple[int, bytes], int] = {}
    for m in originals:
        key = (m.turn, msgspec.json.encode(m.message))
        if key in first:
            kind = type(m.message).__name__
            problems.append(f"message {m.seq} ({kind}, turn {m.turn}) duplicates message {first[key]}")
        else:
            first[key] = m.seq
    problems += _pairing([m.message for m in originals], "stored")
    problems += _pairing([m.message for m in store.load_messages(session_id)], "projection")
    return problems


def _text_of(message: UserMessage) -> str:
    return "".join(part.text for part in message.parts if isinstance(part, TextPart))


def _pairing(messages: Sequence[Any], where: str) -> list[str]:
    problems: list[str] = []
    calls: collections.Counter[str] = collections.Counter()
    results: collections.Counter[str] = collections.Counter()
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            results[message.result.call_id] += 1
    for call_id, count in calls.items():
        if count > 1:
            problems.append(f"{where}: tool call {call_id} appears {count} times")
        if results[call_id] != 1:
            problems.append(f"{where}: tool call {call_id} has {results[call_id]} results, not one")
    for call_id in results:
        if call_id not in calls:
            problems.append(f"{where}: a result answers tool call {call_id}, which no message made")
    return problems


def event_log_violations(store: SessionStore, session_id: str, observed: Mapping[int, str]) -> list[str]:
    """What is wrong with the stored event log of ``session_id``, given the end each acknowledged turn
    was seen to have (turn number → event class name, or "" when none was seen): each such turn must have
    started once and ended once, as it was seen to; no turn may have ended twice; the session must be
    idle."""
    problems: list[str] = []
    started: collections.Counter[int] = collections.Counter()
    ended: collections.defaultdict[int, list[str]] = collections.defaultdict(list)
    terminal = {cls.__name__ for cls in ev.TERMINAL_EVENTS}
    for event in store.load_events(session_id):
        if event.type == "TurnStarted":
            started[event.turn] += 1
        elif event.type in terminal:
            ended[event.turn].append(event.type)
    for number, seen in sorted(observed.items()):
        if started[number] != 1:
            problems.append(f"turn {number} is stored as started {started[number]} times")
        if len(ended[number]) != 1:
            problems.append(f"turn {number} has {len(ended[number])} stored ends, not one")
        elif seen and ended[number][0] != seen:
            problems.append(f"turn {number} was seen to end as {seen} but is stored as {ended[number][0]}")
    for number, ends in sorted(ended.items()):
        if number not in observed and len(ends) > 1:
            problems.append(f"turn {number} has {len(ends)} stored ends")
    status = store.get_session(session_id).status
    if status != "idle":
        problems.append(f"the session is left {status!r}")
    return problems


# -- what the process holds ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resources:
    """What the process holds at one moment: its threads, its child processes (and any process of the
    run, found by ``mark`` in its environment, orphans included) and its open file descriptors."""

    threads: frozenset[tuple[int, str]]
    processes: frozenset[tuple[int, str]]
    fds: frozenset[tuple[int, str]]

    @classmethod
    def take(cls, mark: str | None = None) -> Resources:
        """A snapshot now."""
        threads = frozenset((t.ident or 0, t.name) for t in threading.enumerate())
        return cls(threads, frozenset(_processes(mark)), frozenset(_fds()))


def leaks(before: Resources, after: Resources) -> list[str]:
    """What ``after`` holds that ``before`` did not: each thread, process and file descriptor named."""
    problems = [f"thread {name!r} is still running" for _, name in sorted(after.threads - before.threads)]
    problems += [f"process {pid} ({what}) is still there" for pid, what in sorted(after.processes)]
    problems += [
        f"file descriptor {fd} ({target}) is still open" for fd, target in sorted(after.fds - before.fds)
    ]
    return problems


def _processes(mark: str | None) -> Iterable[tuple[int, str]]:
    me = os.getpid()
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            stat = (entry / "stat").read_text()
            # The command name is in parentheses and may hold spaces; the fields after it are plain.
            command = stat[stat.index("(") + 1 : stat.rindex(")")]
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
            ours = int(ppid) == me
            if not ours and mark is not None:
                ours = f"{_MARK}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if ours:
            yield int(entry.name), f"{command}, state {state}"


def _fds() -> Iterable[tuple[int, str]]:
    root = Path("/proc/self/fd")
    if not root.is_dir():
        return
    for name in os.listdir(root):
        try:
            yield int(name), os.readlink(root / name)
        except OSError:
            continue  # the descriptor of the listing itself, closed by now


def _settle(before: Resources, mark: str) -> Resources:
    """A snapshot once the threads that are ending have ended (bounded by ``_THREAD_GRACE``)."""
    deadline = time.monotonic() + _THREAD_GRACE
    while True:
        gc.collect()
        after = Resources.take(mark)
        if not leaks(before, after) or time.monotonic() >= deadline:
            return after
        time.sleep(0.05)


# -- the report ------------------------------------------------------------------------------------------


class DeadLetterCount(msgspec.Struct, frozen=True):
    """Dead letters of one kind: where, what, why, how many, and what explains them."""

    actor: str
    message: str
    reason: str
    count: int
    explanation: str


class ChaosReport(msgspec.Struct, frozen=True):
    """Everything a run counted and every violation it found; ``ok`` when there is none."""

    seed: int
    sessions: int
    turns: int
    actor_crash_rate: float
    profile: str
    cancel_rate: float
    duration: float
    bound_seconds: float
    bound_formula: str
    outcomes: dict[str, int]
    slowest_turn: float
    faults: dict[str, int]
    rejections: dict[str, int]
    provider_requests: int
    token_refreshes: int
    retries_absorbed: int
    auth_refreshes: int
    compactions: int
    compactions_failed: int
    projection_fallbacks: int
    tool_calls: dict[str, int]
    cancels: dict[str, int]
    prompts_refused: int
    crashes: dict[str, int]
    other_crashes: dict[str, int]
    escalations: dict[str, int]
    killed: dict[str, int]
    runtime: dict[str, int]
    dead_letters: list[DeadLetterCount]
    violations: list[str]
    ok: bool
    """Whether the run found no violation."""
    replay: str


def replay_command(
    *, seed: int, sessions: int, turns: int, actor_crash_rate: float, profile: str, as_json: bool = False
) -> str:
    """The command line that runs the same workload with the same faults again."""
    command = (
        f"turnkeep chaos --seed {seed} --sessions {sessions} --turns {turns} "
        f"--actor-crash-rate {actor_crash_rate:g} --fault-profile {profile}"
    )
    return command + (" --json" if as_json else "")


def _count_outcomes(logs: Sequence[_SessionLog]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for log in logs:
        for turn in log.turns:
            counts[
                f"{turn.outcome}: {turn.detail}" if turn.outcome in ("failed", "cancelled") else turn.outcome
            ] += 1
    return dict(sorted(counts.items()))


_KNOWN_KINDS = frozenset(
    {str(kind) for kind in LlmErrorKind}
    | {"max_steps", "doom_loop", "context_overflow", "auth", "provider_filtered", "store", "internal"}
)
"""The kinds a failed turn may name: a provider error's kind, or one of the session's own."""


def _turn_violations(
    logs: Sequence[_SessionLog], bound: TurnBound, crashed_on: Mapping[str, list[str]]
) -> list[str]:
    problems: list[str] = []
    for log in logs:
        problems += log.problems
        for turn in log.turns:
            where = f"{log.plan.label} ({log.plan.session_id}) turn {turn.number or '?'}"
            if turn.outcome == "hung":
                crashes = ", ".join(crashed_on.get(log.plan.session_id, [])) or "none"
                problems.append(
                    f"{where}: did not converge within {bound.seconds:.0f} s ({turn.detail}; the session's "
                    f"actors crashed on: {crashes})"
                )
            elif turn.outcome == "refused":
                problems.append(f"{where}: the prompt was refused {len(turn.refusals)} times ({turn.detail})")
            elif turn.outcome == "failed" and turn.detail not in _KNOWN_KINDS:
                problems.append(f"{where}: failed with the undocumented kind {turn.detail!r}")
            elif turn.outcome in ("completed", "failed", "cancelled") and turn.elapsed > bound.seconds:
                problems.append(
                    f"{where}: took {turn.elapsed:.1f} s, beyond the bound of {bound.seconds:.0f} s"
                )
            if turn.outcome in ("completed", "failed", "cancelled"):
                ends = sum(turn.events[cls.__name__] for cls in ev.TERMINAL_EVENTS)
                if turn.events["TurnStarted"] != 1 or ends != 1:
                    problems.append(
                        f"{where}: published {turn.events['TurnStarted']} starts and {ends} ends, "
                        "not one each"
                    )
    return problems


def _store_violations(path: Path, logs: Sequence[_SessionLog]) -> list[str]:
    problems: list[str] = []
    with SessionStore.open(path) as store:
        for log in logs:
            if log.problems and not any(t.number for t in log.turns):
                continue
            acknowledged = {t.number: t.text for t in log.turns if t.number is not None}
            refused = [text for t in log.turns for text in t.refusals]
            seen = {t.number: _END_NAMES.get(t.outcome, "") for t in log.turns if t.number is not None}
            try:
                found = history_violations(store, log.plan.session_id, acknowledged, refused)
                found += event_log_violations(store, log.plan.session_id, seen)
            except StoreError as exc:
                found = [f"the store cannot be read: {exc}"]
            problems += [f"{log.plan.label} ({log.plan.session_id}): {p}" for p in found]
    return problems


_END_NAMES = {"completed": "TurnCompleted", "failed": "TurnFailed", "cancelled": "TurnCancelled"}


def _build_report(
    *,
    options: dict[str, Any],
    duration: float,
    bound: TurnBound,
    logs: Sequence[_SessionLog],
    stats: ProviderStats,
    tally: _Tally,
    runtime: dict[str, int],
    violations: list[str],
) -> ChaosReport:
    turns = [t for log in logs for t in log.turns]
    events: collections.Counter[str] = collections.Counter()
    tools: collections.Counter[str] = collections.Counter()
    cancels: collections.Counter[str] = collections.Counter()
    for turn in turns:
        events.update(turn.events)
        tools.update(turn.tool_status)
        if turn.plan.cancel is not None and turn.number is not None:
            cancels[turn.cancel or "turn ended first"] += 1
    compactions = sum(t.compactions_ok for t in turns)
    crashes = {kind: tally.injected[kind] for kind in (*_KINDS, "session_supervisor") if tally.injected[kind]}
    # Tool actors are the only other actors with a chaos policy, and they are not watched.
    crashes["tool actor"] = runtime.get("chaos_crashes", 0) - sum(tally.injected.values())
    dead = [
        DeadLetterCount(actor, message, reason, count, _explain(message, reason) or "unexplained")
        for (actor, message, reason), count in sorted(tally.dead.items(), key=lambda item: -item[1])
    ]
    violations += [
        f"{d.count} dead letters to the {d.actor} ({d.message}, {d.reason}) that nothing explains"
        for d in dead
        if d.explanation == "unexplained"
    ]
    return ChaosReport(
        seed=options["seed"],
        sessions=options["sessions"],
        turns=options["turns"],
        actor_crash_rate=options["actor_crash_rate"],
        profile=options["profile"],
        cancel_rate=options["cancel_rate"],
        duration=round(duration, 2),
        bound_seconds=round(bound.seconds, 1),
        bound_formula=bound.formula,
        outcomes=_count_outcomes(logs),
        slowest_turn=round(max((t.elapsed for t in turns if t.outcome in _END_NAMES), default=0.0), 2),
        faults=dict(sorted(stats.faults.items())),
        rejections=dict(sorted(stats.rejections.items())),
        provider_requests=stats.requests,
        token_refreshes=stats.token_refreshes,
        retries_absorbed=events["Retrying"],
        auth_refreshes=events["AuthRefreshed"],
        compactions=compactions,
        compactions_failed=events["CompactionFinished"] - compactions,
        projection_fallbacks=events["ProjectionFallback"],
        tool_calls=dict(sorted(tools.items())),
        cancels=dict(sorted(cancels.items())),
        prompts_refused=sum(len(t.refusals) for t in turns),
        crashes=crashes,
        other_crashes=dict(tally.other),
        escalations=dict(tally.escalated),
        killed=dict(tally.killed),
        runtime=dict(sorted(runtime.items())),
        dead_letters=dead,
        violations=violations,
        ok=not violations,
        replay=replay_command(
            seed=options["seed"],
            sessions=options["sessions"],
            turns=options["turns"],
            actor_crash_rate=options["actor_crash_rate"],
            profile=options["profile"],
        ),
    )


def print_report(report: ChaosReport) -> None:
    """Print ``report`` as tables, then its violations (or that there is none) and how to replay it."""
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=130)

    def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        t = Table(title=title, title_justify="left")
        for column in columns:
            t.add_column(column)
        for row in rows:
            t.add_row(*(str(cell) for cell in row))
        console.print(t)

    total = sum(report.outcomes.values())
    table("turns", ("outcome", "turns"), [*report.outcomes.items(), ("all", total)])
    recoveries = [
        ("provider requests", report.provider_requests),
        *((f"fault injected: {kind}", n) for kind, n in report.faults.items()),
        *((f"request refused: {why}", n) for why, n in report.rejections.items()),
        ("retries absorbed", report.retries_absorbed),
        ("auth refreshes", report.auth_refreshes),
        ("tokens issued by the provider", report.token_refreshes),
        ("compactions", report.compactions),
        ("compactions that did not help", report.compactions_failed),
        ("projection fallbacks", report.projection_fallbacks),
        *((f"tool calls: {status}", n) for status, n in report.tool_calls.items()),
        *((f"cancel: {result}", n) for result, n in report.cancels.items()),
        ("prompts refused (sent again)", report.prompts_refused),
    ]
    table("faults and recoveries", ("what", "count"), recoveries)
    kinds = [*report.crashes, *report.other_crashes, *report.escalations, *report.killed]
    crash_rows = [
        (
            kind,
            report.crashes.get(kind, 0),
            report.other_crashes.get(kind, 0),
            report.escalations.get(kind, 0),
            report.killed.get(kind, 0),
        )
        for kind in dict.fromkeys(kinds)
    ]
    table(
        "actor incarnations that ended badly (tool actors are temporary, the others are restarted)",
        ("actor", "injected crashes", "other crashes", "escalations", "killed"),
        crash_rows,
    )
    table("runtime counters", ("counter", "value"), report.runtime.items())
    table(
        "dead letters",
        ("actor", "message", "reason", "count", "explanation"),
        [(d.actor, d.message, d.reason, d.count, d.explanation) for d in report.dead_letters],
    )
    console.print(f"turn bound: {report.bound_formula}; slowest turn {report.slowest_turn:.2f} s")
    if report.violations:
        console.print(f"[bold red]{len(report.violations)} violations[/bold red]:")
        for violation in report.violations:
            console.print(f"  - {violation}", markup=False, soft_wrap=True)
    else:
        console.print(
            f"[bold green]no violations[/bold green]: {total} turns converged, nothing lost, "
            "nothing left behind"
        )
    console.print(f"seed {report.seed}, {report.duration:.1f} s; replay with:", markup=False)
    console.print(report.replay, markup=False, soft_wrap=True)


# -- the run ---------------------------------------------------------------------------------------------


def run(
    *,
    seed: int,
    sessions: int,
    turns: int,
    actor_crash_rate: float = 0.0,
    profile: str = "light",
    as_json: bool = False,
    cancel_rate: float = 0.1,
) -> int:
    """Run the chaos workload, print the report (a table, or JSON with ``as_json``), and return the exit
    code: 0 when no invariant was violated, 1 otherwise. Raises ValueError for an unknown ``profile`` or
    out-of-range numbers."""
    report = chaos_run(
        seed=seed,
        sessions=sessions,
        turns=turns,
        actor_crash_rate=actor_crash_rate,
        profile=profile,
        cancel_rate=cancel_rate,
    )
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print_report(report)
    return 0 if report.ok else 1


def chaos_run(
    *,
    seed: int,
    sessions: int,
    turns: int,
    actor_crash_rate: float = 0.0,
    profile: str = "light",
    cancel_rate: float = 0.1,
) -> ChaosReport:
    """Run the chaos workload and return its report; see :func:`run`."""
    if sessions < 1 or turns < 1:
        raise ValueError(f"sessions and turns must be at least 1, got {sessions} and {turns}")
    if not 0.0 <= actor_crash_rate <= 1.0 or not 0.0 <= cancel_rate <= 1.0:
        raise ValueError("actor_crash_rate and cancel_rate must be within [0, 1]")
    faults = FaultPlan.profile(profile, seed=seed, stall_hangs=True)
    options = {
        "seed": seed,
        "sessions": sessions,
        "turns": turns,
        "actor_crash_rate": actor_crash_rate,
        "profile": profile,
        "cancel_rate": cancel_rate,
    }
    plans = _plan(seed, sessions, turns, cancel_rate)
    workers = min(sessions, 16)
    slots = max(1, workers // 2)
    mark = f"{os.getpid()}-{seed}-{time.time_ns()}"
    before = Resources.take(mark)
    started = time.monotonic()
    tally = _Tally()
    logs = [_SessionLog(plan) for plan in plans]
    violations: list[str] = []
    with tempfile.TemporaryDirectory(prefix="turnkeep-chaos-") as tmp:
        root = Path(tmp)
        provider = FakeProvider(
            _SCRIPTS["answer"],
            scripts=_SCRIPTS,
            faults=faults,
            context_window=_PROVIDER_WINDOW,
            max_body_bytes=_MAX_BODY_BYTES,
            token_expiry=TokenExpiry(requests_per_token=_REQUESTS_PER_TOKEN * slots),
        )
        provider.start()
        try:
            settings = _settings(provider.base_url, root / "sessions.db", slots)
            system = ActorSystem(ask_timeout=settings.timeouts.ask)
            bound = turn_bound(
                settings,
                model_calls=_MODEL_CALLS,
                tool_rounds=_TOOL_ROUNDS,
                retry_after=(faults.retry_after_ms or 0) / 1000,
                restart_wait=system.restart_wait,
            )
            policy = ChaosPolicy(seed=seed, crash_probability=actor_crash_rate)
            chaos = SessionChaos(session=policy, chat_state=policy, sampler=policy, tools=policy)
            credential = OAuthCredential(
                provider.token_url, DEFAULT_REFRESH_TOKEN, access_token="chaos-token"
            )
            host: AgentHost | None = None
            try:
                system.dead_letters.subscribe(tally.dead_letter)
                watcher = system.spawn(ChildSpec("chaos-watcher", lambda: _Watcher(tally)))
                host = AgentHost(
                    settings,
                    credentials=credential,
                    registry=lambda: _registry(mark),
                    chaos=chaos,
                    system=system,
                )
                limits = _Limits(
                    bound,
                    start_wait=math.ceil(workers / settings.host.max_concurrent_turns) * bound.seconds,
                    ask_timeout=settings.timeouts.ask,
                    gate=_describe_gate(host),
                    describe=host.describe,
                )
                violations += _drive_all(host, root, logs, limits, workers, system, watcher)
            finally:
                violations += _shut_down(host, system)
            runtime = system.metrics()
        finally:
            provider.stop()
        stats = provider.stats
        violations = (
            _turn_violations(logs, bound, tally.crashed_on)
            + _store_violations(root / "sessions.db", logs)
            + violations
        )
    with tally.lock:
        violations += [f"an actor crashed by itself: {error}" for error in tally.other_errors]
    violations += [f"left behind: {leak}" for leak in leaks(before, _settle(before, mark))]
    return _build_report(
        options=options,
        duration=time.monotonic() - started,
        bound=bound,
        logs=logs,
        stats=stats,
        tally=tally,
        runtime=runtime,
        violations=violations,
    )


def _drive_all(
    host: AgentHost,
    root: Path,
    logs: Sequence[_SessionLog],
    limits: _Limits,
    workers: int,
    system: ActorSystem,
    watcher: Address,
) -> list[str]:
    pending: queue.Queue[_SessionLog] = queue.Queue()
    for log in logs:
        pending.put(log)

    def work() -> None:
        while True:
            try:
                log = pending.get_nowait()
            except queue.Empty:
                return
            _watch(system, watcher, log.plan.session_id, host)
            _drive(host, root, log.plan, log, limits)

    threads = [threading.Thread(target=work, name=f"chaos-driver-{n + 1}") for n in range(workers)]
    for thread in threads:
        thread.start()
    per_session = len(logs[0].plan.turns) * (
        limits.start_wait + limits.bound.seconds + 4 * limits.ask_timeout
    )
    deadline = time.monotonic() + math.ceil(len(logs) / workers) * per_session
    problems = []
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            problems.append(f"{thread.name} did not finish its sessions in time")
    return problems


def _watch(system: ActorSystem, watcher: Address, session_id: str, host: AgentHost) -> None:
    base = f"{host.supervisor.name}/session/{session_id}"
    # Watching before the session starts is allowed: an address exists before its actor does.
    system.watch(system.address(base), watcher)
    for kind in _KINDS:
        system.watch(system.address(f"{base}/{kind}"), watcher)


def _describe_gate(host: AgentHost) -> Callable[[], str]:
    limit = host.settings.host.max_concurrent_turns
    return lambda: f"{host.gate.running} of {limit} turn slots held, {host.gate.waiting} sessions waiting"


def _shut_down(host: AgentHost | None, system: ActorSystem) -> list[str]:
    problems = []
    try:
        if host is not None:
            host.shutdown(timeout=_SHUTDOWN_TIMEOUT)
    except Exception as exc:
        problems.append(f"the host did not shut down: {exc!r}")
    report = system.shutdown(timeout=_SHUTDOWN_TIMEOUT, reason="chaos run over")
    problems += [f"the runtime had to kill an actor: {what}" for what in report.forced]
    problems += [f"shutdown left the job {job} unfinished" for job in report.unfinished_jobs]
    problems += [f"shutdown left the thread {name} running" for name in report.leftover_threads]
    return problems
