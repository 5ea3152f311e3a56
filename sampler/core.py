"""One sampling step on trio: stream a model call, absorb what a retry or a re-shaped request can fix."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import msgspec
import trio

from ._coalescing import Coalescer
from ._groups import is_cancellation
from ._http_head import HeadError, RequestHead
from ._sse import SseParser
from ._transport import StreamedResponse, TrioTransport
from .errors import LlmError, LlmErrorKind, classify_exception, classify_http_error, classify_stream_error
from .events import (
    Cancelled,
    Completed,
    Failed,
    Outcome,
    Projection,
    SamplerEvent,
    StepProjectionFallback,
    StepQueued,
    StepRetrying,
)
from .gate import GateClient, GateTimeout, QueueInfo
from .messages import AssistantMessage, FinishReason, ModelRequest, Usage, media_parts_count
from .projection import degrade_media, strict_structure, strip_media
from .providers import (
    AssistantResult,
    ProviderName,
    StreamDecodeError,
    StreamDecoder,
    StreamError,
    StreamReasoning,
    StreamText,
    decode_whole,
    endpoint_url,
    get_adapter,
)
from .retry import RetryPolicy, decide

__all__ = ["FILTERED_MESSAGE", "ProjectionMemory", "SamplerSettings", "sample_step"]

FILTERED_MESSAGE = "The provider's content filter stopped the answer (finish reason content_filter)."
"""The message of a stream that ended with finish reason ``content_filter``: the provider said no more."""
_MAX_ERROR_BODY = 64 * 1024
_MAX_WHOLE_BODY = 16 * 1024 * 1024
_SHOWN = 300


class SamplerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where and how to call the model. Nothing here is secret: keys come from a credential callable."""

    base_url: str
    provider: ProviderName = "openai"
    headers: dict[str, str] = {}
    connect_timeout: float = 10.0
    write_timeout: float = 30.0
    idle_timeout: float = 120.0
    """Longest silence between two chunks of a streamed response before the attempt counts as timed out."""
    coalesce_interval: float = 0.05
    """Deltas are forwarded at most this often (the first one at once)."""
    policy: RetryPolicy = RetryPolicy()

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "write_timeout", "idle_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SamplerSettings.{name} must be > 0, got {getattr(self, name)!r}")
        if self.coalesce_interval < 0:
            raise ValueError(
                f"SamplerSettings.coalesce_interval must be >= 0, got {self.coalesce_interval!r}"
            )


@dataclass
class ProjectionMemory:
    """How degraded the requests of one turn are; a turn's next step starts where the last one ended."""

    media: int = 0
    """0 full media, 1 degraded to the newest two, 2 stripped."""
    strict: bool = False

    def project(self, request: ModelRequest) -> ModelRequest:
        """``request`` as the provider should see it now."""
        if self.media == 1:
            request = degrade_media(request)
        elif self.media == 2:
            request = strip_media(request)
        if self.strict:
            request = strict_structure(request)
        return request

    def fall_back(self, error: LlmError, request: ModelRequest) -> Projection | None:
        """The next projection to try for a shape error, or ``None`` when none is left that changes the
        request."""
        media = media_parts_count(request)
        if error.kind is LlmErrorKind.REQUEST_TOO_LARGE and self.media == 0 and media > 2:
            self.media = 1
            return Projection.DEGRADED_MEDIA
        shape = error.kind in (LlmErrorKind.REQUEST_TOO_LARGE, LlmErrorKind.IMAGE_FORMAT)
        if shape and self.media < 2 and media > 0:
            self.media = 2
            return Projection.STRIPPED_MEDIA
        if error.kind is LlmErrorKind.REQUEST_STRUCTURE and not self.strict:
            before = self.project(request)
            self.strict = True
            if strict_structure(before) is not before:
                return Projection.STRICT_STRUCTURE
        return None


@dataclass
class _Attempt:
    decoder: StreamDecoder | None = None
    streamed: bool = False
    pending: list[str] = field(default_factory=list)
    status: int | None = None
    headers: Mapping[str, str] | None = None


