"""ToolSupervisor: runs the model's tool calls as supervised ToolActors; every batch ends in one
`ToolsFinished`, whatever its tools do."""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Callable
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
    Refuse,
    Restart,
    StopChild,
    Supervisor,
    Timer,
    handles,
)
from tool_bridge._batch import Batch, Call, CallState, ChildNames, cancel, ended, groups, why_down
from tool_bridge._protocol import (
    AbortCall,
    CallFinished,
    CallStarted,
    GraceOver,
    KillCall,
    KillDue,
    PermissionExpired,
    RunCall,
    StartOverdue,
)
from tool_bridge.actor import ToolActor
from tool_bridge.messages import (
    AbortTools,
    RunTools,
    ToolAbandoned,
    ToolCallBegan,
    ToolCallEnded,
    ToolsFinished,
)
from tool_bridge.permissions import (
    Decision,
    PermissionConfigError,
    PermissionDecision,
    PermissionPolicy,
    PermissionRequested,
    SetPermissionMode,
    denied_outcome,
)
from tool_bridge.results import ToolOutcome, ToolResultError, ToolStatus
from tool_bridge.settings import ToolBridgeSettings
from tool_bridge.tools import ToolKind, ToolRegistry

__all__ = ["ABORTED_CONTENT", "SHUTDOWN_CONTENT", "ToolSupervisor"]

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
      have ended; `ToolCallBegan` is told when a call's tool starts and `ToolCallEnded` as soon as a call
      has its outcome, while the batch is not yet reported;
    * a ToolActor that crashes (or cannot start) gives a ``crashed`` outcome and the batch goes on;
    * `AbortTools`: calls not started are ``aborted`` at once, running calls are asked to stop and keep the
      outcome they report within ``settings.abort_grace``; `ToolsFinished` is told then (or as soon as
      every call has ended); at ``settings.kill_after`` whatever still runs is killed (job cancelled,
      process group killed, ToolActor stopped); a thread tool left running is reported by `ToolAbandoned`;
    * when stopped, every ToolActor is stopped and every tool process killed;
    * a call's ToolActor address is dropped from the actor system once the actor is gone (a long-running
      session keeps no address per call it ever ran).

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
        self._batches: dict[int, Batch] = {}
        self._by_actor: dict[str, Call] = {}
        self._names = ChildNames()

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
            self.stop_children()
            self._report_all(ToolStatus.CRASHED, f"the tool supervisor crashed: {exception_value!r}")
        except Exception:
            logger.exception("%s: could not report its batches after a crash", self.address.name)

    # -- from the session ----------------------------------------------------------------------------

    @handles(RunTools)
    def _on_run_tools(self, message: RunTools) -> None:
        if self._open_batch(message.batch_id) is not None:
            raise Refuse(ValueError(f"batch {message.batch_id!r} is already running"))
        batch = Batch(next(self._serials), message.batch_id, self.system.address(message.reply_to))
        batch.calls = [Call(batch, index, invocation) for index, invocation in enumerate(message.calls)]
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
        batch.groups = groups(call for call in batch.calls if call.tool is not None)
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
            if call.state in (CallState.STARTING, CallState.RUNNING) and call.actor is not None:
                running = True
                call.actor.tell(AbortCall(call.call_id))
            else:
                self._cancel_timer(call)
                self._settle(call, ended(call, ToolStatus.ABORTED, ABORTED_CONTENT))
        if running:
            batch.grace = self._later(self._settings.abort_grace, GraceOver(batch.serial))
            batch.kill = self._later(self._settings.kill_after, KillDue(batch.serial))
        self._advance(batch)

    @handles(SetPermissionMode)
    def _on_permission_mode(self, message: SetPermissionMode) -> None:
        try:
            self._policy.set_mode(message.mode)
        except PermissionConfigError as exc:
            raise Refuse(exc) from exc

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
        if call is None or call.state is not CallState.STARTING:
            return
        self._cancel_timer(call)
        call.state = CallState.RUNNING
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
        call.state = CallState.DONE
        self._advance(batch)

    def on_child_gone(self, address: Address) -> None:
        # A call's actor never comes back (each call has a name of its own): its address is not kept.
        self.system.forget(address.name)

    @handles(Down)
    def _on_down(self, message: Down) -> None:
        call = self._by_actor.pop(message.address, None)
        if call is None:
            return
        self.system.unwatch(self.system.address(message.address), self.address)
        self.system.forget(message.address)  # if it is gone already (else on_child_gone forgets it)
        self._cancel_timer(call)
        call.actor = None
        if call.outcome is None:
            self._settle(call, ended(call, ToolStatus.CRASHED, why_down(message)))
        call.state = CallState.DONE
        self._advance(call.batch)

    # -- timers --------------------------------------------------------------------------------------

    @handles(PermissionExpired)
    def _on_permission_expired(self, message: PermissionExpired) -> None:
        call = self._call(message.serial, message.index)
        if call is None or call.state is not CallState.ASKING:
            return
        call.timer = None
        reason = f"no answer within {self._settings.permission_timeout:g} s"
        self._settle(call, denied_outcome(call.call_id, call.tool_name, reason))
        self._advance(call.batch)

    @handles(StartOverdue)
    def _on_start_overdue(self, message: StartOverdue) -> None:
        call = self._call(message.serial, message.index)
        if call is None or call.state is not CallState.STARTING:
            return
        call.timer = None
        if call.outcome is None:
            reason = f"the tool crashed: it did not start within {self._settings.start_timeout:g} s"
            self._settle(call, ended(call, ToolStatus.CRASHED, reason))
        call.state = CallState.DONE
        self._end_call(call)
        self._advance(call.batch)

    @handles(GraceOver)
    def _on_grace_over(self, message: GraceOver) -> None:
        batch = self._batches.get(message.serial)
        if batch is None or batch.reported:
            return
        batch.grace = None
        for call in batch.calls:
            if call.outcome is None:
                call.outcome = ended(call, ToolStatus.ABORTED, ABORTED_CONTENT)
        self._advance(batch)

    @handles(KillDue)
    def _on_kill_due(self, message: KillDue) -> None:
        batch = self._batches.get(message.serial)
        if batch is None:
            return
        batch.kill = None
        for call in batch.calls:
            if call.actor is not None:
                self._end_call(call)

    # -- the batch -----------------------------------------------------------------------------------

    def _advance(self, batch: Batch) -> None:
        """Start the next group once the current one has ended; report and forget the batch when done."""
        while not batch.aborted and batch.groups and all(c.outcome is not None for c in batch.current):
            batch.current = batch.groups.popleft()
            for call in batch.current:
                self._check(call)
        if not batch.reported and all(call.outcome is not None for call in batch.calls):
            batch.reported = True
            cancel(batch.grace)
            batch.grace = None
            outcomes = tuple(call.outcome for call in batch.calls if call.outcome is not None)
            batch.reply_to.tell(ToolsFinished(batch.batch_id, outcomes))
        if batch.reported and all(call.actor is None for call in batch.calls):
            cancel(batch.kill)
            self._batches.pop(batch.serial, None)

    def _check(self, call: Call) -> None:
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
            call.state = CallState.ASKING
            batch = call.batch
            arguments = call.invocation.arguments
            if self._redact is not None:
                arguments = self._redact(arguments)
            request = PermissionRequested(call.call_id, call.tool.name, arguments, decision.reason)
            batch.reply_to.tell(request)
            call.timer = self._later(
                self._settings.permission_timeout, PermissionExpired(batch.serial, call.index)
            )

    def _start(self, call: Call) -> None:
        assert call.tool is not None and call.args is not None
        batch = call.batch
        name = self._names.new(call.call_id)
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
            address = self.start_child(spec)
        except (ChildStartError, ValueError) as exc:
            self._settle(
                call, ended(call, ToolStatus.CRASHED, f"the tool crashed: it could not start: {exc}")
            )
            return
        self.system.watch(address, self.address)
        call.child, call.actor = name, address
        call.state = CallState.STARTING
        call.started_at = time.monotonic()
        self._by_actor[address.name] = call
        address.tell(RunCall(call.call_id))
        call.timer = self._later(self._settings.start_timeout, StartOverdue(batch.serial, call.index))

    def _end_call(self, call: Call) -> None:
        """End the call's ToolActor now: its job is cancelled (a process group killed) and it stops."""
        actor = call.actor
        if actor is None:
            return
        batch = call.batch
        if call.state is not CallState.DONE and call.tool is not None and call.tool.kind is ToolKind.THREAD:
            batch.reply_to.tell(
                ToolAbandoned(batch.batch_id, call.call_id, call.tool_name, _ABANDONED_REASON)
            )
        call.state = CallState.DONE
        actor.tell(KillCall(call.call_id))
        # Stopping runs the actor's on_stop, which cancels the job even if the KillCall never arrives.
        self.address.tell(StopChild(call.child))

    def _settle(self, call: Call, outcome: ToolOutcome) -> None:
        if self._redact is not None:
            outcome = msgspec.structs.replace(outcome, content=self._redact(outcome.content))
        call.outcome = outcome
        if call.actor is None:
            call.state = CallState.DONE
        batch = call.batch
        if not batch.reported:
            batch.reply_to.tell(ToolCallEnded(batch.batch_id, outcome))

    def _report_all(self, status: ToolStatus, content: str) -> None:
        """Give every unfinished call of every batch an outcome and tell each batch's `ToolsFinished`."""
        batches, self._batches = list(self._batches.values()), {}
        self._by_actor.clear()
        for batch in batches:
            cancel(batch.grace)
            cancel(batch.kill)
            for call in batch.calls:
                self._cancel_timer(call)
                call.actor = None
            if batch.reported:
                continue
            batch.reported = True
            outcomes = tuple(call.outcome or ended(call, status, content) for call in batch.calls)
            batch.reply_to.tell(ToolsFinished(batch.batch_id, outcomes))

    def _unwatch_all(self) -> None:
        for name in list(self._by_actor):
            self.system.unwatch(self.system.address(name), self.address)

    # -- lookups and helpers -------------------------------------------------------------------------

    def _open_batch(self, batch_id: str) -> Batch | None:
        return next((b for b in self._batches.values() if b.batch_id == batch_id and not b.reported), None)

    def _asking(self, call_id: str) -> Call | None:
        for batch in self._batches.values():
            for call in batch.current:
                if call.call_id == call_id and call.state is CallState.ASKING:
                    return call
        return None

    def _call(self, serial: int, index: int) -> Call | None:
        batch = self._batches.get(serial)
        return batch.calls[index] if batch is not None else None

    def _later(self, delay: float, message: Any) -> Timer:
        return self.io.call_later(
            delay, functools.partial(self.address.tell, message), name=type(message).__name__
        )

    def _cancel_timer(self, call: Call) -> None:
        cancel(call.timer)
        call.timer = None
