"""The API's routes: sessions, prompts, cancels, permission answers, history and event streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tool_bridge import PermissionDecision

from ..host import HostError
from ..messages import Cancel, UserPrompt
from ..session import SessionPath
from ..store import (
    ForkRejected,
    SessionArchived,
    SessionClosed,
    SessionExists,
    SessionNotFound,
    SessionRecord,
    TurnRunning,
    TurnUsageRecord,
)
from ..usage import TokenUsage
from . import _api as api
from ._context import ServeContext, json_response, read_body
from ._firehose import firehose, firehose_start
from ._response import EventStreamResponse
from ._stream import session_events
from ._wakeup import Inbox
from ._workspace import WorkspaceRefused, confine

__all__ = ["api_routes"]

T = TypeVar("T")


async def _blocking(fn: Callable[[], T]) -> T:
    return await trio.to_thread.run_sync(fn)


def _record(ctx: ServeContext, session_id: str) -> SessionRecord:
    try:
        return ctx.host.session(session_id)
    except SessionNotFound:
        raise api.ApiError(404, "not_found", f"there is no session {session_id!r}") from None


def _open_record(ctx: ServeContext, session_id: str) -> SessionRecord:
    record = _record(ctx, session_id)
    if record.status == "closed":
        raise api.ApiError(409, "session_closed", f"session {session_id!r} is closed")
    if record.status == "archived":
        raise api.ApiError(
            409, "session_archived", f"session {session_id!r} is archived (a rewind replaced it)"
        )
    return record


def _usage(records: list[TurnUsageRecord]) -> api.SessionUsage | None:
    if not records:
        return None
    total = sum((r.usage.total for r in records), TokenUsage())
    costs = [r.usage.cost for r in records if r.usage.cost is not None]
    return api.SessionUsage(
        total.input_tokens,
        total.output_tokens,
        total.cached_tokens,
        total.reasoning_tokens,
        sum(costs) if costs else None,
    )


def _view(
    ctx: ServeContext,
    record: SessionRecord,
    active: set[str],
    usage: list[TurnUsageRecord] | None = None,
    children: list[str] | None = None,
) -> api.SessionView:
    if usage is None:
        usage = ctx.host.turn_usage(record.id)
    if children is None:
        children = [child.id for child in ctx.host.store.children(record.id)]
    link = record.parent
    return api.SessionView(
        id=record.id,
        workspace=record.workspace,
        model=record.model,
        status=record.status,
        turns=record.current_turn,
        active=record.id in active,
        created_at=record.created_at,
        updated_at=record.updated_at,
        learned_window=record.learned_window,
        pending_permissions=ctx.taps.pending(record.id),
        usage=_usage(usage),
        forked_from=None if record.forked_from is None else api.ForkOrigin(*record.forked_from),
        parent=None if link is None else api.ParentOrigin(link.session, link.turn, link.call, link.profile),
        children=children,
    )


def _address(ctx: ServeContext, session_id: str) -> Any:
    """The session's address, its events tapped; a host failure is a 503."""
    try:
        ctx.taps.ensure(session_id)
        return ctx.host.resume(session_id)
    except HostError as error:
        raise api.ApiError(503, "host_error", str(error)) from None


def api_routes(ctx: ServeContext) -> list[Route]:
    """Every ``/v1`` route, bound to ``ctx``."""
    return [
        Route("/v1/sessions", partial(_create, ctx), methods=["POST"]),
        Route("/v1/sessions", partial(_list_sessions, ctx), methods=["GET"]),
        Route("/v1/sessions/{id}", partial(_get_session, ctx), methods=["GET"]),
        Route("/v1/sessions/{id}", partial(_close_session, ctx), methods=["DELETE"]),
        Route("/v1/sessions/{id}/prompts", partial(_prompt, ctx), methods=["POST"]),
        Route("/v1/sessions/{id}/cancel", partial(_cancel, ctx), methods=["POST"]),
        Route("/v1/sessions/{id}/permissions/{request_id}", partial(_permission, ctx), methods=["POST"]),
        Route("/v1/sessions/{id}/fork", partial(_fork, ctx), methods=["POST"]),
        Route("/v1/sessions/{id}/rewind", partial(_rewind, ctx), methods=["POST"]),
        Route("/v1/sessions/{id}/history", partial(_history, ctx), methods=["GET"]),
        Route("/v1/sessions/{id}/events", partial(_events, ctx), methods=["GET"]),
        Route("/v1/events", partial(_all_events, ctx), methods=["GET"]),
    ]


# --- Sessions ---------------------------------------------------------------------------------------------


