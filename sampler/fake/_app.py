"""The ASGI application: routes, checks, the script's answer, and the faults on its way out."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
from collections.abc import Mapping
from typing import Literal

import msgspec

from ._anthropic import AnthropicWire
from ._auth import TokenBook
from ._cache import PromptCache
from ._decide import FaultDecider
from ._http import (
    Receive,
    Scope,
    Send,
    credential,
    form_or_json,
    header,
    method_not_allowed,
    not_found,
    read_body,
    respond,
    stall,
    watch_disconnect,
)
from ._openai import OpenAIWire
from ._overflow import OverflowStyle, overflow_response
from ._ratelimit import RateLimit, RateLimiter, refusal
from ._reply import Reply, filtered, render
from ._stats import Rejection, StatsCounter
from ._strict import history_problem
from ._wire import BadRequest, Header, Meta, Parsed, Response, Wire, json_response, too_large_page
from .faults import STATUS_KINDS, Fault
from .script import Conversation, Script, Step, is_summary_request, script_directive, summarize

_OPENAI = OpenAIWire()
_ANTHROPIC = AnthropicWire()
_WIRES: dict[str, Wire] = {"/v1/chat/completions": _OPENAI, "/v1/messages": _ANTHROPIC}
_TOOL_ID_PREFIX = {"openai": "call_", "anthropic": "toolu_"}
_RESPONSE_ID_PREFIX = {"openai": "chatcmpl-fake", "anthropic": "msg_fake"}
_OVERFLOW_STYLE: dict[str, OverflowStyle] = {"openai": "openai", "anthropic": "anthropic"}
_SSE_HEADERS: tuple[Header, ...] = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
)
_TOKEN_BODY_LIMIT = 64 * 1024
# Sends between deliberate yields, so one long stream cannot starve the other connections, and a
# connection the client dropped is noticed (asyncio reports it only once the loop runs) before asyncio
# starts logging a warning per write (it does from the fifth write into a lost connection).
_YIELD_EVERY = 4


class ConnectionAbort(Exception):
    """Raised inside a response to end it unfinished, which makes the server drop the connection."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The provider's fixed behaviour (see `FakeProvider` for each field)."""

    model: str = "fake-model"
    chunk_chars: int = 4
    context_window: int | None = None
    overflow_style: OverflowStyle | None = None
    max_body_bytes: int | None = None
    too_large_style: Literal["html", "json"] = "html"
    max_images: int | None = None
    events_per_write: int = 1
    strict_history: bool = False
    alternate_roles: bool = False
    rate_limit: RateLimit | None = None


class UnknownScript(Exception):
    """A `[[script:NAME]]` directive names no registered script."""


class ScriptBook:
    """The default script and the named ones; registering is safe from any thread."""

    def __init__(self, default: Script, named: Mapping[str, Script]) -> None:
        self._default = default
        self._named = dict(named)
        self._lock = threading.Lock()

    def register(self, name: str, script: Script) -> None:
        with self._lock:
            self._named = {**self._named, name: script}

    def step(self, conversation: Conversation) -> Step:
        """The step for a conversation: a summary for compaction requests, else the selected script's."""
        if is_summary_request(conversation) and not self._default.summarizes:
            return summarize(conversation)
        name = script_directive(conversation)
        if name is None:
            return self._default.respond(conversation)
        script = self._named.get(name)
        if script is None:
            known = ", ".join(sorted(self._named)) or "none"
            raise UnknownScript(f"Unknown fake script {name!r} (registered: {known}).")
        return script.respond(conversation)


