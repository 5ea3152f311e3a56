"""An HTTP/1.1 transport for httpx on trio: h11 over trio sockets, with a small keep-alive pool.

``httpx.AsyncClient(transport=TrioTransport())`` keeps httpx as the client API (streaming, timeouts,
status handling) while the bytes move through one h11 state machine per connection, with no layer in
between. It speaks HTTP/1.1 over ``http`` and ``https`` and nothing else: no HTTP/2, no proxies (see
:func:`proxy_configured`). One module, as the pool, a connection and a response's body share the rule of
when a connection may be used again.
"""

from __future__ import annotations

import math
import os
import select
import ssl
import urllib.parse
import urllib.request
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Final

import h11
import httpx
import trio

from ._groups import unwrap
from ._http_body import BodyFramingError, ChunkedBody, LengthBody, UntilClose, framing_of, message_framing
from ._http_head import HeadError, RequestHead, ResponseHead, head_end, parse_response_head

__all__ = ["StreamedResponse", "TransportClosedError", "TrioTransport", "proxy_configured"]

_READ_SIZE: Final = 64 * 1024
_FLUSH_SIZE: Final = 64 * 1024
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_NETWORK_ERRORS: Final = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

_Origin = tuple[str, str, int]


class TransportClosedError(RuntimeError):
    """A request was sent through a :class:`TrioTransport` after its ``aclose()``."""


class TrioTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 for ``httpx.AsyncClient`` on trio, with keep-alive connections per origin.

    Guarantees:

    - Idle connections are kept per (scheme, host, port), at most ``max_keepalive_connections`` each, and
      none is reused once idle for ``keepalive_expiry`` seconds. A connection goes back to the pool only
      when its response was read to the end and both sides may start a new request; in every other case,
      cancellation included, its socket is closed.
    - A reused connection that turns out dead before any byte of the response arrived is replaced by a
      fresh one, once, when the request body can be sent again (httpx's in-memory bodies can); a failure
      after a response byte arrived is always raised.
    - The ``connect``, ``read`` and ``write`` values of ``request.extensions["timeout"]`` bound the
      connection set-up (TCP and TLS together), each receive, and each send; they raise
      ``httpx.ConnectTimeout``, ``httpx.ReadTimeout`` and ``httpx.WriteTimeout``. Connections are not
      limited in number, so the ``pool`` timeout never applies.
    - Failures are raised as httpx exceptions (``ConnectError``, ``ReadError``, ``WriteError``,
      ``RemoteProtocolError``, ``LocalProtocolError``, ``UnsupportedProtocol``), with the original as
      ``__cause__``. A peer that closes before the whole response was sent is a ``RemoteProtocolError``.

    ``verify`` is ``True`` (the system's trusted certificates), ``False`` (no certificate check), or an
    ``ssl.SSLContext`` to use as it is, except that its ALPN protocols are set to ``http/1.1``.

    One transport belongs to one trio event loop: use it from that loop's tasks only (any number of them
    at once), never from other threads. It does not speak to proxies; when :func:`proxy_configured` says
    the environment wants one, use httpx's default transport instead.
    """

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        max_keepalive_connections: int = 4,
        keepalive_expiry: float = 5.0,
    ) -> None:
        if max_keepalive_connections < 0:
            raise ValueError(f"max_keepalive_connections must be >= 0, got {max_keepalive_connections!r}")
        if not keepalive_expiry >= 0:
            raise ValueError(f"keepalive_expiry must be >= 0, got {keepalive_expiry!r}")
        self._verify = verify
        self._ssl_context: ssl.SSLContext | None = None
        self._max_keepalive = max_keepalive_connections
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._closed = False

    @property
    def idle_connections(self) -> int:
        """How many idle connections the pool holds now, over all origins (expired ones included until
        the next request prunes them)."""
        return sum(len(idle) for idle in self._idle.values())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response once the status line and headers have arrived; the
        body streams from ``response.stream`` as it arrives."""
        if self._closed:
            raise TransportClosedError("this TrioTransport has been closed; make a new one")
        url = request.url
        scheme = url.scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(
                f"TrioTransport speaks http and https, not {scheme or 'a URL without a scheme'!r}",
                request=request,
            )
        body = request.stream
        if not isinstance(body, httpx.AsyncByteStream):
            raise TypeError("TrioTransport needs an asynchronous request body (use httpx.AsyncClient)")
        origin = (scheme, url.raw_host.decode("ascii"), url.port or _DEFAULT_PORTS[scheme])
        timeout = request.extensions.get("timeout") or {}
        head = _request_head(request)
        replayable = isinstance(body, httpx.ByteStream)
        connection = self._checkout(origin)
        if connection is not None:
            try:
                return await self._exchange(connection, request, head, timeout, retry_if_stale=replayable)
            except _Stale:
                pass
        connection = await self._connect(origin, request, timeout.get("connect"))
        return await self._exchange(connection, request, head, timeout, retry_if_stale=False)

    async def post(
        self,
        head: RequestHead,
        body: bytes,
        *,
        extra_headers: Iterable[tuple[str, str]] = (),
        connect_timeout: float | None = None,
        write_timeout: float | None = None,
    ) -> StreamedResponse:
        """Send ``head`` (with ``extra_headers`` and the body's length) and ``body`` on a pooled connection
        and return the response once its head has arrived, without building an ``httpx.Request`` or
        ``httpx.Response``: the same pool, keep-alive rules, retry of a stale connection, time-outs and
        errors as :meth:`handle_async_request`, and no read time-out (the caller bounds its reads).

        Raises ``httpx.LocalProtocolError`` for an extra header that may not be sent."""
        if self._closed:
            raise TransportClosedError("this TrioTransport has been closed; make a new one")
        try:
            data = head.encode(len(body), extra_headers) + body
        except HeadError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc
        connection = self._checkout(head.origin)
        if connection is not None:
            try:
                return await self._lean_exchange(connection, head, data, write_timeout, retry_if_stale=True)
            except _Stale:
                pass
        connection = await self._connect(head.origin, None, connect_timeout)
        return await self._lean_exchange(connection, head, data, write_timeout, retry_if_stale=False)

    async def aclose(self) -> None:
        """Close every pooled connection; any later request raises :class:`TransportClosedError`.
        Responses still streaming finish normally, and their connections are closed afterwards."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()
        await trio.lowlevel.checkpoint()

    def close_idle_now(self) -> None:
        """Close every pooled connection at once, from any thread, even after the trio loop has ended; any
        later request raises :class:`TransportClosedError`."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close_anywhere()

    # -- the pool ---------------------------------------------------------------------------------------

    def _checkout(self, origin: _Origin) -> _Connection | None:
        now = trio.current_time()
        expiry = self._keepalive_expiry
        for connections in self._idle.values():
            # Oldest first: once one is young enough, so are all after it.
            expired = 0
            for connection in connections:
                if now - connection.idle_since < expiry:
                    break
                connection.close()
                expired += 1
            if expired:
                del connections[:expired]
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.looks_reusable():
                return connection
            connection.close()
        return None

    def _release(self, connection: _Connection, framed: _Framed | None = None) -> None:
        state = connection.h11
        if framed is None:
            if self._closed or state.our_state is not h11.DONE or state.their_state is not h11.DONE:
                connection.close()
                return
            state.start_next_cycle()
        else:
            # The body was framed past h11: the next exchange starts afresh (a lean one left h11 idle).
            sent = framed.lean or state.our_state is h11.DONE
            if self._closed or not sent or not framed.keep_alive or framed.body.leftover:
                connection.close()
                return
            if not framed.lean:
                connection.h11 = h11.Connection(h11.CLIENT)
        connection.idle_since = trio.current_time()
        idle = self._idle.setdefault(connection.origin, [])
        idle.append(connection)
        if len(idle) > self._max_keepalive:
            idle.pop(0).close()

    # -- one connection ---------------------------------------------------------------------------------

    async def _connect(
        self, origin: _Origin, request: httpx.Request | None, timeout: float | None
    ) -> _Connection:
        scheme, host, port = origin
        with trio.move_on_after(math.inf if timeout is None else timeout):
            try:
                tcp = await _open_tcp_stream(host, port)
            except OSError as exc:
                raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=request) from exc
            if scheme == "http":
                return _Connection(origin, tcp, tcp)
            try:
                tls = trio.SSLStream(tcp, self._tls_context(), server_hostname=host, https_compatible=True)
                await tls.do_handshake()
            except BaseException as exc:
                tcp.socket.close()
                if isinstance(exc, trio.BrokenResourceError):
                    reason = exc.__cause__ or exc
                    raise httpx.ConnectError(
                        f"TLS with {host}:{port} failed: {reason}", request=request
                    ) from exc
                raise
            return _Connection(origin, tls, tcp)
        raise httpx.ConnectTimeout(f"no connection to {host}:{port} within {timeout:g} s", request=request)

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            if isinstance(self._verify, ssl.SSLContext):
                context = self._verify
            else:
                context = ssl.create_default_context()
                if not self._verify:
                    context.check_hostname = False
                    context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["http/1.1"])
            self._ssl_context = context
        return self._ssl_context

    async def _exchange(
        self,
        connection: _Connection,
        request: httpx.Request,
        head: h11.Request,
        timeout: dict[str, float | None],
        *,
        retry_if_stale: bool,
    ) -> httpx.Response:
        """Send the request and read the response head on ``connection``, which is closed on failure.

        Raises ``_Stale`` instead of the error when ``retry_if_stale`` and no response byte arrived."""
        read_timeout = timeout.get("read")
        progress = _Progress()
        try:
            try:
                try:
                    await _send_request(connection, request, head, timeout.get("write"))
                except httpx.WriteError as exc:
                    # The server may have answered early (say, 413) and stopped reading: read its answer.
                    try:
                        event = await _receive_head(connection, request, read_timeout, progress)
                    except httpx.TransportError:
                        raise exc from exc.__cause__
                else:
                    event = await _receive_head(connection, request, read_timeout, progress)
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            except h11.LocalProtocolError as exc:
                raise httpx.LocalProtocolError(str(exc), request=request) from exc
        except BaseException as exc:
            connection.close()
            stale = isinstance(exc, httpx.TransportError) and not isinstance(
                exc, httpx.TimeoutException | httpx.LocalProtocolError
            )
            if retry_if_stale and stale and not progress.received:
                raise _Stale from exc
            raise
        framed = _framing(request, event, connection)
        return httpx.Response(
            status_code=event.status_code,
            headers=event.headers.raw_items(),
            stream=_ResponseStream(self, connection, request, read_timeout, framed),
            extensions={"http_version": b"HTTP/" + event.http_version, "reason_phrase": event.reason},
        )

    async def _lean_exchange(
        self,
        connection: _Connection,
        head: RequestHead,
        data: bytes,
        write_timeout: float | None,
        *,
        retry_if_stale: bool,
    ) -> StreamedResponse:
        """:meth:`_exchange` for :meth:`post`: the request goes out as the bytes ``data`` and the response
        head is parsed here; h11 is not used."""
        progress = _Progress()
        try:
            try:
                await _send(connection, None, data, write_timeout)
            except httpx.WriteError as exc:
                # The server may have answered early (say, 413) and stopped reading: read its answer.
                try:
                    answer, unread = await _receive_lean_head(connection, progress)
                except httpx.TransportError:
                    raise exc from exc.__cause__
            else:
                answer, unread = await _receive_lean_head(connection, progress)
        except BaseException as exc:
            connection.close()
            stale = isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)
            if retry_if_stale and stale and not progress.received:
                raise _Stale from exc
            raise
        lowered = answer.lowered()
        framing = message_framing(head.method, answer.status_code, answer.http_version, lowered)
        framed = _Framed(framing.body, unread, framing.keep_alive, lean=True)
        stream = _ResponseStream(self, connection, None, None, framed)
        return StreamedResponse(
            answer.status_code, answer.reason, answer.headers, stream, lowered, answer.http_version
        )