async def _create(ctx: ServeContext, request: Request) -> Response:
    body = await read_body(request, ctx.settings.max_body_bytes, api.CreateSession)
    if body.id is not None and not api.SESSION_ID.fullmatch(body.id):
        raise api.ApiError(400, "invalid_body", "id: 1-64 letters, digits, '_', '.', '-'")
    try:
        workspace = confine(ctx.workspace_root, body.workspace)
    except WorkspaceRefused as error:
        raise api.ApiError(403, "workspace_refused", str(error)) from None
    except ValueError as error:
        raise api.ApiError(400, "invalid_body", f"workspace: {error}") from None
    view = await _blocking(lambda: _open_session(ctx, workspace, body))
    return json_response(view, 201)


def _open_session(ctx: ServeContext, workspace: Path, body: api.CreateSession) -> api.SessionView:
    """Open the session ``body`` asks for in ``workspace`` and tap its events; a session of that id is a
    409, a host failure a 503."""
    try:
        address = ctx.host.open(workspace, session_id=body.id, priority=body.priority)
    except SessionExists:
        raise api.ApiError(409, "session_exists", f"there is a session {body.id!r}") from None
    except HostError as error:
        raise api.ApiError(503, "host_error", str(error)) from None
    found = SessionPath.parse(address.name)
    assert found is not None, address.name
    session_id = found[0].session_id
    ctx.taps.ensure(session_id)
    return _view(ctx, ctx.host.session(session_id), set(ctx.host.active()))


async def _list_sessions(ctx: ServeContext, request: Request) -> Response:
    def listing() -> api.SessionList:
        active = set(ctx.host.active())
        usage = ctx.host.usage_by_session()
        sessions = ctx.host.list_sessions()
        children: dict[str, list[str]] = {}
        for record in sessions:
            if record.parent is not None:
                children.setdefault(record.parent.session, []).append(record.id)
        return api.SessionList(
            [_view(ctx, r, active, usage.get(r.id, []), children.get(r.id, [])) for r in sessions]
        )

    return json_response(await _blocking(listing))


async def _get_session(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]
    record = await _blocking(lambda: _record(ctx, session_id))
    return json_response(_view(ctx, record, set(ctx.host.active())))


async def _close_session(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]

    def close() -> api.SessionView:
        _record(ctx, session_id)
        ctx.host.close(session_id)
        ctx.taps.forget(session_id)
        return _view(ctx, _record(ctx, session_id), set(ctx.host.active()))

    return json_response(await _blocking(close))


async def _fork(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]
    body = await read_body(request, ctx.settings.max_body_bytes, api.ForkBody)
    workspace = _fork_workspace(ctx, body.workspace, body.id)

    def fork() -> api.SessionView:
        _record(ctx, session_id)
        with _refusals(body.id):
            record = ctx.host.fork(session_id, at_turn=body.at_turn, workspace=workspace, session_id=body.id)
        return _view(ctx, record, set(ctx.host.active()))

    return json_response(await _blocking(fork), 201)


async def _rewind(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]
    body = await read_body(request, ctx.settings.max_body_bytes, api.RewindBody)
    workspace = _fork_workspace(ctx, body.workspace, body.id)

    def rewind() -> api.SessionView:
        _record(ctx, session_id)
        with _refusals(body.id):
            record = ctx.host.rewind(
                session_id, to_turn=body.to_turn, workspace=workspace, session_id=body.id
            )
        ctx.taps.forget(session_id)
        return _view(ctx, record, set(ctx.host.active()))

    return json_response(await _blocking(rewind), 201)


def _fork_workspace(ctx: ServeContext, requested: str | None, new_id: str | None) -> Path | None:
    """The fork's workspace confined to the root as a new session's is (None: the source's), after checking
    the id the client chose."""
    if new_id is not None and not api.SESSION_ID.fullmatch(new_id):
        raise api.ApiError(400, "invalid_body", "id: 1-64 letters, digits, '_', '.', '-'")
    if requested is None:
        return None
    try:
        return confine(ctx.workspace_root, requested)
    except WorkspaceRefused as error:
        raise api.ApiError(403, "workspace_refused", str(error)) from None
    except ValueError as error:
        raise api.ApiError(400, "invalid_body", f"workspace: {error}") from None