class ProviderApp:
    """The fake provider as an ASGI 3 application; runs on one event loop."""

    def __init__(
        self,
        settings: Settings,
        scripts: ScriptBook,
        faults: FaultDecider,
        tokens: TokenBook,
        stats: StatsCounter,
    ) -> None:
        self._settings = settings
        self._scripts = scripts
        self._faults = faults
        self._tokens = tokens
        self._stats = stats
        self._prompt_cache = PromptCache()
        self._sequence = 0
        self._closing = False
        self._active: set[asyncio.Event] = set()
        self._limiter = None if settings.rate_limit is None else RateLimiter(settings.rate_limit)

    def begin_close(self) -> None:
        """Wake every stalled or hanging response so it ends now; call on the app's event loop."""
        self._closing = True
        for gone in self._active:
            gone.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        method: str = scope["method"]
        wire = _WIRES.get(path)
        if wire is not None and method == "POST":
            await self._model_call(wire, scope, receive, send)
        elif path == "/oauth/token" and method == "POST":
            await self._token_grant(scope, receive, send)
        elif path == "/v1/models" and method == "GET":
            model = {"id": self._settings.model, "object": "model", "created": 0, "owned_by": "turnkeep"}
            await _drain_and_respond(receive, send, json_response(200, {"object": "list", "data": [model]}))
        elif wire is not None or path == "/oauth/token":
            await _drain_and_respond(receive, send, method_not_allowed(method, path))
        else:
            await _drain_and_respond(receive, send, not_found(method, path))

    async def _model_call(self, wire: Wire, scope: Scope, receive: Receive, send: Send) -> None:
        self._stats.request(wire.name)
        self._sequence += 1
        sequence = self._sequence
        request_id = (wire.request_id_header, f"req_fake{sequence:08d}".encode())
        read = await read_body(receive, self._settings.max_body_bytes)
        if read is None:
            self._stats.disconnect()
            return
        body, too_large = read
        if too_large:
            page = too_large_page() if self._settings.too_large_style == "html" else wire.too_large()
            await self._reject(send, "too_large", page, request_id)
            return
        token = credential(scope)
        verdict = self._tokens.admit(token)
        if verdict != "ok":
            await self._reject(send, "auth", wire.auth_error(verdict, token), request_id)
            return
        try:
            decoded = msgspec.json.decode(body)
            parsed = wire.parse(decoded)
        except msgspec.DecodeError:
            message = "We could not parse the JSON body of your request: it is not valid JSON."
            await self._reject(send, "bad_request", wire.bad_request(message), request_id)
            return
        except BadRequest as exc:
            await self._reject(send, "bad_request", wire.bad_request(str(exc)), request_id)
            return

        settings = self._settings
        problem = history_problem(wire.name, decoded, settings.strict_history, settings.alternate_roles)
        if problem is not None:
            await self._reject(send, "bad_request", wire.bad_request(problem), request_id)
            return
        limits: tuple[Header, ...] = ()
        if self._limiter is not None:
            admitted = self._limiter.admit(parsed.prompt_tokens)
            if not admitted.allowed:
                await self._reject(send, "rate_limit", refusal(wire.name, admitted), request_id)
                return
            limits = admitted.headers
        fault = self._faults.next(hashlib.blake2b(body, digest_size=16).digest())
        if fault is not None and fault.kind == "context_overflow":
            self._stats.fault(fault.kind)
            style = self._settings.overflow_style or _OVERFLOW_STYLE[wire.name]
            limit = min(self._settings.context_window or parsed.prompt_tokens, parsed.prompt_tokens)
            response = overflow_response(style, parsed.prompt_tokens, max(1, limit - 1))
            await respond(send, response, request_id)
            return
        if fault is not None and (fault.kind in STATUS_KINDS or fault.kind == "token_expired"):
            self._stats.fault(fault.kind)
            if fault.kind == "token_expired" and token is not None:
                self._tokens.expire(token)
                await respond(send, wire.auth_error("expired", token), request_id)
            else:
                await respond(send, wire.fault_response(fault), request_id)
            return

        if settings.max_images is not None and parsed.images > settings.max_images:
            await self._reject(send, "image", wire.image_rejected(), request_id)
            return
        window = settings.context_window
        if window is not None and parsed.prompt_tokens > window:
            style = settings.overflow_style or _OVERFLOW_STYLE[wire.name]
            await self._reject(
                send, "context_overflow", overflow_response(style, parsed.prompt_tokens, window), request_id
            )
            return
        try:
            step = self._scripts.step(parsed.conversation)
        except UnknownScript as exc:
            await self._reject(send, "unknown_script", wire.bad_request(str(exc)), request_id)
            return

        reply = render(
            step, parsed.conversation, chunk_chars=settings.chunk_chars, id_prefix=_TOOL_ID_PREFIX[wire.name]
        )
        if fault is not None:
            self._stats.fault(fault.kind)
            if fault.kind == "content_filter":
                reply = filtered(reply, fault.after_chunks)
        meta = msgspec.structs.replace(self._meta(wire, parsed, sequence), headers=limits)
        gone = asyncio.Event()
        watcher = asyncio.create_task(watch_disconnect(receive, gone))
        self._active.add(gone)
        try:
            # Returning from an unfinished response makes hypercorn close the connection without ending
            # the body (no last chunk) and log nothing; an exception would be logged as the app's error.
            with contextlib.suppress(ConnectionAbort):
                if parsed.stream and (fault is None or fault.kind != "whole_answer"):
                    await self._stream(send, wire, reply, meta, fault, gone, request_id)
                else:
                    await self._whole(send, wire, reply, meta, fault, gone, request_id)
        finally:
            self._active.discard(gone)
            watcher.cancel()

    async def _stream(
        self,
        send: Send,
        wire: Wire,
        reply: Reply,
        meta: Meta,
        fault: Fault | None,
        gone: asyncio.Event,
        request_id: Header,
    ) -> None:
        kind = fault.kind if fault is not None else None
        if fault is not None and kind == "empty":
            events = wire.empty_events(meta) if fault.with_done else []
            # Only Anthropic's empty stream still opens with the prompt's usage.
            usage = _reported(meta, _NOTHING) if events and wire.name == "anthropic" else None
        else:
            events = wire.events(reply, meta)
            usage = _reported(meta, reply)
        total = len(events)
        cut = -1
        if fault is not None and kind in ("reset", "stall", "stream_error"):
            cut = min(fault.after_chunks, total - 1)
        start = [*_SSE_HEADERS, request_id, *meta.headers]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        per_write = self._settings.events_per_write
        position = 0
        sends = 0
        while position < total:
            if position == cut and fault is not None:
                cut = -1
                if kind == "reset":
                    raise ConnectionAbort
                if kind == "stream_error":
                    await send({"type": "http.response.body", "body": wire.error_event(), "more_body": False})
                    return
                await stall(fault, gone)
                if gone.is_set():
                    self._gone()
                    return
            end = min(position + per_write, total)
            if position < cut < end:
                end = cut
            data = events[position] if end == position + 1 else b"".join(events[position:end])
            position = end
            if position == total:
                # Counted before the last write, so a client that has read the end also sees the count.
                self._stats.completed(usage)
            await send({"type": "http.response.body", "body": data, "more_body": position < total})
            if gone.is_set() and position < total:
                self._gone()
                return
            sends += 1
            if sends % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        if total == 0:
            self._stats.completed()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _whole(
        self,
        send: Send,
        wire: Wire,
        reply: Reply,
        meta: Meta,
        fault: Fault | None,
        gone: asyncio.Event,
        request_id: Header,
    ) -> None:
        kind = fault.kind if fault is not None else None
        if fault is not None and kind == "stall":
            await stall(fault, gone)
            if gone.is_set():
                self._gone()
                return
        if kind == "stream_error" and fault is not None:
            await respond(send, wire.fault_response(fault), request_id)
            return
        if fault is not None and kind == "empty":
            reply = _NOTHING
            body = wire.body(reply, meta) if fault.with_done else b""
        else:
            body = wire.body(reply, meta)
        if kind == "reset":
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": [*headers, request_id]})
            await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
            raise ConnectionAbort
        # A whole response always carries its usage, whatever the stream options said.
        self._stats.completed(
            (meta.prompt_tokens, meta.cached_tokens, reply.completion_tokens) if body else None
        )
        await respond(send, Response(200, body, headers=meta.headers), request_id)

    def _gone(self) -> None:
        if self._closing:
            raise ConnectionAbort
        self._stats.disconnect()

    def _meta(self, wire: Wire, parsed: Parsed, sequence: int) -> Meta:
        return Meta(
            response_id=f"{_RESPONSE_ID_PREFIX[wire.name]}{sequence:08d}",
            model=parsed.model or self._settings.model,
            created=int(time.time()),
            prompt_tokens=parsed.prompt_tokens,
            include_usage=parsed.include_usage,
            cached_tokens=min(self._prompt_cache.cached_tokens(parsed.prefixes), parsed.prompt_tokens),
        )

    async def _reject(self, send: Send, reason: Rejection, response: Response, request_id: Header) -> None:
        self._stats.rejection(reason)
        await respond(send, response, request_id)

    async def _token_grant(self, scope: Scope, receive: Receive, send: Send) -> None:
        read = await read_body(receive, _TOKEN_BODY_LIMIT)
        if read is None:
            return
        body, too_large = read
        fields = {} if too_large else form_or_json(body, header(scope, b"content-type") or "")
        grant_type = fields.get("grant_type")
        refresh_token = fields.get("refresh_token")
        if grant_type != "refresh_token":
            error = {
                "error": "unsupported_grant_type",
                "error_description": "Only refresh_token is supported.",
            }
            self._stats.token_grant(False)
            await respond(send, json_response(400, error))
            return
        grant = self._tokens.refresh(refresh_token) if refresh_token else None
        if grant is None:
            error = {
                "error": "invalid_grant",
                "error_description": "The refresh token is invalid or revoked.",
            }
            self._stats.token_grant(False)
            await respond(send, json_response(400, error))
            return
        self._stats.token_grant(True)
        await respond(send, json_response(200, grant, ((b"cache-control", b"no-store"),)))


_NOTHING = Reply((), (), "stop", 0)


async def _drain_and_respond(receive: Receive, send: Send, response: Response) -> None:
    """Read the request's body to its end and drop it, then answer: hypercorn keeps a connection open
    only for a request that was read to its end before the answer ended."""
    if await read_body(receive, 0) is not None:
        await respond(send, response)


def _reported(meta: Meta, reply: Reply) -> tuple[int, int, int] | None:
    """The (input, cached, output) usage a complete stream reports, None when it reports none."""
    if not meta.include_usage:
        return None
    return (meta.prompt_tokens, meta.cached_tokens, reply.completion_tokens)
