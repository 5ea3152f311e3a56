"""ToolActor: one tool call, run on the IoLoop, reported to its supervisor as one `CallFinished`."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec
import trio

from actors import Actor, Address, Job, JobFailed, handles
from tool_bridge._protocol import AbortCall, CallFinished, CallStarted, KillCall, RunCall
from tool_bridge.results import ToolOutcome, ToolStatus
from tool_bridge.tools import Tool, ToolContext, ToolKind, ToolLimits, run_tool

__all__ = ["ToolActor"]

_ABANDONING = frozenset({ToolStatus.ABORTED, ToolStatus.TIMED_OUT})


class _Ran(msgspec.Struct, frozen=True, tag=True):
    outcome: ToolOutcome


class ToolActor(Actor):
    """Owns one call of ``tool`` with the decoded ``args``.

    Guarantees: on `RunCall` the call starts as a job on the IoLoop and `CallStarted` is told to
    ``supervisor``; when the call ends, exactly one `CallFinished` is told to ``supervisor`` (a job that
    breaks is reported as a ``crashed`` outcome) and the actor stops itself. `AbortCall` sets the call's
    abort event (the soft stop: the tool ends early and keeps what it has). `KillCall`, stopping the
    actor, or its crash cancel the job (the hard kill: a process group is killed) and report nothing.

    Chaos crashes are injected by message type: `RunCall` (the tool never runs), `AbortCall`, `KillCall`,
    and the call's completion (its outcome is lost and the supervisor records ``crashed``).
    """

    def __init__(
        self,
        tool: Tool[Any],
        args: msgspec.Struct,
        *,
        batch_id: str,
        call_id: str,
        workspace: Path,
        supervisor: Address,
        limits: ToolLimits | None = None,
    ) -> None:
        super().__init__()
        self._tool = tool
        self._args = args
        self._batch_id = batch_id
        self._call_id = call_id
        self._supervisor = supervisor
        self._context = ToolContext(
            workspace=workspace, call_id=call_id, limits=limits or ToolLimits(), abort=trio.Event()
        )
        self._job: Job | None = None
        self._done = False

    def on_stop(self) -> None:
        self._cancel()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._cancel()

    @handles(RunCall)
    def _on_run(self, _: RunCall) -> None:
        if self._job is not None or self._done:
            return
        self._job = self.io.submit(
            self._run, self.address, name=f"tool:{self._tool.name}:{self._call_id}", owner=self.address
        )
        self._supervisor.tell(CallStarted(self.address.name, self._batch_id, self._call_id))

    @handles(AbortCall)
    def _on_abort(self, _: AbortCall) -> None:
        # The event belongs to the trio loop: it must be set from there.
        self.io.submit(_set_event, self._context.abort, name=f"abort:{self._call_id}")

    @handles(KillCall)
    def _on_kill(self, _: KillCall) -> None:
        self._done = True
        self._cancel()
        self.stop_self()

    @handles(_Ran)
    def _on_ran(self, message: _Ran) -> None:
        abandoned = self._tool.kind is ToolKind.THREAD and message.outcome.status in _ABANDONING
        self._report(message.outcome, abandoned=abandoned)

    @handles(JobFailed)
    def _on_job_failed(self, message: JobFailed) -> None:
        if self._job is None or message.job_id != self._job.id:
            return
        outcome = ToolOutcome(
            call_id=self._call_id,
            tool=self._tool.name,
            content=f"the tool crashed: {message.error!r}",
            is_error=True,
            status=ToolStatus.CRASHED,
            interrupted=True,
        )
        self._report(outcome, abandoned=False)

    async def _run(self, me: Address) -> None:
        outcome = await run_tool(self._tool, self._args, self._context)
        me.tell(_Ran(outcome))

    def _report(self, outcome: ToolOutcome, *, abandoned: bool) -> None:
        if self._done:
            return
        self._done = True
        self._supervisor.tell(
            CallFinished(self.address.name, self._batch_id, self._call_id, outcome, abandoned=abandoned)
        )
        self.stop_self()

    def _cancel(self) -> None:
        job = self._job
        if job is not None and not job.done:
            job.cancel()


async def _set_event(event: trio.Event) -> None:
    event.set()