def proxy_configured(url: str) -> bool:
    """Whether the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY`` and the
    platform's settings, as :mod:`urllib.request` reads them) routes ``url`` through a proxy."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme.lower()) or proxies.get("all")):
        return False
    host = parts.hostname or ""
    if not host:
        return True
    return not urllib.request.proxy_bypass(host)


class StreamedResponse:
    """The answer to :meth:`TrioTransport.post` as its head arrived. Its body streams from
    :meth:`aiter_bytes`, decoded as its ``Content-Encoding`` says (``gzip`` and ``deflate``; other codings
    pass as they are); :meth:`aclose` closes the connection unless the body was read to its end."""

    __slots__ = ("_codings", "_stream", "headers", "http_version", "reason_phrase", "status_code")

    def __init__(
        self,
        status_code: int,
        reason: bytes,
        headers: list[tuple[bytes, bytes]],
        stream: _ResponseStream,
        lowered: list[tuple[bytes, bytes]],
        http_version: bytes = b"1.1",
    ) -> None:
        self.status_code = status_code
        self.reason_phrase = reason.decode("latin-1")
        self.http_version = "HTTP/" + http_version.decode("ascii")
        self.headers = httpx.Headers(headers)
        self._stream = stream
        self._codings = [
            coding.strip().lower()
            for name, value in lowered
            if name == b"content-encoding"
            for coding in value.split(b",")
            if coding.strip().lower() in _DECODED
        ]

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (decoded), each read's worth in one piece."""
        if not self._codings:
            return self._stream
        return _decoded(self._stream, self._codings)

    async def aclose(self) -> None:
        """Close the body: its connection is closed unless the body was read to the end."""
        await self._stream.aclose()


