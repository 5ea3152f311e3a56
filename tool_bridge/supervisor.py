"""ToolSupervisor: runs the model's tool calls as supervised ToolActors; every batch ends in one
`ToolsFinished`, whatever its tools do."""

from __future__ import annotations

import enum
import functools
import itertools
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from actors import (
    Address,
    ChaosPolicy,
    ChildSpec,
    ChildStartError,
    Down,
    ExitReason,
    Job,
    Refuse,
    Restart,
    StopChild,
    Supervisor,
    handles,
)
from tool_bridge._process import DEFAULT_OUTPUT_CAP, DEFAULT_TERMINATE_GRACE
from tool_bridge.actor import ToolActor
from tool_bridge.messages import (
    AbortCall,
    AbortTools,
    CallFinished,
    CallStarted,
    KillCall,
    RunCall,
    RunTools,
    ToolAbandoned,
    ToolCallBegan,
    ToolInvocation,
    ToolsFinished,
)
from tool_bridge.permissions import (
    Decision,
    PermissionConfigError,
    PermissionDecision,
    PermissionPolicy,
    PermissionRequested,
    denied_outcome,
)
from tool_bridge.results import ToolOutcome, ToolResultError, ToolStatus
from tool_bridge.tools import Tool, ToolKind, ToolLimits, ToolRegistry

__all__ = [
    "ABORTED_CONTENT",
    "SHUTDOWN_CONTENT",
    "ToolBridgeSettings",
    "ToolBridgeSettingsError",
    "ToolSupervisor",
]

logger = logging.getLogger("turnkeep.tool_bridge")

ABORTED_CONTENT = "aborted: the turn was cancelled"
"""What the model reads for a call stopped by `AbortTools` (followed by any output the tool returned)."""
SHUTDOWN_CONTENT = "aborted: the tools were shut down before the call finished"
"""What the model reads for a call still unfinished when its ToolSupervisor stopped."""

_ABANDONED_REASON = (
    "its worker thread cannot be interrupted; it was left to finish in the background and its result "
    "will be discarded"
)
_TOOL_ACTOR_SHUTDOWN = 2.0
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.:-]")


class ToolBridgeSettingsError(ValueError):
    """A `ToolBridgeSettings` value is out of range."""


class ToolBridgeSettings(msgspec.Struct, frozen=True):
    """How long the tool bridge waits, and how much output a call keeps.

    After `AbortTools`, running calls get ``abort_grace`` seconds to end on their own before they are
    recorded ``aborted``; ``kill_after`` seconds after the abort whatever still runs is killed. A
    permission request unanswered for ``permission_timeout`` seconds is denied. ``output_cap`` and
    ``terminate_grace`` (SIGTERM to SIGKILL for a process group) go into every call's `ToolLimits`. A
    ToolActor that has not started its call ``start_timeout`` seconds after being told to is recorded
    ``crashed``. Raises `ToolBridgeSettingsError` for a negative duration, a ``kill_after`` shorter
    than ``abort_grace``, or a non-positive ``permission_timeout`` or ``start_timeout``.
    """

    abort_grace: float = 2.5
    kill_after: float = 10.0
    permission_timeout: float = 60.0
    output_cap: int = DEFAULT_OUTPUT_CAP
    terminate_grace: float = DEFAULT_TERMINATE_GRACE
    start_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.abort_grace >= 0:
            raise ToolBridgeSettingsError(f"abort_grace must be >= 0, got {self.abort_grace!r}")
        if not self.kill_after >= self.abort_grace:
            raise ToolBridgeSettingsError(
                f"kill_after ({self.kill_after!r}) must be >= abort_grace ({self.abort_grace!r})"
            )
        for name in ("permission_timeout", "start_timeout"):
            value = getattr(self, name)
            if not value > 0:
                raise ToolBridgeSettingsError(f"{name} must be > 0, got {value!r}")
        if not self.terminate_grace >= 0:
            raise ToolBridgeSettingsError(f"terminate_grace must be >= 0, got {self.terminate_grace!r}")
        if self.output_cap < 0:
            raise ToolBridgeSettingsError(f"output_cap must be >= 0, got {self.output_cap!r}")

    @property
    def limits(self) -> ToolLimits:
        """The limits every call runs with."""
        return ToolLimits(output_cap=self.output_cap, terminate_grace=self.terminate_grace)


class _PermissionExpired(msgspec.Struct, frozen=True, tag=True):
    serial: int
    index: int