async def sample_step(
    request: ModelRequest,
    *,
    request_id: str,
    client: httpx.AsyncClient,
    settings: SamplerSettings,
    emit: Callable[[SamplerEvent], None],
    api_key: Callable[[], str | None] = lambda: None,
    rng: random.Random | None = None,
    memory: ProjectionMemory | None = None,
    gate: GateClient | None = None,
    traceparent: str | None = None,
    transport: TrioTransport | None = None,
) -> Outcome:
    """Run one step to its end and return (and emit) exactly one of Completed, Failed or Cancelled.

    Transient failures are retried under ``settings.policy`` with a :class:`StepRetrying` notice each;
    request-shape failures are re-sent with a degraded projection (:class:`StepProjectionFallback`) without
    spending attempts; deltas are emitted coalesced. Cancelling the surrounding trio scope ends the step at
    once — also during a back-off — after emitting :class:`Cancelled` with what had streamed.

    With a ``gate``, every attempt first waits for the host's provider gate (emitting :class:`StepQueued`
    when the wait is long; waiting spends no attempt) and reports its answer to it; a wait past the gate's
    deadline fails the step with kind ``rate_limit``. A ``traceparent`` (W3C trace context) goes on every
    attempt's request as its header of that name.

    With a ``transport`` (the :class:`~sampler._transport.TrioTransport` that ``client`` sends through),
    each request goes straight to it, past the client's layers (cookies, redirects, auth flows, hooks and
    default headers): the same request on the same connections, with less work per request.
    """
    rng = rng or random.Random()
    policy = settings.policy
    step = _Step(
        request,
        request_id,
        client,
        settings,
        emit,
        api_key,
        memory or ProjectionMemory(),
        gate,
        transport,
        () if traceparent is None else (("traceparent", traceparent),),
    )
    try:
        while True:
            step.attempt += 1
            ended = await _attempt_in_every_shape(step)
            if not isinstance(ended, LlmError):
                emit(ended)
                return ended
            decision = decide(ended, step.attempt, policy, rng)
            if not decision.retry:
                failed = Failed(
                    request_id,
                    _with_projections(decision.error, step.projections),
                    step.attempt,
                    _usage(step.current),
                )
                emit(failed)
                return failed
            emit(_retrying(step, ended, decision.delay))
            step.current = _Attempt()
            await trio.sleep(decision.delay)
    except BaseException as exc:
        # A nursery below (a connection's happy eyeballs) may raise the cancel as a group of Cancelled.
        if not is_cancellation(exc):
            raise
        decoder = step.current.decoder
        partial = decoder.partial() if decoder is not None else AssistantMessage(interrupted=True)
        emit(Cancelled(request_id, partial, step.attempt, _usage(step.current)))
        raise


@dataclass
class _Step:
    """One step as its attempts share it: what it sends where, and how far it has come."""

    request: ModelRequest
    request_id: str
    client: httpx.AsyncClient
    settings: SamplerSettings
    emit: Callable[[SamplerEvent], None]
    api_key: Callable[[], str | None]
    memory: ProjectionMemory
    gate: GateClient | None
    transport: TrioTransport | None = None
    extra_headers: tuple[tuple[str, str], ...] = ()
    """Headers of this step alone (its trace context), sent after the settings' own."""
    attempt: int = 0
    """The attempt under way, counted from 1; a re-shaped request is the same attempt."""
    current: _Attempt = field(default_factory=_Attempt)
    projections: list[Projection] = field(default_factory=list)
    """The re-shapings tried so far, in order."""
    leases: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


async def _attempt_in_every_shape(step: _Step) -> Completed | Failed | LlmError:
    """Make the step's current attempt, re-sent in each re-shaping its memory allows while the provider
    rejects the request's shape (emitting :class:`StepProjectionFallback` for each): the step's
    :class:`Completed`, its :class:`Failed` when the gate made it wait past its deadline (neither emitted
    yet), or the error that ended the attempt."""
    while True:
        step.current = _Attempt()
        body = get_adapter(step.settings.provider).encode_request(step.memory.project(step.request))
        result = await _gated_attempt(step, body)
        if isinstance(result, Failed):
            return result
        error = _judge(result) if isinstance(result, AssistantResult) else result
        if error is None:
            assert isinstance(result, AssistantResult)
            return Completed(
                step.request_id,
                result.message,
                result.usage,
                result.finish_reason,
                step.attempt,
                tuple(step.projections),
                result.model,
            )
        fallback = step.memory.fall_back(error, step.request)
        if fallback is None:
            return error
        step.projections.append(fallback)
        step.emit(StepProjectionFallback(step.request_id, fallback, error.kind, _usage(step.current)))


