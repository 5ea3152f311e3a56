"""SamplerActor: one LLM request at a time per session, run on the IoLoop, reported by messages."""

from __future__ import annotations

import enum
import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import msgspec

from actors import Actor, Job, JobFailed, handles

from ._transport import TrioTransport, proxy_configured
from .core import ProjectionMemory, SamplerSettings, sample_step
from .errors import LlmError, LlmErrorKind
from .events import Cancelled, Failed
from .gate import GateClient
from .messages import AssistantMessage, ModelRequest

__all__ = [
    "CancelSample",
    "ForgetTurn",
    "Sample",
    "SamplerActor",
    "SamplerRuntime",
    "StepState",
    "StepStatus",
    "http_client",
]

logger = logging.getLogger("turnkeep.sampler")


def http_client(settings: SamplerSettings, transport: TrioTransport | None = None) -> httpx.AsyncClient:
    """A new HTTP client for the sampler's requests to ``settings.base_url``: HTTP/1.1 over trio through
    :class:`~sampler._transport.TrioTransport` (``transport``, or a new one: the leanest path to the first
    token), or httpx's own transport when the environment configures a proxy for that URL. Use it on trio
    only."""
    if proxy_configured(settings.base_url):
        return httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=4))
    return httpx.AsyncClient(transport=transport or TrioTransport(max_keepalive_connections=4))


class Sample(msgspec.Struct, frozen=True, tag=True):
    """Run one step: stream ``request`` and tell every event to the actor at ``reply_to``."""

    request_id: str
    turn: str
    """Steps of the same turn share their projection memory."""
    request: ModelRequest
    reply_to: str
    traceparent: str | None = None
    """The W3C trace context of the model call (its span), sent to the provider as the ``traceparent``
    header; None when the host does not trace its turns."""


class CancelSample(msgspec.Struct, frozen=True, tag=True):
    """End the step ``request_id`` now; it reports ``Cancelled`` with what had streamed."""

    request_id: str


class ForgetTurn(msgspec.Struct, frozen=True, tag=True):
    """The turn is over: forget how its requests were degraded."""

    turn: str


class StepStatus(msgspec.Struct, frozen=True, tag=True):
    """Ask where the step ``request_id`` is; the answer is a :class:`StepState`."""

    request_id: str


class StepState(enum.StrEnum):
    """Where a step is, as its SamplerActor knows it."""

    QUEUED = "queued"
    RUNNING = "running"
    UNKNOWN = "unknown"
    """Never sent to this sampler, or ended: its outcome has been told to its ``reply_to``."""


class _StepDone(msgspec.Struct, frozen=True, tag=True):
    request_id: str


_UNSEEDED = random.Random()
"""The back-off jitter of every unseeded runtime: one generator, not one per session."""