_DECODED: Final = (b"gzip", b"x-gzip", b"deflate")


async def _decoded(stream: AsyncIterator[bytes], codings: list[bytes]) -> AsyncIterator[bytes]:
    """``stream`` with its content codings undone (the last applied first). Raises
    ``httpx.DecodingError`` for bytes that do not decode."""
    decoders = [
        zlib.decompressobj(zlib.MAX_WBITS | 16 if c != b"deflate" else zlib.MAX_WBITS) for c in codings
    ]
    try:
        async for chunk in stream:
            for decoder in reversed(decoders):
                chunk = decoder.decompress(chunk)
            if chunk:
                yield chunk
        tail = b""
        for decoder in reversed(decoders):
            tail = decoder.decompress(tail) + decoder.flush()
        if tail:
            yield tail
    except zlib.error as exc:
        raise httpx.DecodingError(
            f"the response body does not decode as {b', '.join(codings).decode()}: {exc}"
        ) from exc


class _Stale(Exception):
    """A reused connection failed before any response byte arrived; the request may go again."""


class _Progress:
    __slots__ = ("received",)

    def __init__(self) -> None:
        self.received = 0


class _Connection:
    """One socket with its h11 state; owned by the pool while idle, by one exchange while in use."""

    __slots__ = ("h11", "idle_since", "origin", "plain", "socket", "stream")

    def __init__(self, origin: _Origin, stream: trio.abc.Stream, tcp: trio.SocketStream) -> None:
        self.origin = origin
        self.stream = stream
        self.socket = tcp.socket
        self.plain = stream is tcp
        """Bytes are read from the socket itself (no TLS layer in between)."""
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0

    def looks_reusable(self) -> bool:
        """False when the idle socket is readable: the peer closed it, or sent bytes nobody asked for."""
        fd = self.socket.fileno()
        if fd < 0:
            return False
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        # Closing the socket is synchronous and wakes any task blocked on it, so it also works while
        # the surrounding scope is cancelled; a TLS close_notify is not needed after HTTP/1.1 framing.
        self.socket.close()

    def close_anywhere(self) -> None:
        """Close an idle connection from any thread: outside the trio loop there is no task to wake, so
        the socket's descriptor is closed directly."""
        try:
            self.close()
        except RuntimeError:
            descriptor = self.socket.detach()
            if descriptor >= 0:
                os.close(descriptor)


class _Framed:
    """A body whose framing (chunked, or Content-Length) is decoded here rather than by h11."""

    __slots__ = ("body", "keep_alive", "lean", "unread")

    def __init__(
        self,
        body: ChunkedBody | LengthBody | UntilClose,
        unread: bytes,
        keep_alive: bool,
        *,
        lean: bool = False,
    ) -> None:
        self.body = body
        self.unread = unread
        """Bytes that arrived with the head, not yet decoded."""
        self.keep_alive = keep_alive
        """The response lets the connection be used again once its body has been read."""
        self.lean = lean
        """The exchange went past h11 both ways (:meth:`TrioTransport.post`): its state is untouched."""