async def _gated_attempt(step: _Step, body: bytes) -> AssistantResult | LlmError | Failed:
    """Send ``body`` once, through the provider gate when the step has one (and tell the gate how it was
    answered); a wait past the gate's deadline is the step's :class:`Failed`, not emitted yet."""
    if step.gate is None:
        return await _one_attempt(body, step, step.api_key())
    lease = f"{step.request_id}#{next(step.leases)}"
    try:
        await step.gate.acquire(lease, _rough_tokens(body), _report_queue(step.request_id, step.emit))
    except GateTimeout as waited:
        return Failed(step.request_id, LlmError(LlmErrorKind.RATE_LIMIT, message=str(waited)), step.attempt)
    try:
        return await _one_attempt(body, step, step.api_key())
    finally:
        step.gate.release(lease, step.current.status, step.current.headers)


def _retrying(step: _Step, error: LlmError, delay: float) -> StepRetrying:
    """The notice that the step's attempt failed with ``error`` and the next starts after ``delay``."""
    return StepRetrying(
        request_id=step.request_id,
        attempt=step.attempt,
        max_attempts=step.settings.policy.max_attempts,
        delay=delay,
        kind=error.kind,
        status=error.status,
        message=error.message,
        discard_partial=step.current.streamed,
        usage=_usage(step.current),
    )


def _with_projections(error: LlmError, projections: list[Projection]) -> LlmError:
    """``error`` saying which re-shaped requests were tried before it, if any were."""
    if not projections:
        return error
    tried = ", ".join(dict.fromkeys(str(p) for p in projections))
    return msgspec.structs.replace(error, message=f"{error.message} (also rejected when re-sent as: {tried})")


def _usage(attempt: _Attempt) -> Usage | None:
    """The usage the provider reported in the attempt's stream so far, if any."""
    return attempt.decoder.finish().usage if attempt.decoder is not None else None


def _rough_tokens(body: bytes) -> int:
    """A quick estimate of a request's input tokens for the gate's token budgets (about 4 bytes each)."""
    return len(body) // 4


def _report_queue(request_id: str, emit: Callable[[SamplerEvent], None]) -> Callable[[QueueInfo], None]:
    def report(info: QueueInfo) -> None:
        emit(StepQueued(request_id, info.place, info.reason.value, info.expected_wait))

    return report


def _judge(result: AssistantResult) -> LlmError | None:
    """The error a finished stream amounts to, or ``None`` when it is a usable answer."""
    if result.finish_reason is FinishReason.CONTENT_FILTER:
        return LlmError(LlmErrorKind.PROVIDER, message=FILTERED_MESSAGE, code="content_filter", filtered=True)
    if not result.produced:
        return LlmError(LlmErrorKind.EMPTY_RESPONSE, message="the model returned nothing")
    return None


async def _one_attempt(body: bytes, step: _Step, api_key: str | None) -> AssistantResult | LlmError:
    settings, attempt, request_id = step.settings, step.current, step.request_id
    adapter = get_adapter(settings.provider)
    url = endpoint_url(settings.base_url, adapter.path)
    headers = {**adapter.headers(api_key), **settings.headers}
    # Reads are bounded by the watchdog below (no data for ``idle_timeout``), not per read: one deadline
    # moved forward per chunk costs less than a cancel scope around every read.
    timeout = httpx.Timeout(
        connect=settings.connect_timeout,
        read=None,
        write=settings.write_timeout,
        pool=settings.connect_timeout,
    )
    idle = settings.idle_timeout
    interval = settings.coalesce_interval
    error: LlmError | None = None
    try:
        with trio.CancelScope(deadline=trio.current_time() + settings.connect_timeout + idle) as watchdog:
            async with _post(step, url, body, headers, timeout) as response:
                attempt.status, attempt.headers = response.status_code, response.headers
                if response.status_code != 200:
                    body = await _read_bounded(response, watchdog, idle)
                    return classify_http_error(response.status_code, body, response.headers)
                content_type = response.headers.get("content-type", "")
                if content_type and "text/event-stream" not in content_type.lower():
                    body = await _read_bounded(response, watchdog, idle, _MAX_WHOLE_BODY)
                    return _whole_answer(body, content_type, adapter.new_decoder())
                decoder = attempt.decoder = adapter.new_decoder()
                coalescer = Coalescer(step.emit, request_id, interval, attempt)
                try:
                    error = await _read_stream(response, decoder, coalescer, watchdog, idle)
                    if error is not None:
                        return error
                    coalescer.flush()
                finally:
                    coalescer.close()
                result = decoder.finish()
        if watchdog.cancelled_caught:
            return LlmError(LlmErrorKind.TIMEOUT, message=f"no data from the provider for {idle:g} s")
    except (httpx.HTTPError, OSError, StreamDecodeError) as exc:
        return classify_exception(exc)
    if not result.complete:
        if result.produced:
            return LlmError(LlmErrorKind.CONNECTION, message="the stream ended before the provider finished")
        return LlmError(LlmErrorKind.EMPTY_RESPONSE, message="the stream ended without any output")
    return result