@dataclass(eq=False)
class SamplerRuntime:
    """The sampler's state that outlives any one incarnation of its actor: the HTTP client, the running
    step, the queue and each turn's projection memory. Create one per session and capture it in the
    actor's factory."""

    settings: SamplerSettings
    api_key: Callable[[], str | None] = lambda: None
    seed: int | None = None
    rng: random.Random = field(init=False)
    running: dict[str, tuple[Sample, Job]] = field(default_factory=dict)
    queue: deque[Sample] = field(default_factory=deque)
    memories: dict[str, ProjectionMemory] = field(default_factory=dict)
    gate: GateClient | None = None
    """The host's provider gate, when it has one: every attempt passes through it."""
    _client: httpx.AsyncClient | None = None
    _transport: TrioTransport | None = None
    _lean: TrioTransport | None = None

    def __post_init__(self) -> None:
        self.rng = _UNSEEDED if self.seed is None else random.Random(self.seed)

    def client(self) -> httpx.AsyncClient:
        """The HTTP client; created on first use, on the IoLoop."""
        if self._client is None:
            self._transport = TrioTransport(max_keepalive_connections=4)
            self._client = http_client(self.settings, self._transport)
            self._lean = None if proxy_configured(self.settings.base_url) else self._transport
        return self._client

    def lean_transport(self) -> TrioTransport | None:
        """The transport :meth:`client` sends through when a request may go to it directly (no proxy)."""
        self.client()
        return self._lean

    def discard(self) -> None:
        """Close the client's pooled connections at once, from any thread: for a sampler whose last
        incarnation could not close them (it crashed, or the trio loop has ended). A later step makes a
        new client."""
        transport, self._transport, self._client, self._lean = self._transport, None, None, None
        if transport is not None:
            transport.close_idle_now()

    def describe(self) -> str:
        """A one-line account of the steps running and queued, for diagnostics."""
        running = ", ".join(
            f"{request_id} ({job.state})" for request_id, (_, job) in list(self.running.items())
        )
        queued = ", ".join(sample.request_id for sample in list(self.queue))
        return f"sampler running [{running}], queued [{queued}]"

    async def aclose(self) -> None:
        """Close the HTTP client, if one was made."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class SamplerActor(Actor):
    """Runs one step at a time (later ``Sample`` messages wait in order) and never loses one: every
    ``Sample`` ends with exactly one Completed, Failed or Cancelled told to its ``reply_to``, even when
    the step's job itself breaks or this actor is stopped."""

    def __init__(self, runtime: SamplerRuntime) -> None:
        super().__init__()
        self._runtime = runtime

    def on_start(self) -> None:
        self._next()

    def on_stop(self) -> None:
        runtime = self._runtime
        for _, job in list(runtime.running.values()):
            job.cancel()
        while runtime.queue:
            self._report_cancelled(runtime.queue.popleft())
        self.io.submit(runtime.aclose, name="sampler-close")

    @handles(Sample)
    def _on_sample(self, message: Sample) -> None:
        self._runtime.queue.append(message)
        self._next()

    @handles(CancelSample)
    def _on_cancel(self, message: CancelSample) -> None:
        runtime = self._runtime
        running = runtime.running.get(message.request_id)
        if running is not None:
            running[1].cancel()
            return
        for sample in list(runtime.queue):
            if sample.request_id == message.request_id:
                runtime.queue.remove(sample)
                self._report_cancelled(sample)

    @handles(StepStatus)
    def _on_step_status(self, message: StepStatus) -> StepState:
        runtime = self._runtime
        running = runtime.running.get(message.request_id)
        if running is not None:
            return StepState.UNKNOWN if running[1].done else StepState.RUNNING
        if any(sample.request_id == message.request_id for sample in runtime.queue):
            return StepState.QUEUED
        return StepState.UNKNOWN

    @handles(ForgetTurn)
    def _on_forget_turn(self, message: ForgetTurn) -> None:
        self._runtime.memories.pop(message.turn, None)

    @handles(_StepDone)
    def _on_step_done(self, message: _StepDone) -> None:
        self._runtime.running.pop(message.request_id, None)
        self._next()

    @handles(JobFailed)
    def _on_job_failed(self, message: JobFailed) -> None:
        # The step itself broke (a defect, not a provider failure): report it as a failure, never drop it.
        for request_id, (sample, job) in list(self._runtime.running.items()):
            if job.id == message.job_id:
                error = LlmError(LlmErrorKind.UNKNOWN, message=f"the sampler failed: {message.error!r}")
                self.system.address(sample.reply_to).tell(Failed(request_id, error, 0))
                self._runtime.running.pop(request_id, None)
        self._next()

    def _next(self) -> None:
        runtime = self._runtime
        for request_id, (_, job) in list(runtime.running.items()):
            if job.done:  # its _StepDone may have been lost with a crashed incarnation
                runtime.running.pop(request_id, None)
        if runtime.running or not runtime.queue:
            return
        sample = runtime.queue.popleft()
        job = self.io.submit(self._run, sample, name=f"sample:{sample.request_id}", owner=self.address)
        runtime.running[sample.request_id] = (sample, job)

    async def _run(self, sample: Sample) -> None:
        runtime = self._runtime
        reply = self.system.address(sample.reply_to)
        memory = runtime.memories.setdefault(sample.turn, ProjectionMemory())
        address = self.address
        try:
            await sample_step(
                sample.request,
                request_id=sample.request_id,
                client=runtime.client(),
                settings=runtime.settings,
                emit=reply.tell,
                api_key=runtime.api_key,
                rng=runtime.rng,
                memory=memory,
                gate=runtime.gate,
                traceparent=sample.traceparent,
                transport=runtime.lean_transport(),
            )
        finally:
            address.tell(_StepDone(sample.request_id))

    def _report_cancelled(self, sample: Sample) -> None:
        partial = AssistantMessage(interrupted=True)
        self.system.address(sample.reply_to).tell(Cancelled(sample.request_id, partial, 0))
