"""The agent: ACP requests read from the client, performed on an :class:`AgentHost`, answered once each.

It runs on the host's trio loop. Reading, dispatching and writing never wait on an actor: every call into
the host runs on a worker thread, and each session's mailbox calls (prompt, cancel, permission answers)
run one after another in the order they were read, so a cancel reaches the session before a prompt read
after it. Events come back from the sessions' threads into one channel and are handled in order, so a
prompt's updates are written before its answer.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec
import trio

from tool_bridge import PermissionRequested, SetPermissionMode
from tool_bridge.mcp import McpNotInstalled, McpServerSettings, require_sdk

from .. import events as ev
from ..host import AgentHost, HostError
from ..messages import Cancel, SetModel, UserPrompt
from ..store import SessionNotFound
from ._config import SessionConfig, config_options
from ._forward import Forward
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    Invalid,
    Notification,
    Oversized,
    Request,
    Response,
    RpcError,
    decode_params,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_message,
)
from ._ledger import Answer, PromptLedger
from ._mcp import client_servers
from ._notices import NOTICE_METHOD, notice_of, wants_notices
from ._outcome import Failure, failure_data
from ._permissions import decision_from_answer, denial
from ._prompts import prompt_parts
from ._schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    CancelNotification,
    CancelRequestNotification,
    CloseSessionRequest,
    Empty,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    McpCapabilities,
    NewSessionRequest,
    NewSessionResponse,
    PromptCapabilities,
    PromptRequest,
    PromptResponse,
    RequestId,
    ResumeSessionRequest,
    SessionCapabilities,
    SessionConfigOption,
    SessionInfo,
    SessionNotification,
    SessionSetupResponse,
    SessionUpdate,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
)
from ._settings import AcpSettings
from ._updates import UpdateBuilder, decode_stored, iso_time

__all__ = ["AcpAgent"]

logger = logging.getLogger("turnkeep.acp")

_ASK_TIMEOUT = 30.0
_PAGE = 50


def _version() -> str:
    try:
        return metadata.version("turnkeep")
    except metadata.PackageNotFoundError:
        return "0"


Write = Callable[[bytes], Awaitable[bool]]
"""Writes one line; False once the client's end is gone."""


@dataclass(slots=True)
class _Session:
    id: str
    address: Any
    builder: UpdateBuilder
    mailbox: trio.MemorySendChannel[Callable[[], Awaitable[None]]]
    forward: Forward
    config: SessionConfig
    ledger: PromptLedger = field(default_factory=PromptLedger)
    current_turn: int | None = None
    mailbox_done: trio.Event = field(default_factory=trio.Event)
    settled: trio.Event | None = None
    """Set once nothing is owed to the session's prompts, for a connection letting the session go."""


@dataclass(slots=True)
class _Asked:
    """A request of the agent's own waiting for the client's answer."""

    done: trio.Event = field(default_factory=trio.Event)
    result: msgspec.Raw | None = None
    error: dict[str, Any] | None = None