@asynccontextmanager
async def _post(
    step: _Step, url: str, body: bytes, headers: dict[str, str], timeout: httpx.Timeout
) -> AsyncIterator[httpx.Response | StreamedResponse]:
    """The response to POSTing ``body`` to ``url``, as its head arrives; its body is closed on exit.

    Through the step's transport when it has one: the request head is built and checked once per URL
    and headers, and only its length and the step's own headers are added per request."""
    transport = step.transport
    if transport is None:
        headers.update(step.extra_headers)
        async with step.client.stream(
            "POST", url, content=body, headers=headers, timeout=timeout
        ) as response:
            yield response
        return
    try:
        head = _request_head(url, tuple(headers.items()))
    except HeadError as exc:
        raise httpx.LocalProtocolError(str(exc)) from exc
    answer = await transport.post(
        head,
        body,
        extra_headers=step.extra_headers,
        connect_timeout=timeout.connect,
        write_timeout=timeout.write,
    )
    try:
        yield answer
    finally:
        await answer.aclose()


@functools.lru_cache(maxsize=64)
def _request_head(url: str, headers: tuple[tuple[str, str], ...]) -> RequestHead:
    return RequestHead.build("POST", url, headers)


async def _read_stream(
    response: httpx.Response | StreamedResponse,
    decoder: StreamDecoder,
    coalescer: Coalescer,
    watchdog: trio.CancelScope,
    idle: float,
) -> LlmError | None:
    """Feed the stream to the decoder; an error event inside it is returned, classified."""
    parser = SseParser()
    async for chunk in response.aiter_bytes():
        now = trio.current_time()
        watchdog.deadline = now + idle
        for sse in parser.feed(chunk):
            for event in decoder.feed(sse):
                if type(event) is StreamText:
                    coalescer.pending.append(event.text)
                elif type(event) is StreamReasoning:
                    coalescer.thoughts.append(event.text)
                elif type(event) is StreamError:
                    return classify_stream_error(event.data, event.event)
        coalescer.chunk_done(now)
    for sse in parser.close():
        for event in decoder.feed(sse):
            if type(event) is StreamText:
                coalescer.pending.append(event.text)
            elif type(event) is StreamReasoning:
                coalescer.thoughts.append(event.text)
            elif type(event) is StreamError:
                return classify_stream_error(event.data, event.event)
    return None


async def _read_bounded(
    response: httpx.Response | StreamedResponse,
    watchdog: trio.CancelScope,
    idle: float,
    limit: int = _MAX_ERROR_BODY,
) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        watchdog.deadline = trio.current_time() + idle
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def _whole_answer(body: bytes, content_type: str, decoder: StreamDecoder) -> AssistantResult | LlmError:
    """A 200 that is not an event stream: the complete answer it holds, the error it reports, an event
    stream mislabelled, or — when it is none of these — a failure quoting what arrived (never retried)."""
    result = decode_whole(body)
    if result is not None:
        return result
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("{") and '"error"' in text:
        error = classify_stream_error(text)
        if error.kind is LlmErrorKind.UNKNOWN:
            return msgspec.structs.replace(error, kind=LlmErrorKind.PROVIDER, status=200)
        return error
    if text.startswith(("data:", "event:")):
        parser = SseParser()
        for sse in [*parser.feed(body), *parser.close()]:
            for event in decoder.feed(sse):
                if type(event) is StreamError:
                    return classify_stream_error(event.data, event.event)
        return decoder.finish()
    shown = text[:_SHOWN] + ("..." if len(text) > _SHOWN else "")
    return LlmError(
        LlmErrorKind.PROVIDER,
        status=200,
        message=f"the provider answered a streamed request with {content_type}, neither an event stream nor "
        f"a complete answer: {shown or '(empty body)'}",
        code="not_an_event_stream",
    )