class _StartOverdue(msgspec.Struct, frozen=True, tag=True):
    serial: int
    index: int


class _GraceOver(msgspec.Struct, frozen=True, tag=True):
    serial: int


class _KillDue(msgspec.Struct, frozen=True, tag=True):
    serial: int


class _State(enum.Enum):
    PENDING = "waiting for the calls before it"
    ASKING = "waiting for permission"
    STARTING = "told to start"
    RUNNING = "running"
    DONE = "done"


@dataclass(eq=False)
class _Call:
    batch: _Batch
    index: int
    invocation: ToolInvocation
    tool: Tool[Any] | None = None
    args: msgspec.Struct | None = None
    state: _State = _State.PENDING
    outcome: ToolOutcome | None = None
    child: str = ""
    actor: Address | None = None
    """The call's ToolActor, until it has ended."""
    started_at: float | None = None
    timer: Job | None = None

    @property
    def call_id(self) -> str:
        return self.invocation.call_id

    @property
    def tool_name(self) -> str:
        return self.tool.name if self.tool is not None else self.invocation.name


@dataclass(eq=False)
class _Batch:
    serial: int
    batch_id: str
    reply_to: Address
    calls: list[_Call] = field(default_factory=list)
    groups: deque[list[_Call]] = field(default_factory=deque)
    current: list[_Call] = field(default_factory=list)
    aborted: bool = False
    reported: bool = False
    grace: Job | None = None
    kill: Job | None = None