class AcpAgent:
    """One client's connection to a host: :meth:`run` reads lines until :meth:`stop` or the input's end,
    then stops every turn it started (``aborted``), writes every answer still owed, and returns.

    Guarantees: each request gets exactly one answer (a request id already owed an answer is refused
    -32600); each ``session/prompt`` is answered after the updates of its turn; a line that cannot be read
    is answered with an error and the next one is read as usual; nothing is written once :meth:`run` has
    returned."""

    def __init__(self, host: AgentHost, settings: AcpSettings, write: Write) -> None:
        self._host = host
        self._settings = settings
        self._write_line = write
        self._sessions: dict[str, _Session] = {}
        self._owed: dict[RequestId, trio.CancelScope | None] = {}
        self._asked: dict[RequestId, _Asked] = {}
        self._ids = itertools.count(1)
        self._events_in, self._events_out = trio.open_memory_channel[tuple[str, Any]](math.inf)
        self._stopping = trio.Event()
        self._closing = False
        self._settled = trio.Event()
        self._asking = 0
        self._no_asking = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._gone = False
        self._max_text = max(1024, settings.max_line_bytes // 8)
        self._notices = False
        """Whether the client takes turnkeep's own notices (see :mod:`._notices`)."""
        self._window = host.settings.window.context_window
        self._default_config = SessionConfig(host.settings.provider.model)

    # -- running ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to end (call on the loop's thread)."""
        self._stopping.set()

    async def run(self, lines: trio.MemoryReceiveChannel[bytes | Oversized | None]) -> None:
        """Serve the lines of ``lines`` (None: the input ended) until it ends or :meth:`stop` is called."""
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._dispatch_events)
            nursery.start_soon(self._read, lines)
            await self._stopping.wait()
            await self._close()
            nursery.cancel_scope.cancel()

    async def _read(self, lines: trio.MemoryReceiveChannel[bytes | Oversized | None]) -> None:
        async for line in lines:
            if line is None:
                break
            if isinstance(line, Oversized):
                limit = self._settings.max_line_bytes
                await self._write(
                    encode_error(None, INVALID_REQUEST, f"a line of {line.size} bytes is longer than {limit}")
                )
                continue
            await self.handle_line(line)
        self._gone_input()

    def _gone_input(self) -> None:
        for asked in self._asked.values():
            asked.done.set()  # no answer will come: each counts as a denial
        self._stopping.set()

    async def _write(self, line: bytes) -> bool:
        if self._gone:
            return False
        if len(line) > self._settings.max_line_bytes + 1:
            logger.warning("a line of %d bytes was not written: longer than the maximum", len(line))
            return True
        if not await self._write_line(line):
            self._gone = True
            self._stopping.set()
            return False
        return True

    async def _answer(self, request_id: RequestId, line: bytes) -> None:
        """Write the answer of ``request_id``, once: a second answer is dropped."""
        if request_id not in self._owed:
            return
        del self._owed[request_id]
        if len(line) > self._settings.max_line_bytes + 1:
            line = encode_error(request_id, INTERNAL_ERROR, "the answer is longer than the maximum line size")
        await self._write(line)

    async def _answer_prompts(self, answers: list[Answer]) -> None:
        for answer in answers:
            outcome = answer.outcome
            if isinstance(outcome, Failure):
                line = encode_error(answer.request_id, outcome.code, outcome.message, outcome.data)
            else:
                line = encode_result(answer.request_id, PromptResponse(stop_reason=outcome.reason))
            await self._answer(answer.request_id, line)
        if self._closing and not any(session.ledger.owed for session in self._sessions.values()):
            self._settled.set()

    async def _update(self, session_id: str, update: SessionUpdate) -> None:
        await self._write(
            encode_notification("session/update", SessionNotification(session_id=session_id, update=update))
        )

    # -- lines --------------------------------------------------------------------------------------

    async def handle_line(self, line: bytes) -> None:
        """Act on one line: a request, a notification or an answer; anything else is answered with its
        error."""
        message = parse_message(line)
        if isinstance(message, Invalid):
            await self._write(message.reply)
        elif isinstance(message, Response):
            asked = self._asked.get(message.id)
            if asked is None:
                logger.warning("an answer to no request of the agent (id %r) was ignored", message.id)
                return
            asked.result, asked.error = message.result, message.error
            asked.done.set()
        elif isinstance(message, Notification):
            try:
                await self._notification(message)
            except RpcError as error:
                logger.warning("notification %s ignored: %s", message.method, error.message)
        else:
            await self._request(message)

    async def _notification(self, message: Notification) -> None:
        if message.method == "session/cancel":
            params = decode_params(message.params, CancelNotification)
            session = self._sessions.get(params.session_id)
            if session is not None:
                self._cancel(session, None)
        elif message.method == "$/cancel_request":
            cancel = decode_params(message.params, CancelRequestNotification)
            for session in self._sessions.values():
                if session.ledger.owes(cancel.request_id):
                    self._cancel(session, cancel.request_id)
                    return
            scope = self._owed.get(cancel.request_id)
            if scope is not None:
                scope.cancel()
        else:
            logger.info("unknown notification %s ignored", message.method)

    def _cancel(self, session: _Session, request_id: RequestId | None) -> None:
        turns = session.ledger.cancel(request_id)
        if request_id is None or session.current_turn in turns:
            self._mail(session, self._telling(session, Cancel()))

    _HANDLERS: dict[str, str] = {
        "initialize": "_initialize",
        "session/new": "_new",
        "session/load": "_load",
        "session/resume": "_resume",
        "session/list": "_list",
        "session/close": "_close_session",
        "session/delete": "_delete_session",
        "session/set_config_option": "_set_config",
    }

    async def _request(self, message: Request) -> None:
        if message.id in self._owed:
            await self._write(encode_error(None, INVALID_REQUEST, f"the id {message.id!r} is already in use"))
            return
        if self._stopping.is_set():
            await self._write(encode_error(message.id, INTERNAL_ERROR, "the agent is stopping"))
            return
        if message.method == "session/prompt":
            self._owed[message.id] = None
            try:
                await self._prompt(message)
            except RpcError as error:
                await self._answer(
                    message.id, encode_error(message.id, error.code, error.message, error.data)
                )
            return
        name = self._HANDLERS.get(message.method)
        if name is None:
            await self._write(
                encode_error(message.id, METHOD_NOT_FOUND, f"method not found: {message.method}")
            )
            return
        scope = trio.CancelScope()
        self._owed[message.id] = scope
        assert self._nursery is not None
        self._nursery.start_soon(self._perform, message, getattr(self, name), scope)

    async def _perform(
        self, message: Request, handler: Callable[[Any, RequestId], Awaitable[Any]], scope: trio.CancelScope
    ) -> None:
        line: bytes
        with scope:
            try:
                result = await handler(message.params, message.id)
                line = encode_result(message.id, result)
            except RpcError as error:
                line = encode_error(message.id, error.code, error.message, error.data)
            except (SessionNotFound, FileNotFoundError) as error:
                line = encode_error(message.id, RESOURCE_NOT_FOUND, str(error))
            except HostError as error:
                line = encode_error(
                    message.id, INTERNAL_ERROR, str(error), {"kind": "host", "message": str(error)}
                )
            except Exception as error:
                logger.exception("%s failed", message.method)
                line = encode_error(message.id, INTERNAL_ERROR, f"{type(error).__name__}: {error}")
        if scope.cancelled_caught:
            line = encode_error(message.id, REQUEST_CANCELLED, "the request was cancelled")
        await self._answer(message.id, line)

    # -- methods ------------------------------------------------------------------------------------

    async def _initialize(self, raw: msgspec.Raw, _: RequestId) -> InitializeResponse:
        params = decode_params(raw, InitializeRequest)
        self._notices = wants_notices(params.client_capabilities.meta)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True),
                session_capabilities=SessionCapabilities(
                    list=Empty(), resume=Empty(), close=Empty(), delete=Empty()
                ),
            ),
            agent_info=Implementation(name="turnkeep", title="turnkeep", version=_version()),
        )

    def _check_cwd(self, cwd: str) -> Path:
        path = Path(cwd)
        if not path.is_absolute():
            raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {cwd!r}")
        return path

    def _servers(self, raw: list[dict[str, Any]]) -> dict[str, McpServerSettings]:
        """The session-scope settings of the client's MCP servers (see :mod:`._mcp`); none, with a warning,
        without the ``mcp`` extra."""
        if not raw:
            return {}
        given = client_servers(raw, taken=self._host.settings.mcp_servers)
        for warning in given.warnings:
            logger.warning("%s", warning)
        if given.servers:
            try:
                require_sdk()
            except McpNotInstalled as error:
                names = ", ".join(given.servers)
                logger.warning("the client's MCP servers are not started (%s): %s", names, error)
                return {}
        return given.servers

    async def _new(self, raw: msgspec.Raw, _: RequestId) -> NewSessionResponse:
        params = decode_params(raw, NewSessionRequest)
        path = self._check_cwd(params.cwd)
        servers = self._servers(params.mcp_servers)
        if path.exists() and not path.is_dir():
            raise RpcError(INVALID_PARAMS, f"cwd {params.cwd!r} is not a directory")
        session_id = uuid.uuid4().hex[:12]
        forward = self._forwarder(session_id)
        address = await trio.to_thread.run_sync(
            lambda: self._host.open(path, session_id=session_id, mcp_servers=servers, subscribers=[forward])
        )
        session = await self._attach(session_id, address, forward)
        return NewSessionResponse(session_id=session_id, config_options=self._options(session))

    def _options(self, session: _Session) -> list[SessionConfigOption]:
        return config_options(session.config, self._host.settings.provider.model_choices)

    async def _set_config(self, raw: msgspec.Raw, _: RequestId) -> SetSessionConfigOptionResponse:
        params = decode_params(raw, SetSessionConfigOptionRequest)
        session = self._sessions.get(params.session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"no session {params.session_id!r} is open on this connection")
        models = self._host.settings.provider.model_choices
        await self._configure(session, session.config.set(params.config_id, params.value, models))
        return SetSessionConfigOptionResponse(config_options=self._options(session))

    async def _configure(self, session: _Session, wanted: SessionConfig) -> None:
        """Tell the session what changes from its options to ``wanted``, in order after the calls mailed
        to it before; raises :class:`RpcError` -32603 when it does not take a change."""
        if wanted.model != session.config.model:
            await self._ask_in_order(session, SetModel(wanted.model))
        if wanted.permission_mode != session.config.permission_mode:
            await self._ask_in_order(session, SetPermissionMode(wanted.permission_mode))
        session.config = wanted

    async def _reset_config(self, session: _Session) -> None:
        """Set the options the client changed back to the host's, so that the session taken up again is
        as a new connection describes it (a session that does not take it is logged, not failed)."""
        try:
            await self._configure(session, self._default_config)
        except RpcError as error:
            logger.warning("session %s: its options were not set back: %s", session.id, error.message)

    async def _ask_in_order(self, session: _Session, message: Any) -> Any:
        """Ask the session ``message`` after every call mailed to it before (a prompt read after this
        request is sent after it is answered). Raises :class:`RpcError` -32603 when the session does not
        take it."""
        done = trio.Event()
        outcome: list[Any] = []

        async def ask() -> None:
            try:
                outcome.append(
                    await trio.to_thread.run_sync(lambda: session.address.ask(message, timeout=_ASK_TIMEOUT))
                )
            except Exception as error:
                outcome.append(error)
            finally:
                done.set()

        self._mail(session, ask)
        with trio.move_on_after(_ASK_TIMEOUT + 5.0):
            await done.wait()
        if not outcome:
            raise RpcError(INTERNAL_ERROR, f"the session did not take {type(message).__name__} in time")
        if isinstance(outcome[0], Exception):
            raise RpcError(INTERNAL_ERROR, f"the session did not take {type(message).__name__}: {outcome[0]}")
        return outcome[0]

    async def _attach(self, session_id: str, address: Any, forward: Forward) -> _Session:
        """The connection's record of a session opened or taken up with ``forward`` subscribed."""
        send, receive = trio.open_memory_channel[Callable[[], Awaitable[None]]](math.inf)
        builder = UpdateBuilder(self._window, self._max_text)
        session = _Session(session_id, address, builder, send, forward, self._default_config)
        self._sessions[session_id] = session
        assert self._nursery is not None
        self._nursery.start_soon(self._run_mailbox, receive, session.mailbox_done)
        return session

    def _forwarder(self, session_id: str) -> Forward:
        assert self._token is not None
        return Forward(session_id, self._token, self._events_in)

    async def _record(self, session_id: str) -> Any:
        """The stored record of a session that can be taken up; :class:`RpcError` -32002 for one the store
        does not have, or has closed or archived."""
        try:
            record = await trio.to_thread.run_sync(self._host.session, session_id)
        except SessionNotFound:
            raise RpcError(RESOURCE_NOT_FOUND, f"there is no session {session_id!r}") from None
        if record.status in ("closed", "archived"):
            raise RpcError(RESOURCE_NOT_FOUND, f"the session {session_id!r} is {record.status}")
        return record

    async def _stored(self, session_id: str) -> tuple[Any, list[Any]]:
        record = await self._record(session_id)
        stored = await trio.to_thread.run_sync(self._host.store.load_events, session_id)
        return record, decode_stored(item.body for item in stored)

    async def _load(self, raw: msgspec.Raw, _: RequestId) -> SessionSetupResponse:
        params = decode_params(raw, LoadSessionRequest)
        self._check_cwd(params.cwd)
        servers = self._servers(params.mcp_servers)
        _, events = await self._stored(params.session_id)
        known = self._sessions.get(params.session_id)
        builder = UpdateBuilder(self._window, self._max_text)
        running = None if known is None else known.current_turn
        for update in builder.replay(events, running_turn=running):
            await self._update(params.session_id, update)
        if known is None:
            known = await self._take_up(params.session_id, servers)
        return SessionSetupResponse(config_options=self._options(known))

    async def _resume(self, raw: msgspec.Raw, _: RequestId) -> SessionSetupResponse:
        params = decode_params(raw, ResumeSessionRequest)
        self._check_cwd(params.cwd)
        servers = self._servers(params.mcp_servers)
        session = self._sessions.get(params.session_id)
        if session is None:
            await self._record(params.session_id)
            session = await self._take_up(params.session_id, servers)
        return SessionSetupResponse(config_options=self._options(session))

    async def _take_up(self, session_id: str, servers: dict[str, McpServerSettings]) -> _Session:
        forward = self._forwarder(session_id)
        address = await trio.to_thread.run_sync(
            lambda: self._host.resume(session_id, subscribers=[forward], mcp_servers=servers)
        )
        return await self._attach(session_id, address, forward)

    async def _list(self, raw: msgspec.Raw, _: RequestId) -> ListSessionsResponse:
        params = decode_params(raw, ListSessionsRequest)
        records = await trio.to_thread.run_sync(self._host.list_sessions)
        wanted = None if params.cwd is None else str(Path(params.cwd).resolve())
        shown = [
            record
            for record in records
            if record.status not in ("closed", "archived")
            and record.parent is None
            and (wanted is None or record.workspace == wanted)
        ]
        shown.sort(key=lambda record: (-record.updated_at, record.id))
        start = 0
        if params.cursor is not None:
            if not params.cursor.isdigit():
                raise RpcError(INVALID_PARAMS, f"invalid cursor {params.cursor!r}")
            start = int(params.cursor)
        page = shown[start : start + _PAGE]
        following = start + _PAGE < len(shown)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=record.id, cwd=record.workspace, updated_at=iso_time(record.updated_at)
                )
                for record in page
            ],
            next_cursor=str(start + _PAGE) if following else None,
        )

    async def _close_session(self, raw: msgspec.Raw, _: RequestId) -> Empty:
        session_id = decode_params(raw, CloseSessionRequest).session_id
        if await self._let_go(session_id):
            await trio.to_thread.run_sync(self._host.passivate, session_id)
        return Empty()

    async def _delete_session(self, raw: msgspec.Raw, _: RequestId) -> Empty:
        session_id = decode_params(raw, CloseSessionRequest).session_id
        await self._let_go(session_id)
        await trio.to_thread.run_sync(self._host.close, session_id)
        return Empty()

    async def _let_go(self, session_id: str) -> bool:
        """Cancel what the session is doing for this connection (as ``session/cancel``), wait (at most the
        abort grace and a second) for each of its prompts to be answered, answer those left ``cancelled``,
        and stop hearing it. False when the session was not open on this connection (it is checked to be
        one the store holds and may take up: :class:`RpcError` -32002 otherwise)."""
        session = self._sessions.get(session_id)
        if session is None:
            await self._record(session_id)
            return False
        if session.ledger.owed:
            session.settled = trio.Event()
            self._cancel(session, None)
            with trio.move_on_after(self._settings.abort_grace + 1.0):
                await session.settled.wait()
        self._sessions.pop(session_id, None)
        session.forward.detach()
        await self._reset_config(session)
        session.mailbox.close()
        await self._answer_prompts(session.ledger.drain())
        with trio.move_on_after(1.0):
            await session.mailbox_done.wait()  # every call mailed to the session was made
        return True

    async def _prompt(self, message: Request) -> None:
        params = decode_params(message.params, PromptRequest)
        session = self._sessions.get(params.session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"no session {params.session_id!r} is open on this connection")
        text, images = prompt_parts(params.prompt)
        session.ledger.submit(message.id)
        prompt = UserPrompt(text, images)

        async def send() -> None:
            try:
                turn = await trio.to_thread.run_sync(
                    lambda: session.address.ask(prompt, timeout=_ASK_TIMEOUT)
                )
            except Exception as error:
                if session.ledger.refuse(message.id):
                    data = failure_data(
                        "host", f"{type(error).__name__}: {error}", session=session.id, turn=None
                    )
                    line = encode_error(
                        message.id, INTERNAL_ERROR, f"the session did not take the prompt: {error}", data
                    )
                    await self._answer(message.id, line)
                _note_settled(session)
                return
            await self._answer_prompts(session.ledger.acknowledge(message.id, int(turn)))
            _note_settled(session)

        self._mail(session, send)

    def _mail(self, session: _Session, op: Callable[[], Awaitable[None]]) -> None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            session.mailbox.send_nowait(op)

    async def _run_mailbox(
        self, receive: trio.MemoryReceiveChannel[Callable[[], Awaitable[None]]], done: trio.Event
    ) -> None:
        try:
            async for op in receive:
                try:
                    await op()
                except Exception:
                    logger.exception("a session call failed")
        finally:
            done.set()

    def _telling(self, session: _Session, message: Any) -> Callable[[], Awaitable[None]]:
        """A mailbox call that tells ``message`` to the session."""

        async def tell() -> None:
            await trio.to_thread.run_sync(session.address.tell, message)

        return tell

    # -- events -------------------------------------------------------------------------------------

    async def _dispatch_events(self) -> None:
        async for session_id, event in self._events_out:
            session = self._sessions.get(session_id)
            if session is None:
                continue
            try:
                await self._on_event(session, event)
            except Exception:
                logger.exception("an event of session %s could not be written", session_id)

    async def _on_event(self, session: _Session, event: Any) -> None:
        if isinstance(event, PermissionRequested):
            before, params = session.builder.permission(session.id, event)
            for update in before:
                await self._update(session.id, update)
            assert self._nursery is not None
            self._nursery.start_soon(self._ask_permission, session, event, params)
            return
        if getattr(event, "session", session.id) != session.id:
            return  # a child's event relayed (its own session has it)
        for update in session.builder.live(event, now=time.time()):
            await self._update(session.id, update)
        if self._notices and (notice := notice_of(session.id, event)) is not None:
            await self._write(encode_notification(NOTICE_METHOD, notice))
        if isinstance(event, ev.TurnStarted):
            session.current_turn = event.turn
            if session.ledger.cancelled_turn(event.turn):
                self._mail(session, self._telling(session, Cancel()))
        elif isinstance(event, ev.TERMINAL_EVENTS):
            if session.current_turn == event.turn:
                session.current_turn = None
            await self._answer_prompts(session.ledger.turn_ended(event))
            _note_settled(session)

    async def _ask_permission(self, session: _Session, request: PermissionRequested, params: Any) -> None:
        self._asking += 1
        try:
            await self._ask_and_tell(session, request, params)
        finally:
            self._asking -= 1
            if self._asking == 0:
                self._no_asking.set()

    async def _ask_and_tell(self, session: _Session, request: PermissionRequested, params: Any) -> None:
        request_id = f"turnkeep-{next(self._ids)}"
        asked = _Asked()
        self._asked[request_id] = asked
        try:
            if self._gone or not await self._write(
                encode_request(request_id, "session/request_permission", params)
            ):
                decision = denial(request.call_id, "the editor is gone")
            else:
                with trio.move_on_after(self._settings.permission_timeout):
                    await asked.done.wait()
                if not asked.done.is_set():
                    decision = denial(
                        request.call_id, f"no answer within {self._settings.permission_timeout:g} s"
                    )
                elif asked.result is None and asked.error is None:
                    decision = denial(request.call_id, "the editor is gone")
                else:
                    decision = decision_from_answer(request.call_id, asked.result, asked.error)
        finally:
            self._asked.pop(request_id, None)
        self._mail(session, self._telling(session, decision))

    # -- closing ------------------------------------------------------------------------------------

    async def _close(self) -> None:
        for asked in self._asked.values():
            asked.done.set()
        for session in self._sessions.values():
            if session.ledger.owed:
                session.ledger.cancel()
                self._mail(session, self._telling(session, Cancel("aborted")))
        self._closing = True
        with trio.move_on_after(self._settings.abort_grace + 1.0):
            if any(session.ledger.owed for session in self._sessions.values()):
                await self._settled.wait()
        with trio.move_on_after(1.0):
            if self._asking:  # each denial is told to its session before the mailboxes close
                await self._no_asking.wait()
        for session in self._sessions.values():
            await self._answer_prompts(session.ledger.drain())
            session.mailbox.close()
        with trio.move_on_after(1.0):
            for session in self._sessions.values():
                await session.mailbox_done.wait()  # what was mailed is told before the loop ends
        for request_id in list(self._owed):
            await self._answer(request_id, encode_error(request_id, INTERNAL_ERROR, "the agent stopped"))


def _note_settled(session: _Session) -> None:
    """Tell a connection letting ``session`` go that nothing is owed to its prompts any more."""
    if session.settled is not None and not session.ledger.owed:
        session.settled.set()