@contextmanager
def _refusals(new_id: str | None) -> Iterator[None]:
    """A fork's or rewind's refusals as the API answers them: a turn out of range 400, a taken id, a turn
    running, a closed or archived source 409, a host failure 503."""
    try:
        yield
    except ForkRejected as error:
        raise api.ApiError(400, "invalid_turn", str(error)) from None
    except SessionExists:
        raise api.ApiError(409, "session_exists", f"there is a session {new_id!r}") from None
    except TurnRunning as error:
        raise api.ApiError(409, "turn_running", str(error)) from None
    except SessionClosed as error:
        raise api.ApiError(409, "session_closed", str(error)) from None
    except SessionArchived as error:
        raise api.ApiError(409, "session_archived", str(error)) from None
    except HostError as error:
        raise api.ApiError(503, "host_error", str(error)) from None


# --- Turns ------------------------------------------------------------------------------------------------


async def _prompt(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]
    body = await read_body(request, ctx.settings.max_body_bytes, api.PromptBody)
    if not body.text.strip():
        raise api.ApiError(400, "invalid_body", "text: a prompt must not be empty")

    def start() -> int:
        _open_record(ctx, session_id)
        number: int = _address(ctx, session_id).ask(UserPrompt(body.text))
        return number

    return json_response(api.TurnAccepted(await _blocking(start)), 202)


async def _cancel(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]

    def stop() -> bool:
        _open_record(ctx, session_id)
        return bool(_address(ctx, session_id).ask(Cancel()))

    return json_response(api.CancelAnswer(await _blocking(stop)))


async def _permission(ctx: ServeContext, request: Request) -> Response:
    session_id, request_id = request.path_params["id"], request.path_params["request_id"]
    body = await read_body(request, ctx.settings.max_body_bytes, api.PermissionAnswer)

    def answer() -> api.PermissionTaken:
        _open_record(ctx, session_id)
        if ctx.taps.take_pending(session_id, request_id) is None:
            message = f"no permission request {request_id!r} waits in session {session_id!r}"
            raise api.ApiError(409, "stale_permission", message)
        decision = PermissionDecision(request_id, body.decision, body.reason, body.pattern)
        _address(ctx, session_id).tell(decision)
        return api.PermissionTaken(request_id, body.decision)

    return json_response(await _blocking(answer))


# --- What was said, and event streams ---------------------------------------------------------------------


async def _history(ctx: ServeContext, request: Request) -> Response:
    session_id = request.path_params["id"]

    def messages() -> api.HistoryView:
        _record(ctx, session_id)
        stored = ctx.host.stored_messages(session_id)
        return api.HistoryView(
            [api.HistoryMessage(m.seq, m.turn, m.message, m.replaced_by, m.is_summary) for m in stored]
        )

    return json_response(await _blocking(messages))


async def _events(ctx: ServeContext, request: Request) -> Response | EventStreamResponse:
    session_id = request.path_params["id"]
    after = _cursor(request)
    record = await _blocking(lambda: _record(ctx, session_id))
    inbox = Inbox(ctx.settings.stream_buffer_bytes)
    ctx.taps.add(inbox.buffer, session_id)
    try:
        if record.status not in ("closed", "archived"):
            await _blocking(lambda: ctx.taps.ensure(session_id))
        if after is None:
            after = await _blocking(lambda: ctx.host.last_event_seq(session_id))
    except BaseException:
        ctx.taps.remove(inbox.buffer)
        raise

    def closed() -> bool:
        return _record(ctx, session_id).status in ("closed", "archived")

    frames = session_events(ctx.host.store, session_id, after, inbox, is_closed=closed)
    return _streaming(ctx, frames, inbox)


async def _all_events(ctx: ServeContext, request: Request) -> EventStreamResponse:
    cursor = request.headers.get("last-event-id") or request.query_params.get("after")
    start = await _blocking(lambda: firehose_start(ctx.host.store, cursor))
    inbox = Inbox(ctx.settings.stream_buffer_bytes)
    ctx.taps.add(inbox.buffer, None)
    return _streaming(ctx, firehose(ctx.host.store, start, inbox), inbox)


def _cursor(request: Request) -> int | None:
    """The seq to replay after: ``Last-Event-ID`` wins over ``?after=``; None: from now on."""
    given = request.headers.get("last-event-id") or request.query_params.get("after")
    if given is None:
        return None
    if not given.isdigit():
        raise api.ApiError(400, "invalid_cursor", f"an event id is a whole number >= 0, got {given!r}")
    return int(given)


def _streaming(ctx: ServeContext, frames: Any, inbox: Inbox) -> EventStreamResponse:
    return EventStreamResponse(
        frames,
        write_timeout=ctx.settings.write_timeout,
        stopping=ctx.stopping,
        on_end=lambda: ctx.taps.remove(inbox.buffer),
    )