class ToolSupervisor(Supervisor):
    """Runs each `RunTools` batch: decode, permission, one temporary `ToolActor` per call, one report.

    Guarantees:

    * exactly one `ToolsFinished` per `RunTools`, with one outcome per call in call order — also when
      tools fail, hang, crash or are aborted, and when this supervisor stops (the unfinished calls are
      then ``aborted``) or crashes (``crashed``); a tool's failure is an ``is_error`` outcome, never an
      exception;
    * a call that cannot be decoded (unknown tool, bad JSON, schema mismatch) is ``invalid``; a repeated
      call id within a batch is ``invalid`` and not run; a `RunTools` for a batch still running is refused
      (a dead letter);
    * calls are checked with ``policy`` when their turn comes: ``deny`` gives a ``denied`` outcome, ``ask``
      tells `PermissionRequested` to the batch's ``reply_to`` and waits for a `PermissionDecision` told to
      this supervisor, at most ``settings.permission_timeout`` seconds (then denied); ``allow_always`` is
      remembered by the policy;
    * consecutive parallel-safe calls run together; every other call runs alone, after the calls before it
      have ended; `ToolCallBegan` is told when a call's tool starts;
    * a ToolActor that crashes (or cannot start) gives a ``crashed`` outcome and the batch goes on;
    * `AbortTools`: calls not started are ``aborted`` at once, running calls are asked to stop and keep the
      outcome they report within ``settings.abort_grace``; `ToolsFinished` is told then (or as soon as
      every call has ended); at ``settings.kill_after`` whatever still runs is killed (job cancelled,
      process group killed, ToolActor stopped); a thread tool left running is reported by `ToolAbandoned`;
    * when stopped, every ToolActor is stopped and every tool process killed.

    With ``redact``, every outcome's content and the arguments of every `PermissionRequested` pass through
    it before they leave (for the host's secrets).

    Each call's ToolActor lives at ``<this address>/call-<call id>`` (characters other than letters,
    digits and ``_.:-`` replaced by ``_``; a suffix ``-2``, ``-3``… when the name was used before).
    Handlers only touch memory and start actors; every wait is an IoLoop timer reporting by message.
    State lives in this incarnation: a restarted ToolSupervisor starts with no batch (its predecessor
    reported each of its batches before it ended).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        policy: PermissionPolicy,
        workspace: Path,
        settings: ToolBridgeSettings | None = None,
        chaos_for_tools: ChaosPolicy | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__()
        self._redact = redact
        self._registry = registry
        self._policy = policy
        self._workspace = workspace
        self._settings = settings or ToolBridgeSettings()
        self._tool_chaos = chaos_for_tools
        self._serials = itertools.count(1)
        self._batches: dict[int, _Batch] = {}
        self._by_actor: dict[str, _Call] = {}
        self._names: set[str] = set()

    def on_stop(self) -> None:
        self._unwatch_all()
        super().on_stop()
        self._report_all(ToolStatus.ABORTED, SHUTDOWN_CONTENT)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._unwatch_all()
            self._stop_all()
            self._report_all(ToolStatus.CRASHED, f"the tool supervisor crashed: {exception_value!r}")
        except Exception:
            logger.exception("%s: could not report its batches after a crash", self.address.name)

    # -- from the session ----------------------------------------------------------------------------

    @handles(RunTools)
    def _on_run_tools(self, message: RunTools) -> None:
        if self._open_batch(message.batch_id) is not None:
            raise Refuse(ValueError(f"batch {message.batch_id!r} is already running"))
        batch = _Batch(next(self._serials), message.batch_id, self.system.address(message.reply_to))
        batch.calls = [_Call(batch, index, invocation) for index, invocation in enumerate(message.calls)]
        # Registered before anything else can fail, so that even a crash here reports the batch.
        self._batches[batch.serial] = batch
        seen: set[str] = set()
        for call in batch.calls:
            invocation = call.invocation
            if invocation.call_id in seen:
                refusal = ToolResultError(
                    invocation.name, f"call id `{invocation.call_id}` repeats an earlier call; it was not run"
                )
                self._settle(call, refusal.to_outcome(invocation.call_id))
                continue
            seen.add(invocation.call_id)
            decoded = self._registry.decode_call(invocation.name, invocation.arguments)
            if isinstance(decoded, ToolResultError):
                self._settle(call, decoded.to_outcome(invocation.call_id))
            else:
                call.tool, call.args = decoded
        batch.groups = _groups(call for call in batch.calls if call.tool is not None)
        self._advance(batch)

    @handles(AbortTools)
    def _on_abort_tools(self, message: AbortTools) -> None:
        batch = self._open_batch(message.batch_id)
        if batch is None:
            logger.debug("abort of batch %r, which is not running", message.batch_id)
            return
        batch.aborted = True
        running = False
        for call in batch.calls:
            if call.outcome is not None:
                continue
            if call.state in (_State.STARTING, _State.RUNNING) and call.actor is not None:
                running = True
                call.actor.tell(AbortCall(call.call_id))
            else:
                self._cancel_timer(call)
                self._settle(call, _ended(call, ToolStatus.ABORTED, ABORTED_CONTENT))
        if running:
            batch.grace = self._later(self._settings.abort_grace, _GraceOver(batch.serial))
            batch.kill = self._later(self._settings.kill_after, _KillDue(batch.serial))
        self._advance(batch)

    @handles(PermissionDecision)
    def _on_permission(self, message: PermissionDecision) -> None:
        call = self._asking(message.call_id)
        if call is None:
            raise Refuse(LookupError(f"no call {message.call_id!r} is waiting for permission"))
        self._cancel_timer(call)
        try:
            decision = self._policy.resolve(call.tool_name, message)
        except PermissionConfigError as exc:
            logger.warning("call %s: the session grant was refused: %s", call.call_id, exc)
            decision = Decision("allow", f"allowed once by the user (the session grant was refused: {exc})")
        if decision.action == "allow":
            self._start(call)
        else:
            self._settle(call, denied_outcome(call.call_id, call.tool_name, decision.reason))
        self._advance(call.batch)

    # -- from the ToolActors -------------------------------------------------------------------------

    @handles(CallStarted)
    def _on_call_started(self, message: CallStarted) -> None:
        call = self._by_actor.get(message.actor)
        if call is None or call.state is not _State.STARTING:
            return
        self._cancel_timer(call)
        call.state = _State.RUNNING
        batch = call.batch
        if not batch.reported:
            batch.reply_to.tell(ToolCallBegan(batch.batch_id, call.call_id, call.tool_name))

    @handles(CallFinished)
    def _on_call_finished(self, message: CallFinished) -> None:
        call = self._by_actor.get(message.actor)
        if call is None:
            return
        self._cancel_timer(call)
        batch = call.batch
        if message.abandoned:
            batch.reply_to.tell(
                ToolAbandoned(batch.batch_id, call.call_id, call.tool_name, _ABANDONED_REASON)
            )
        if call.outcome is None:
            outcome = message.outcome
            if batch.aborted and outcome.status is ToolStatus.ABORTED:
                outcome = msgspec.structs.replace(
                    outcome, content=f"{ABORTED_CONTENT}\n{outcome.content}", interrupted=True
                )
            self._settle(call, outcome)
        call.state = _State.DONE
        self._advance(batch)

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        call = self._by_actor.pop(message.address, None)
        if call is None:
            return
        self.system.unwatch(self.system.address(message.address), self.address)
        self._cancel_timer(call)
        call.actor = None
        if call.outcome is None:
            self._settle(call, _ended(call, ToolStatus.CRASHED, _why_down(message)))
        call.state = _State.DONE
        self._advance(call.batch)

    # -- timers --------------------------------------------------------------------------------------

    @handles(_PermissionExpired)
    def _on_permission_expired(self, message: _PermissionExpired) -> None:
        call = self._call(message.serial, message.index)
        if call is None or call.state is not _State.ASKING:
            return
        call.timer = None
        reason = f"no answer within {self._settings.permission_timeout:g} s"
        self._settle(call, denied_outcome(call.call_id, call.tool_name, reason))
        self._advance(call.batch)

    @handles(_StartOverdue)
    def _on_start_overdue(self, message: _StartOverdue) -> None:
        call = self._call(message.serial, message.index)
        if call is None or call.state is not _State.STARTING:
            return
        call.timer = None
        if call.outcome is None:
            reason = f"the tool crashed: it did not start within {self._settings.start_timeout:g} s"
            self._settle(call, _ended(call, ToolStatus.CRASHED, reason))
        call.state = _State.DONE
        self._end_call(call)
        self._advance(call.batch)

    @handles(_GraceOver)
    def _on_grace_over(self, message: _GraceOver) -> None:
        batch = self._batches.get(message.serial)
        if batch is None or batch.reported:
            return
        batch.grace = None
        for call in batch.calls:
            if call.outcome is None:
                call.outcome = _ended(call, ToolStatus.ABORTED, ABORTED_CONTENT)
        self._advance(batch)

    @handles(_KillDue)
    def _on_kill_due(self, message: _KillDue) -> None:
        batch = self._batches.get(message.serial)
        if batch is None:
            return
        batch.kill = None
        for call in batch.calls:
            if call.actor is not None:
                self._end_call(call)

    # -- the batch -----------------------------------------------------------------------------------

    def _advance(self, batch: _Batch) -> None:
        """Start the next group once the current one has ended; report and forget the batch when done."""
        while not batch.aborted and batch.groups and all(c.outcome is not None for c in batch.current):
            batch.current = batch.groups.popleft()
            for call in batch.current:
                self._check(call)
        if not batch.reported and all(call.outcome is not None for call in batch.calls):
            batch.reported = True
            _cancel(batch.grace)
            batch.grace = None
            outcomes = tuple(call.outcome for call in batch.calls if call.outcome is not None)
            batch.reply_to.tell(ToolsFinished(batch.batch_id, outcomes))
        if batch.reported and all(call.actor is None for call in batch.calls):
            _cancel(batch.kill)
            self._batches.pop(batch.serial, None)

    def _check(self, call: _Call) -> None:
        assert call.tool is not None
        try:
            decision = self._policy.check(call.tool.name, call.args)
        except Exception as exc:
            logger.exception("call %s: the permission check raised", call.call_id)
            decision = Decision("deny", f"the permission check failed: {type(exc).__name__}: {exc}")
        if decision.action == "allow":
            self._start(call)
        elif decision.action == "deny":
            self._settle(call, denied_outcome(call.call_id, call.tool.name, decision.reason))
        else:
            call.state = _State.ASKING
            batch = call.batch
            arguments = call.invocation.arguments
            if self._redact is not None:
                arguments = self._redact(arguments)
            request = PermissionRequested(call.call_id, call.tool.name, arguments, decision.reason)
            batch.reply_to.tell(request)
            call.timer = self._later(
                self._settings.permission_timeout, _PermissionExpired(batch.serial, call.index)
            )

    def _start(self, call: _Call) -> None:
        assert call.tool is not None and call.args is not None
        batch = call.batch
        name = self._child_name(call.call_id)
        factory = functools.partial(
            ToolActor,
            call.tool,
            call.args,
            batch_id=batch.batch_id,
            call_id=call.call_id,
            workspace=self._workspace,
            supervisor=self.address,
            limits=self._settings.limits,
        )
        spec = ChildSpec(
            name,
            factory,
            restart=Restart.TEMPORARY,
            shutdown_timeout=_TOOL_ACTOR_SHUTDOWN,
            chaos=self._tool_chaos,
        )
        try:
            address = self._add(spec)
        except (ChildStartError, ValueError) as exc:
            self._settle(
                call, _ended(call, ToolStatus.CRASHED, f"the tool crashed: it could not start: {exc}")
            )
            return
        self.system.watch(address, self.address)
        call.child, call.actor = name, address
        call.state = _State.STARTING
        call.started_at = time.monotonic()
        self._by_actor[address.name] = call
        address.tell(RunCall(call.call_id))
        call.timer = self._later(self._settings.start_timeout, _StartOverdue(batch.serial, call.index))

    def _end_call(self, call: _Call) -> None:
        """End the call's ToolActor now: its job is cancelled (a process group killed) and it stops."""
        actor = call.actor
        if actor is None:
            return
        batch = call.batch
        if call.state is not _State.DONE and call.tool is not None and call.tool.kind is ToolKind.THREAD:
            batch.reply_to.tell(
                ToolAbandoned(batch.batch_id, call.call_id, call.tool_name, _ABANDONED_REASON)
            )
        call.state = _State.DONE
        actor.tell(KillCall(call.call_id))
        # Stopping runs the actor's on_stop, which cancels the job even if the KillCall never arrives.
        self.address.tell(StopChild(call.child))

    def _settle(self, call: _Call, outcome: ToolOutcome) -> None:
        if self._redact is not None:
            outcome = msgspec.structs.replace(outcome, content=self._redact(outcome.content))
        call.outcome = outcome
        if call.actor is None:
            call.state = _State.DONE

    def _report_all(self, status: ToolStatus, content: str) -> None:
        """Give every unfinished call of every batch an outcome and tell each batch's `ToolsFinished`."""
        batches, self._batches = list(self._batches.values()), {}
        self._by_actor.clear()
        for batch in batches:
            _cancel(batch.grace)
            _cancel(batch.kill)
            for call in batch.calls:
                self._cancel_timer(call)
                call.actor = None
            if batch.reported:
                continue
            batch.reported = True
            outcomes = tuple(call.outcome or _ended(call, status, content) for call in batch.calls)
            batch.reply_to.tell(ToolsFinished(batch.batch_id, outcomes))

    def _unwatch_all(self) -> None:
        for name in list(self._by_actor):
            self.system.unwatch(self.system.address(name), self.address)

    # -- lookups and helpers -------------------------------------------------------------------------

    def _open_batch(self, batch_id: str) -> _Batch | None:
        return next((b for b in self._batches.values() if b.batch_id == batch_id and not b.reported), None)

    def _asking(self, call_id: str) -> _Call | None:
        for batch in self._batches.values():
            for call in batch.current:
                if call.call_id == call_id and call.state is _State.ASKING:
                    return call
        return None

    def _call(self, serial: int, index: int) -> _Call | None:
        batch = self._batches.get(serial)
        return batch.calls[index] if batch is not None else None

    def _child_name(self, call_id: str) -> str:
        base = "call-" + (_UNSAFE_NAME.sub("_", call_id)[:64] or "_")
        name, number = base, 1
        while name in self._names:
            number += 1
            name = f"{base}-{number}"
        self._names.add(name)
        return name

    def _later(self, delay: float, message: Any) -> Job:
        return self.io.call_later(
            delay, functools.partial(self.address.tell, message), name=type(message).__name__
        )

    def _cancel_timer(self, call: _Call) -> None:
        _cancel(call.timer)
        call.timer = None


def _groups(calls: Iterable[_Call]) -> deque[list[_Call]]:
    """Consecutive parallel-safe calls form one group; every other call is a group of its own."""
    groups: deque[list[_Call]] = deque()
    joinable = False
    for call in calls:
        parallel = call.tool is not None and call.tool.parallel_safe
        if parallel and joinable:
            groups[-1].append(call)
        else:
            groups.append([call])
        joinable = parallel
    return groups


def _ended(call: _Call, status: ToolStatus, content: str) -> ToolOutcome:
    """The outcome of a call that did not report one itself."""
    started = call.started_at
    return ToolOutcome(
        call_id=call.call_id,
        tool=call.tool_name,
        content=content,
        is_error=True,
        status=status,
        interrupted=started is not None,
        duration=0.0 if started is None else time.monotonic() - started,
    )


def _why_down(message: Down) -> str:
    if message.reason is ExitReason.CRASHED:
        return f"the tool crashed: {message.error}"
    if message.reason is ExitReason.KILLED:
        return "the tool crashed: its actor did not stop in time and was killed"
    return "the tool crashed: its actor stopped before reporting an outcome"


def _cancel(job: Job | None) -> None:
    if job is not None:
        job.cancel()