def _framing(request: httpx.Request, event: h11.Response, connection: _Connection) -> _Framed | None:
    """How to read the body of ``event`` past h11, or None where h11 reads it (no body, a body read to
    the connection's close, or a peer that already closed)."""
    unread, closed = connection.h11.trailing_data
    framing = (
        None if closed else framing_of(request.method, event.status_code, event.http_version, event.headers)
    )
    return None if framing is None else _Framed(framing.body, unread, framing.keep_alive)


class _ResponseStream(httpx.AsyncByteStream):
    """A response body as it arrives; gives its connection back to the pool at the end of the body."""

    __slots__ = ("_connection", "_finished", "_framed", "_read_timeout", "_request", "_transport")

    def __init__(
        self,
        transport: TrioTransport,
        connection: _Connection,
        request: httpx.Request | None,
        read_timeout: float | None,
        framed: _Framed | None = None,
    ) -> None:
        self._transport = transport
        self._connection: _Connection | None = connection
        self._request = request
        self._read_timeout = read_timeout
        self._framed = framed
        self._finished = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        connection = self._connection
        if connection is None:
            if self._finished:
                raise StopAsyncIteration
            raise httpx.StreamClosed()
        if self._framed is not None:
            return await self._next_framed(connection, self._framed)
        state = connection.h11
        # Everything already received is handed over as one piece: a stream of many small HTTP chunks
        # then costs one pass through httpx per read, not one per chunk.
        parts: list[bytes] = []
        try:
            while True:
                event = state.next_event()
                if event is h11.NEED_DATA:
                    if parts:
                        return b"".join(parts)
                    state.receive_data(await _receive(connection, self._request, self._read_timeout))
                elif type(event) is h11.Data:
                    if event.data:
                        parts.append(bytes(event.data))
                elif type(event) is h11.EndOfMessage:
                    break
                else:
                    raise httpx.RemoteProtocolError(f"unexpected {event!r} in a response body")
        except h11.RemoteProtocolError as exc:
            self._discard(connection)
            raise httpx.RemoteProtocolError(str(exc), request=self._request) from exc
        except BaseException:
            self._discard(connection)
            raise
        return self._end(connection, None, b"".join(parts))

    async def _next_framed(self, connection: _Connection, framed: _Framed) -> bytes:
        """The next payload of a framed body: everything one read completes, in one piece."""
        body = framed.body
        payload = b""
        try:
            while not body.done:
                if framed.unread:
                    data, framed.unread = framed.unread, b""
                else:
                    data = await _receive(connection, self._request, self._read_timeout)
                    if not data:
                        if type(body) is UntilClose:
                            body.close()
                            break
                        raise httpx.RemoteProtocolError(
                            "the server closed the connection before the response body ended",
                            request=self._request,
                        )
                payload = body.feed(data)
                if body.done:
                    break
                if payload:
                    return payload
            if framed.unread:
                body.feed(framed.unread)  # bytes past the body: the connection cannot be used again
        except BodyFramingError as exc:
            self._discard(connection)
            raise httpx.RemoteProtocolError(str(exc), request=self._request) from exc
        except BaseException:
            self._discard(connection)
            raise
        return self._end(connection, framed, payload)

    def _end(self, connection: _Connection, framed: _Framed | None, last: bytes) -> bytes:
        """The body has been read to its end: the connection goes back to the pool; ``last`` is what the
        final read completed (nothing left to give ends the iteration)."""
        self._connection = None
        self._finished = True
        self._transport._release(connection, framed)
        if last:
            return last
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Close the body: its connection is closed unless the body was read to the end."""
        connection = self._connection
        if connection is not None:
            self._discard(connection)
        await trio.lowlevel.checkpoint()

    def _discard(self, connection: _Connection) -> None:
        self._connection = None
        connection.close()


def _request_head(request: httpx.Request) -> h11.Request:
    headers = request.headers.raw
    if "host" not in request.headers:
        headers = [(b"Host", request.url.netloc), *headers]
    try:
        return h11.Request(method=request.method, target=request.url.raw_path, headers=headers)
    except h11.LocalProtocolError as exc:
        raise httpx.LocalProtocolError(str(exc), request=request) from exc


async def _send_request(
    connection: _Connection,
    request: httpx.Request,
    head: h11.Request,
    timeout: float | None,
) -> None:
    state = connection.h11
    pending = [state.send(head) or b""]
    size = 0
    body = request.stream
    assert isinstance(body, httpx.AsyncByteStream)
    async for chunk in body:
        if not chunk:
            continue
        pending.append(state.send(h11.Data(data=chunk)) or b"")
        size += len(chunk)
        if size >= _FLUSH_SIZE:
            await _send(connection, request, b"".join(pending), timeout)
            pending.clear()
            size = 0
    pending.append(state.send(h11.EndOfMessage()) or b"")
    await _send(connection, request, b"".join(pending), timeout)


async def _receive_head(
    connection: _Connection, request: httpx.Request, timeout: float | None, progress: _Progress
) -> h11.Response:
    state = connection.h11
    while True:
        event = state.next_event()
        if event is h11.NEED_DATA:
            data = await _receive(connection, request, timeout)
            if not data and not progress.received:
                raise httpx.RemoteProtocolError(
                    "the server closed the connection without a response", request=request
                )
            progress.received += len(data)
            state.receive_data(data)
        elif type(event) is h11.Response:
            return event
        elif type(event) is not h11.InformationalResponse:
            raise httpx.RemoteProtocolError(f"unexpected {event!r} before the response", request=request)


async def _receive_lean_head(connection: _Connection, progress: _Progress) -> tuple[ResponseHead, bytes]:
    """The final response head on ``connection`` (informational ones skipped) and the bytes that came
    after it. Raises ``httpx.RemoteProtocolError`` for a malformed head or a close before it ended."""
    buffer = b""
    while True:
        try:
            end = head_end(buffer)
            while end < 0:
                data = await _receive(connection, None, None)
                if not data:
                    if progress.received:
                        raise httpx.RemoteProtocolError("the server closed the connection mid-head")
                    raise httpx.RemoteProtocolError("the server closed the connection without a response")
                progress.received += len(data)
                buffer += data
                end = head_end(buffer)
            answer = parse_response_head(buffer[:end])
        except HeadError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc
        buffer = buffer[end:]
        if answer.status_code >= 200:
            return answer, buffer
        if answer.status_code == 101:
            raise httpx.RemoteProtocolError("the server switched protocols, which this transport does not do")


async def _send(
    connection: _Connection, request: httpx.Request | None, data: bytes, timeout: float | None
) -> None:
    try:
        if timeout is None:
            await connection.stream.send_all(data)
            return
        with trio.move_on_after(timeout):
            await connection.stream.send_all(data)
            return
    except _NETWORK_ERRORS as exc:
        raise httpx.WriteError(f"sending the request failed: {_reason(exc)}", request=request) from exc
    raise httpx.WriteTimeout(f"could not send for {timeout:g} s", request=request)


async def _receive(connection: _Connection, request: httpx.Request | None, timeout: float | None) -> bytes:
    read = _read_socket if connection.plain else _read_stream
    try:
        if timeout is None:
            data = await read(connection)
        else:
            with trio.move_on_after(timeout) as scope:
                data = await read(connection)
            if scope.cancelled_caught:
                raise httpx.ReadTimeout(f"no data from the server for {timeout:g} s", request=request)
    except _NETWORK_ERRORS as exc:
        raise httpx.ReadError(f"reading the response failed: {_reason(exc)}", request=request) from exc
    return data if type(data) is bytes else bytes(data)


async def _read_stream(connection: _Connection) -> bytes | bytearray:
    return await connection.stream.receive_some(_READ_SIZE)


async def _read_socket(connection: _Connection) -> bytes:
    """One read of a plain socket: wait until it is readable, then take what is there in one call."""
    socket = connection.socket
    while True:
        await trio.lowlevel.wait_readable(socket)
        try:
            return os.read(socket.fileno(), _READ_SIZE)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    return str(cause) or type(cause).__name__


async def _open_tcp_stream(host: str, port: int) -> trio.SocketStream:
    """``trio.open_tcp_stream``, raising one exception where its attempts' nursery raised a group (a cancel
    that reached every attempt is one ``Cancelled``; a failed connect is its ``OSError``)."""
    try:
        return await trio.open_tcp_stream(host, port)
    except BaseExceptionGroup as group:
        raise unwrap(group) from None
