"""TrioTransport: HTTP/1.1 for httpx on trio, against the embedded provider and raw loopback servers."""

from __future__ import annotations

import functools
import gzip
import random
import re
import shutil
import socket
import ssl
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import h11
import httpx
import pytest
import trio
import trio.testing

from sampler._http_head import HeadError, RequestHead
from sampler._transport import StreamedResponse, TransportClosedError, TrioTransport, proxy_configured
from sampler.core import SamplerSettings, sample_step
from sampler.events import Completed, StepRetrying
from sampler.fake import FakeProvider, Fault, FaultPlan, Script
from sampler.messages import ModelRequest, UserMessage
from sampler.retry import RetryPolicy


def ok(body: bytes = b"hello", *extra: bytes) -> bytes:
    headers = b"".join(line + b"\r\n" for line in extra)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), headers, body)


class Peer:
    """One accepted connection, seen from the server."""

    def __init__(self, stream: trio.abc.Stream, index: int) -> None:
        self.stream = stream
        self.index = index
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self.closed = trio.Event()
        self._buffer = b""

    async def _more(self) -> bool:
        try:
            data = await self.stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self.closed.set()
            return False
        self._buffer += data
        return True

    async def _until(self, marker: bytes) -> bytes | None:
        while marker not in self._buffer:
            if not await self._more():
                return None
        found, _, self._buffer = self._buffer.partition(marker)
        return found

    async def request(self) -> bytes | None:
        """The next request's head (its body goes to ``bodies``), or None when the client closed."""
        head = await self._until(b"\r\n\r\n")
        if head is None:
            return None
        fields = dict(line.lower().split(b": ", 1) for line in head.split(b"\r\n")[1:])
        body = b""
        if fields.get(b"transfer-encoding") == b"chunked":
            while (size := await self._until(b"\r\n")) not in (None, b"0"):
                while len(self._buffer) < int(size, 16) + 2 and await self._more():
                    pass
                body += self._buffer[: int(size, 16)]
                self._buffer = self._buffer[int(size, 16) + 2 :]
            await self._until(b"\r\n")
        else:
            length = int(fields.get(b"content-length", b"0"))
            while len(self._buffer) < length and await self._more():
                pass
            body, self._buffer = self._buffer[:length], self._buffer[length:]
        self.heads.append(head)
        self.bodies.append(body)
        return head

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def until_closed(self) -> None:
        """Wait for the client to close the connection, ignoring anything it still sends."""
        while await self._more():
            pass

    def reset(self) -> None:
        """Abort the connection with a TCP reset."""
        sock = self.stream.socket if isinstance(self.stream, trio.SocketStream) else None
        assert sock is not None
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


Handler = Callable[[Peer], Awaitable[None]]


class RawServer:
    """A loopback server that runs ``handler`` for every connection and closes it afterwards."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.peers: list[Peer] = []
        self.alpn: list[str | None] = []
        self.port = 0

    def url(self, path: str = "/", scheme: str = "http", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    async def serve(self, tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp
        try:
            if self.tls is not None:
                tls = trio.SSLStream(tcp, self.tls, server_side=True)
                await tls.do_handshake()
                self.alpn.append(tls.selected_alpn_protocol())
                stream = tls
            peer = Peer(stream, len(self.peers))
            self.peers.append(peer)
            await self.handler(peer)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(tcp)


@pytest.fixture
def serve(nursery: trio.Nursery) -> Callable[..., Awaitable[RawServer]]:
    async def start(handler: Handler, tls: ssl.SSLContext | None = None) -> RawServer:
        server = RawServer(handler, tls)
        listeners = await nursery.start(functools.partial(trio.serve_tcp, server.serve, 0, host="127.0.0.1"))
        server.port = listeners[0].socket.getsockname()[1]
        return server

    return start


async def keep_alive(peer: Peer) -> None:
    """Answer every request with the connection's index as body, on one connection."""
    while await peer.request() is not None:
        await peer.send(ok(b"conn %d" % peer.index))


async def closed_and_not_pooled(transport: TrioTransport, server: RawServer, peer: int = 0) -> None:
    """The connection to ``peer`` went back to no pool, and the server saw it closed."""
    assert transport.idle_connections == 0
    with trio.fail_after(1):
        await server.peers[peer].closed.wait()


@pytest.fixture
async def transport() -> AsyncIterator[TrioTransport]:
    transport = TrioTransport()
    yield transport
    await transport.aclose()


@pytest.fixture
async def client(transport: TrioTransport) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        yield client


async def one_shot(data: bytes = b"x") -> AsyncIterator[bytes]:
    """A request body that can be sent only once."""
    yield data


# ---------------------------------------------------------------------------------------------------------
# Against the embedded provider


def _normalised(body: bytes) -> bytes:
    return re.sub(rb'"created":\d+', b'"created":0', re.sub(rb'"id":"[^"]*"', b'"id":""', body))


@pytest.mark.trio
async def test_a_streamed_completion_reads_as_through_httpx_own_transport() -> None:
    request = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with FakeProvider(Script.text("The quick brown fox jumps over the lazy dog.")) as provider:
        url = provider.base_url + "/chat/completions"
        bodies, statuses, types = [], [], []
        for transport in (TrioTransport(), httpx.AsyncHTTPTransport()):
            with trio.fail_after(10):
                async with (
                    httpx.AsyncClient(transport=transport) as client,
                    client.stream("POST", url, json=request) as response,
                ):
                    statuses.append(response.status_code)
                    types.append(response.headers["content-type"])
                    bodies.append(b"".join([chunk async for chunk in response.aiter_bytes()]))
    assert statuses == [200, 200]
    assert types[0] == types[1] and types[0].startswith("text/event-stream")
    assert b"data: [DONE]" in bodies[0]
    assert _normalised(bodies[0]) == _normalised(bodies[1])


@pytest.mark.trio
@pytest.mark.parametrize("direct", [False, True], ids=["through the client", "straight to the transport"])
async def test_sample_step_completes_on_the_transport_and_retries_a_refusal_and_a_broken_stream(
    direct: bool,
) -> None:
    faults = FaultPlan.scripted([Fault(kind="server_error", http_status=500), Fault.reset(after_chunks=2)])
    policy = RetryPolicy(base_delay=0.01, max_delay=0.02)
    events: list[Any] = []
    transport = TrioTransport()
    with FakeProvider(Script.text("Streamed through h11."), faults=faults) as provider:
        settings = SamplerSettings(base_url=provider.base_url, idle_timeout=5.0, policy=policy)
        with trio.fail_after(10):
            async with httpx.AsyncClient(transport=transport) as client:
                outcome = await sample_step(
                    ModelRequest(model="fake-model", messages=(UserMessage.of_text("hello"),)),
                    request_id="r1",
                    client=client,
                    settings=settings,
                    emit=events.append,
                    rng=random.Random(1),
                    transport=transport if direct else None,
                )
                kept = transport.idle_connections
        requests = provider.stats.requests
    assert isinstance(outcome, Completed), outcome
    assert outcome.message.text == "Streamed through h11."
    assert outcome.attempts == 3 and requests == 3
    assert [event.kind.value for event in events if isinstance(event, StepRetrying)] == [
        "status",
        "connection",
    ]
    assert kept == 1  # the answered request's connection went back to the pool


# ---------------------------------------------------------------------------------------------------------
# Requests and responses


@pytest.mark.trio
async def test_body_bytes_are_yielded_as_they_arrive(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    first_seen = trio.Event()

    async def drip(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await first_seen.wait()
        await peer.send(b"6\r\nsecond\r\n0\r\n\r\n")

    server = await serve(drip)
    chunks = []
    with trio.fail_after(10):
        async with client.stream("GET", server.url()) as response:
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
                first_seen.set()
    assert chunks == [b"first", b"second"]


@pytest.mark.trio
async def test_body_chunks_already_received_are_handed_over_as_one_piece(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def burst(peer: Peer) -> None:
        await peer.request()
        await peer.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"
        )

    server = await serve(burst)
    with trio.fail_after(10):
        async with client.stream("GET", server.url()) as response:
            chunks = [chunk async for chunk in response.aiter_raw()]
    assert chunks == [b"onetwo"]


@pytest.mark.trio
async def test_the_response_carries_status_reason_raw_headers_and_http_version(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def answer(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 201 Fine Indeed\r\nX-Custom: Value\r\nContent-Length: 2\r\n\r\nok")

    server = await serve(answer)
    response = await client.get(server.url())
    assert response.status_code == 201
    assert response.reason_phrase == "Fine Indeed"
    assert response.http_version == "HTTP/1.1"
    assert (b"X-Custom", b"Value") in response.headers.raw
    assert response.content == b"ok"


@pytest.mark.trio
async def test_the_request_arrives_with_one_host_header_and_its_body(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    await client.post(server.url("/v1/x?q=1"), content=b'{"a": 1}')
    head = server.peers[0].heads[0]
    assert head.startswith(b"POST /v1/x?q=1 HTTP/1.1\r\n")
    assert head.lower().count(b"\r\nhost: ") == 1
    assert server.peers[0].bodies == [b'{"a": 1}']


@pytest.mark.trio
async def test_a_missing_host_header_is_taken_from_the_url(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    request = httpx.Request("GET", server.url())
    del request.headers["host"]
    response = await transport.handle_async_request(request)
    await response.aread()
    assert f"\r\nHost: 127.0.0.1:{server.port}".encode() in server.peers[0].heads[0]


@pytest.mark.trio
async def test_a_streamed_request_body_is_sent_chunked(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for piece in (b"one ", b"", b"two ", b"three"):
            yield piece

    server = await serve(keep_alive)
    response = await client.post(server.url(), content=pieces())
    assert response.status_code == 200
    assert b"transfer-encoding: chunked" in server.peers[0].heads[0].lower()
    assert server.peers[0].bodies == [b"one two three"]


@pytest.mark.trio
async def test_informational_responses_are_skipped(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def continue_first(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(b"HTTP/1.1 100 Continue\r\n\r\n" + ok())

    server = await serve(continue_first)
    first = await client.post(server.url(), content=b"body")
    second = await client.post(server.url(), content=b"body")
    assert (first.status_code, first.content) == (200, b"hello")
    assert (second.status_code, second.content) == (200, b"hello")
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_an_http_1_0_response_is_read_to_the_close_and_not_reused(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def old_server(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")

    server = await serve(old_server)
    first = await client.get(server.url())
    assert (first.http_version, first.content) == ("HTTP/1.0", b"until the end")
    await client.get(server.url())
    assert len(server.peers) == 2


# ---------------------------------------------------------------------------------------------------------
# Keep-alive


@pytest.mark.trio
async def test_sequential_requests_share_one_kept_alive_connection(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    bodies = [(await client.get(server.url())).content for _ in range(3)]
    assert bodies == [b"conn 0"] * 3
    assert len(server.peers) == 1
    assert len(server.peers[0].heads) == 3


@pytest.mark.trio
async def test_a_chunked_response_is_decoded_and_its_connection_kept_alive(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def chunked(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n")
            await trio.sleep(0.1)
            await peer.send(b"6\r\n world\r\n0\r\nTrailer: x\r\n\r\n")

    server = await serve(chunked)
    bodies = [(await client.get(server.url())).content for _ in range(3)]
    assert bodies == [b"hello world"] * 3
    assert len(server.peers) == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokSURPLUS",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nSURPLUS",
    ],
    ids=["connection-close", "bytes-after-a-length-body", "bytes-after-a-chunked-body"],
)
@pytest.mark.trio
async def test_a_connection_is_not_reused_when_the_response_forbids_it_or_sent_more_than_its_body(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    client: httpx.AsyncClient,
    answer: bytes,
    autojump_clock: Any,
) -> None:
    async def once(peer: Peer) -> None:
        await peer.request()
        await peer.send(answer)
        await peer.until_closed()

    server = await serve(once)
    assert (await client.get(server.url())).content == b"ok"
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_a_malformed_chunk_size_is_a_remote_protocol_error_and_closes_the_connection(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    client: httpx.AsyncClient,
    autojump_clock: Any,
) -> None:
    async def bad_chunks(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n")
        await peer.until_closed()

    server = await serve(bad_chunks)
    with pytest.raises(httpx.RemoteProtocolError, match="malformed chunk size"):
        await client.get(server.url())
    assert transport.idle_connections == 0


@pytest.mark.trio
async def test_a_response_not_read_to_the_end_closes_its_connection(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    client: httpx.AsyncClient,
    autojump_clock: Any,
) -> None:
    async def slow_body(peer: Peer) -> None:
        if peer.index == 0:
            await peer.request()
            await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
            await peer.until_closed()
        else:
            await keep_alive(peer)

    server = await serve(slow_body)
    async with client.stream("GET", server.url()) as response:
        assert response.status_code == 200
    await closed_and_not_pooled(transport, server)
    assert (await client.get(server.url())).content == b"conn 1"


@pytest.mark.trio
async def test_idle_connections_beyond_the_limit_are_closed(
    serve: Callable[..., Awaitable[RawServer]], autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    transport = TrioTransport(max_keepalive_connections=2)
    async with httpx.AsyncClient(transport=transport) as client:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(client.get, server.url())
        assert len(server.peers) == 3
        assert transport.idle_connections == 2
        await trio.testing.wait_all_tasks_blocked()
        assert sum(peer.closed.is_set() for peer in server.peers) == 1


@pytest.mark.trio
async def test_an_idle_connection_is_not_reused_after_the_keepalive_expiry(
    serve: Callable[..., Awaitable[RawServer]], autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    async with httpx.AsyncClient(transport=TrioTransport(keepalive_expiry=5.0)) as client:
        await client.get(server.url())
        await trio.sleep(4.9)
        assert (await client.get(server.url())).content == b"conn 0"
        await trio.sleep(5.0)
        assert (await client.get(server.url())).content == b"conn 1"
        with trio.fail_after(1):
            await server.peers[0].closed.wait()


@pytest.mark.trio
async def test_aclose_closes_pooled_connections_and_refuses_later_requests(
    serve: Callable[..., Awaitable[RawServer]], autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    transport = TrioTransport()
    client = httpx.AsyncClient(transport=transport)
    await client.get(server.url())
    assert transport.idle_connections == 1
    await transport.aclose()
    await closed_and_not_pooled(transport, server)
    with pytest.raises(TransportClosedError):
        await client.get(server.url())


@pytest.mark.trio
async def test_close_idle_now_closes_pooled_connections_from_another_thread(
    serve: Callable[..., Awaitable[RawServer]],
) -> None:
    server = await serve(keep_alive)
    transport = TrioTransport()
    client = httpx.AsyncClient(transport=transport)
    await client.get(server.url())
    assert transport.idle_connections == 1
    await trio.to_thread.run_sync(transport.close_idle_now)
    assert transport.idle_connections == 0
    with trio.fail_after(5):
        await server.peers[0].closed.wait()
    with pytest.raises(TransportClosedError):
        await client.get(server.url())


@pytest.mark.trio
async def test_a_response_still_streaming_at_aclose_does_not_return_its_connection(
    serve: Callable[..., Awaitable[RawServer]], autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        async with client.stream("GET", server.url()) as response:
            await transport.aclose()
            assert await response.aread() == b"conn 0"
        assert transport.idle_connections == 0
        with trio.fail_after(1):
            await server.peers[0].closed.wait()


# ---------------------------------------------------------------------------------------------------------
# Dead connections and retries


@pytest.mark.parametrize("how", ["close", "reset"])
@pytest.mark.trio
async def test_a_reused_connection_found_dead_is_retried_once_on_a_fresh_one(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any, how: str
) -> None:
    async def dies_after_one(peer: Peer) -> None:
        if peer.index > 0:
            return await keep_alive(peer)
        await peer.request()
        await peer.send(ok(b"conn 0"))
        await peer.request()
        if how == "reset":
            peer.reset()

    server = await serve(dies_after_one)
    assert (await client.get(server.url())).content == b"conn 0"
    assert (await client.post(server.url(), content=b"again")).content == b"conn 1"
    assert len(server.peers) == 2
    assert server.peers[1].bodies == [b"again"]


@pytest.mark.trio
async def test_an_idle_connection_the_server_closed_is_never_used(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def one_per_connection(peer: Peer) -> None:
        await peer.request()
        await peer.send(ok(b"conn %d" % peer.index))

    server = await serve(one_per_connection)
    await client.get(server.url())
    await trio.testing.wait_all_tasks_blocked()
    # A body that cannot be sent twice would rule out a retry: only not using the dead socket works.
    assert (await client.post(server.url(), content=one_shot())).content == b"conn 1"
    assert [len(peer.heads) for peer in server.peers] == [1, 1]


@pytest.mark.trio
async def test_a_reused_connection_is_not_retried_when_the_body_cannot_be_sent_again(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def dies_after_one(peer: Peer) -> None:
        await peer.request()
        await peer.send(ok())
        await peer.request()

    server = await serve(dies_after_one)
    await client.get(server.url())
    with pytest.raises(httpx.RemoteProtocolError):
        await client.post(server.url(), content=one_shot())
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_no_retry_once_a_byte_of_the_response_arrived(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def breaks_in_the_head(peer: Peer) -> None:
        await peer.request()
        await peer.send(ok())
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Le")

    server = await serve(breaks_in_the_head)
    await client.get(server.url())
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        await client.get(server.url())
    assert isinstance(caught.value.__cause__, h11.RemoteProtocolError)
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_a_fresh_connection_closed_without_an_answer_is_not_retried(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def hang_up(peer: Peer) -> None:
        await peer.request()

    server = await serve(hang_up)
    with pytest.raises(httpx.RemoteProtocolError, match="without a response"):
        await client.get(server.url())
    assert len(server.peers) == 1


# ---------------------------------------------------------------------------------------------------------
# Errors and timeouts


@pytest.mark.trio
async def test_a_refused_connection_is_a_connect_error(client: httpx.AsyncClient) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(httpx.ConnectError) as caught:
        await client.get(f"http://127.0.0.1:{port}/")
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.trio
async def test_a_silent_server_is_a_read_timeout(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def silent(peer: Peer) -> None:
        await peer.request()
        await peer.until_closed()

    server = await serve(silent)
    started = trio.current_time()
    with pytest.raises(httpx.ReadTimeout):
        await client.get(server.url(), timeout=httpx.Timeout(5.0, read=7.0))
    assert trio.current_time() - started == pytest.approx(7.0)
    with trio.fail_after(1):
        await server.peers[0].closed.wait()


@pytest.mark.trio
async def test_the_read_timeout_bounds_each_receive_not_the_whole_body(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def trickle(peer: Peer, then_stall: bool) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
        for _ in range(3):
            await trio.sleep(3)
            await peer.send(b"x")
        if then_stall:
            await trio.sleep(10)
        await peer.send(b"x")

    server = await serve(functools.partial(trickle, then_stall=False))
    response = await client.get(server.url(), timeout=5.0)
    assert response.content == b"xxxx"

    server = await serve(functools.partial(trickle, then_stall=True))
    async with client.stream("GET", server.url(), timeout=5.0) as streamed:
        with pytest.raises(httpx.ReadTimeout):
            await streamed.aread()


@pytest.mark.trio
async def test_a_server_that_never_reads_is_a_write_timeout(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def never_reads(peer: Peer) -> None:
        assert isinstance(peer.stream, trio.SocketStream)
        peer.stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await trio.sleep_forever()

    server = await serve(never_reads)
    started = trio.current_time()
    with pytest.raises(httpx.WriteTimeout):
        await client.post(server.url(), content=b"x" * (16 << 20), timeout=httpx.Timeout(5.0, write=3.0))
    assert trio.current_time() - started == pytest.approx(3.0)


@pytest.mark.trio
async def test_a_tls_handshake_that_never_ends_is_a_connect_timeout(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def mute(peer: Peer) -> None:
        await trio.sleep_forever()

    server = await serve(mute)
    started = trio.current_time()
    with pytest.raises(httpx.ConnectTimeout):
        await client.get(server.url(scheme="https"), timeout=httpx.Timeout(5.0, connect=2.0))
    assert trio.current_time() - started == pytest.approx(2.0)


@pytest.mark.trio
async def test_a_peer_closing_mid_body_is_a_remote_protocol_error(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def cut_short(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")

    server = await serve(cut_short)
    async with client.stream("GET", server.url()) as response:
        with pytest.raises(httpx.RemoteProtocolError, match="closed the connection before the response body"):
            await response.aread()


@pytest.mark.trio
async def test_a_peer_resetting_mid_body_is_a_read_error(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def reset(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
        await trio.sleep(1)
        peer.reset()

    server = await serve(reset)
    async with client.stream("GET", server.url()) as response:
        with pytest.raises(httpx.ReadError) as caught:
            await response.aread()
    assert isinstance(caught.value.__cause__, trio.BrokenResourceError)


@pytest.mark.trio
async def test_a_malformed_response_is_a_remote_protocol_error(
    serve: Callable[..., Awaitable[RawServer]], client: httpx.AsyncClient, autojump_clock: Any
) -> None:
    async def garbage(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"SPDY/9 nonsense\r\n\r\n")

    server = await serve(garbage)
    with pytest.raises(httpx.RemoteProtocolError):
        await client.get(server.url())


@pytest.mark.trio
async def test_a_body_shorter_than_its_content_length_is_a_local_protocol_error(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    request = httpx.Request("POST", server.url(), headers={"content-length": "10"}, content=one_shot(b"abc"))
    with pytest.raises(httpx.LocalProtocolError) as caught:
        await transport.handle_async_request(request)
    assert isinstance(caught.value.__cause__, h11.LocalProtocolError)
    assert transport.idle_connections == 0


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/file", "ws://127.0.0.1/socket"])
@pytest.mark.trio
async def test_schemes_other_than_http_and_https_are_unsupported(transport: TrioTransport, url: str) -> None:
    with pytest.raises(httpx.UnsupportedProtocol):
        await transport.handle_async_request(httpx.Request("GET", url))


# ---------------------------------------------------------------------------------------------------------
# Cancellation


@pytest.mark.trio
async def test_cancelling_mid_body_closes_the_connection_and_pools_nothing(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    client: httpx.AsyncClient,
    autojump_clock: Any,
) -> None:
    async def slow_body(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
        await peer.until_closed()

    server = await serve(slow_body)
    chunks = []
    with trio.move_on_after(1) as scope:
        async with client.stream("GET", server.url()) as response:
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
    assert scope.cancelled_caught
    assert chunks == [b"hello"]
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_cancelling_before_the_response_closes_the_connection(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    client: httpx.AsyncClient,
    autojump_clock: Any,
) -> None:
    async def silent(peer: Peer) -> None:
        await peer.request()
        await peer.until_closed()

    server = await serve(silent)
    with trio.move_on_after(1):
        await client.get(server.url())
    await closed_and_not_pooled(transport, server)


# ---------------------------------------------------------------------------------------------------------
# TLS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-keyout", str(key), "-out", str(cert)),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    yield cert, key


def _server_context(certificate: tuple[Path, Path], names: list[str | None]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    context.set_alpn_protocols(["h2", "http/1.1"])
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)
    return context


@pytest.mark.trio
async def test_https_speaks_http_1_1_with_sni_and_keeps_the_connection_alive(
    serve: Callable[..., Awaitable[RawServer]], certificate: tuple[Path, Path]
) -> None:
    names: list[str | None] = []
    server = await serve(keep_alive, tls=_server_context(certificate, names))
    trusting = ssl.create_default_context(cafile=str(certificate[0]))
    with trio.fail_after(10):
        async with httpx.AsyncClient(transport=TrioTransport(verify=trusting)) as client:
            bodies = [(await client.get(server.url(scheme="https", host="localhost"))).content for _ in "ab"]
    assert bodies == [b"conn 0", b"conn 0"]
    assert names == ["localhost"]
    assert server.alpn == ["http/1.1"]


@pytest.mark.trio
async def test_https_refuses_an_untrusted_certificate_unless_verification_is_off(
    serve: Callable[..., Awaitable[RawServer]], certificate: tuple[Path, Path], autojump_clock: Any
) -> None:
    server = await serve(keep_alive, tls=_server_context(certificate, []))
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(server.url(scheme="https"))
    assert isinstance(caught.value.__cause__, trio.BrokenResourceError)
    async with httpx.AsyncClient(transport=TrioTransport(verify=False)) as client:
        assert (await client.get(server.url(scheme="https"))).status_code == 200


# ---------------------------------------------------------------------------------------------------------
# Proxies


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_without_proxy_variables_no_url_needs_a_proxy(no_proxy_env: pytest.MonkeyPatch) -> None:
    assert not proxy_configured("http://127.0.0.1:8080/v1")
    assert not proxy_configured("https://api.example.com/v1")


def test_a_proxy_variable_applies_to_its_own_scheme(no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert proxy_configured("https://api.example.com/v1")
    assert not proxy_configured("http://api.example.com/v1")


def test_all_proxy_applies_to_every_scheme(no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("all_proxy", "socks5://proxy.internal:1080")
    assert proxy_configured("http://api.example.com/v1")
    assert proxy_configured("https://api.example.com/v1")


def test_no_proxy_exempts_the_hosts_it_names(no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    no_proxy_env.setenv("NO_PROXY", "localhost,127.0.0.1,.example.com")
    assert not proxy_configured("http://127.0.0.1:8080/v1")
    assert not proxy_configured("http://api.example.com/v1")
    assert proxy_configured("http://api.other.org/v1")


# ---------------------------------------------------------------------------------------------------------
# The lean path: TrioTransport.post


async def post_all(
    transport: TrioTransport,
    url: str,
    body: bytes = b"{}",
    headers: tuple[tuple[str, str], ...] = (),
    **options: Any,
) -> tuple[StreamedResponse, bytes]:
    """POST ``body`` to ``url`` through :meth:`TrioTransport.post` and read the whole (decoded) answer;
    one that never ends fails within 10 s (at once, under the autojump clock)."""
    with trio.fail_after(10):
        response = await transport.post(RequestHead.build("POST", url, headers), body, **options)
        try:
            return response, b"".join([chunk async for chunk in response.aiter_bytes()])
        finally:
            await response.aclose()


@pytest.mark.trio
async def test_post_sends_the_head_as_built_then_the_extra_headers_the_length_and_the_body(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    url = server.url("/v1/chat?api-version=2")
    headers = (("Content-Type", "application/json"), ("Authorization", "Bearer k"))
    await post_all(transport, url, b'{"a": 1}', headers, extra_headers=[("traceparent", "00-1-2-01")])
    await post_all(transport, url, b"", headers, extra_headers=[("X-Other", "2")])
    await post_all(transport, url, b"x" * 200_000, headers)
    start = b"POST /v1/chat?api-version=2 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port
    start += b"Content-Type: application/json\r\nAuthorization: Bearer k\r\n"
    assert server.peers[0].heads == [
        start + b"traceparent: 00-1-2-01\r\nContent-Length: 8",
        start + b"X-Other: 2\r\nContent-Length: 0",
        start + b"Content-Length: 200000",
    ]
    assert server.peers[0].bodies == [b'{"a": 1}', b"", b"x" * 200_000]


@pytest.mark.trio
async def test_post_gives_the_status_reason_version_and_headers_as_received(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def answer(peer: Peer) -> None:
        await peer.request()
        await peer.send(
            b"HTTP/1.1 201 Fine Indeed\r\nX-Custom:  Value \r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
            b"Content-Length: 2\r\n\r\nok"
        )
        await peer.until_closed()

    server = await serve(answer)
    response, body = await post_all(transport, server.url())
    assert (response.status_code, response.reason_phrase, response.http_version) == (
        201,
        "Fine Indeed",
        "HTTP/1.1",
    )
    assert isinstance(response.headers, httpx.Headers)
    assert response.headers["x-custom"] == "Value"
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.headers.raw[0] == (b"X-Custom", b"Value")
    assert body == b"ok"


@pytest.mark.parametrize(
    "answer",
    [
        ok(b"hello world"),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Length: 11\r\n\r\nhello world",
    ],
    ids=["content-length", "chunked", "repeated-content-length"],
)
@pytest.mark.trio
async def test_post_reads_a_framed_answer_and_reuses_its_connection_for_the_next_post(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, answer: bytes, autojump_clock: Any
) -> None:
    async def framed(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(answer[:30])
            await trio.sleep(0.1)
            await peer.send(answer[30:])

    server = await serve(framed)
    bodies = []
    for _ in range(3):
        bodies.append((await post_all(transport, server.url()))[1])
        assert transport.idle_connections == 1
    assert bodies == [b"hello world"] * 3
    assert len(server.peers) == 1 and len(server.peers[0].heads) == 3


@pytest.mark.trio
async def test_post_and_httpx_requests_share_the_pooled_connections(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    client: httpx.AsyncClient,
    autojump_clock: Any,
) -> None:
    server = await serve(keep_alive)
    first = (await post_all(transport, server.url()))[1]
    second = (await client.post(server.url(), content=b"through httpx")).content
    third = (await post_all(transport, server.url()))[1]
    assert [first, second, third] == [b"conn 0"] * 3
    assert server.peers[0].bodies == [b"{}", b"through httpx", b"{}"]


@pytest.mark.trio
async def test_post_reads_an_http_1_0_answer_without_length_to_the_close_and_does_not_reuse_it(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def old_server(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.0 200 OK\r\n\r\nuntil ")
        await trio.sleep(0.1)
        await peer.send(b"the end")

    server = await serve(old_server)
    response, body = await post_all(transport, server.url())
    assert (response.http_version, body) == ("HTTP/1.0", b"until the end")
    assert transport.idle_connections == 0
    await post_all(transport, server.url())
    assert len(server.peers) == 2


@pytest.mark.trio
async def test_post_skips_informational_answers(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def continue_first(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            await trio.sleep(0.1)
            await peer.send(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" + ok())

    server = await serve(continue_first)
    answers = [await post_all(transport, server.url()) for _ in range(2)]
    assert [(response.status_code, body) for response, body in answers] == [(200, b"hello")] * 2
    assert len(server.peers) == 1


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("POST", b"HTTP/1.1 204 No Content\r\n\r\n"),
        ("POST", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"),
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"),
    ],
    ids=["204", "304-with-a-length", "head"],
)
@pytest.mark.trio
async def test_post_an_answer_without_a_body_is_empty_and_keeps_its_connection(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    method: str,
    answer: bytes,
    autojump_clock: Any,
) -> None:
    async def bodiless_first(peer: Peer) -> None:
        await peer.request()
        await peer.send(answer)
        await keep_alive(peer)

    server = await serve(bodiless_first)
    with trio.fail_after(10):
        response = await transport.post(RequestHead.build(method, server.url(), []), b"")
        assert [chunk async for chunk in response.aiter_bytes()] == []
    assert transport.idle_connections == 1
    assert (await post_all(transport, server.url()))[1] == b"conn 0"
    assert len(server.peers) == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, Close\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokSURPLUS",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nSURPLUS",
        b"HTTP/1.1 204 No Content\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ],
    ids=[
        "connection-close",
        "close-in-a-list",
        "bytes-after-a-length-body",
        "bytes-after-a-chunked-body",
        "bytes-after-a-204",
        "http-1.0-with-a-length",
    ],
)
@pytest.mark.trio
async def test_post_does_not_pool_a_connection_its_answer_forbids_or_that_sent_more_than_its_body(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, answer: bytes, autojump_clock: Any
) -> None:
    async def once(peer: Peer) -> None:
        await peer.request()
        await peer.send(answer)
        await peer.until_closed()

    server = await serve(once)
    assert (await post_all(transport, server.url()))[1] in (b"ok", b"")
    await closed_and_not_pooled(transport, server)


@pytest.mark.parametrize(
    "answer",
    [
        b"SPDY/9 nonsense\r\n\r\n",
        b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nX-Long: first\r\n second\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nNo colon\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (70 * 1024),
    ],
    ids=[
        "not-http",
        "http-2",
        "folded-line",
        "colon-less-line",
        "other-transfer-coding",
        "disagreeing-lengths",
        "non-numeric-length",
        "head-over-64-kib",
    ],
)
@pytest.mark.trio
async def test_post_a_malformed_answer_head_is_a_remote_protocol_error_and_pools_nothing(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, answer: bytes, autojump_clock: Any
) -> None:
    async def malformed(peer: Peer) -> None:
        await peer.request()
        await peer.send(answer)
        await peer.until_closed()

    server = await serve(malformed)
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        await transport.post(RequestHead.build("POST", server.url(), []), b"{}")
    assert isinstance(caught.value.__cause__, HeadError)
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_post_a_switch_of_protocols_is_a_remote_protocol_error(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def upgrade(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n" + ok())
        await peer.until_closed()

    server = await serve(upgrade)
    with pytest.raises(httpx.RemoteProtocolError, match="switched protocols"):
        await post_all(transport, server.url())
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_post_a_malformed_chunk_size_is_a_remote_protocol_error_and_closes_the_connection(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def bad_chunks(peer: Peer) -> None:
        await peer.request()
        await peer.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0x5\r\nworld\r\n"
        )
        await peer.until_closed()

    server = await serve(bad_chunks)
    with pytest.raises(httpx.RemoteProtocolError, match="malformed chunk size"):
        await post_all(transport, server.url())
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_post_a_peer_closing_mid_body_is_a_remote_protocol_error(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def cut_short(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")

    server = await serve(cut_short)
    with pytest.raises(httpx.RemoteProtocolError, match="closed the connection before the response body"):
        await post_all(transport, server.url())
    assert transport.idle_connections == 0


@pytest.mark.parametrize("how", ["close", "reset"])
@pytest.mark.trio
async def test_post_retries_a_reused_connection_found_dead_once_on_a_fresh_one(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any, how: str
) -> None:
    async def dies_after_one(peer: Peer) -> None:
        if peer.index > 0:
            return await keep_alive(peer)
        await peer.request()
        await peer.send(ok(b"conn 0"))
        await peer.request()
        if how == "reset":
            peer.reset()

    server = await serve(dies_after_one)
    assert (await post_all(transport, server.url(), b"first"))[1] == b"conn 0"
    assert (await post_all(transport, server.url(), b"again"))[1] == b"conn 1"
    assert len(server.peers) == 2
    assert server.peers[0].bodies == [b"first", b"again"]
    assert server.peers[1].bodies == [b"again"]


@pytest.mark.trio
async def test_post_retries_a_dead_reused_connection_only_once(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def answers_once_then_hangs_up(peer: Peer) -> None:
        await peer.request()
        if peer.index == 0:
            await peer.send(ok())
            await peer.request()

    server = await serve(answers_once_then_hangs_up)
    await post_all(transport, server.url())
    with pytest.raises(httpx.RemoteProtocolError, match="without a response"):
        await post_all(transport, server.url())
    assert len(server.peers) == 2
    assert transport.idle_connections == 0


@pytest.mark.parametrize(
    "partial",
    [b"HTTP/1.1 200 OK\r\nContent-Le", b"HTTP/1.1 200 O\x00K\r\n\r\n"],
    ids=["cut-short", "malformed"],
)
@pytest.mark.trio
async def test_post_does_not_retry_once_a_byte_of_the_answer_arrived(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, partial: bytes, autojump_clock: Any
) -> None:
    async def breaks_in_the_head(peer: Peer) -> None:
        await peer.request()
        await peer.send(ok())
        await peer.request()
        await peer.send(partial)

    server = await serve(breaks_in_the_head)
    await post_all(transport, server.url())
    with pytest.raises(httpx.RemoteProtocolError):
        await post_all(transport, server.url())
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_post_does_not_retry_a_fresh_connection_closed_without_an_answer(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def hang_up(peer: Peer) -> None:
        await peer.request()

    server = await serve(hang_up)
    with pytest.raises(httpx.RemoteProtocolError, match="without a response"):
        await post_all(transport, server.url())
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_post_on_a_closed_transport_raises_transport_closed_error(
    serve: Callable[..., Awaitable[RawServer]], autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    transport = TrioTransport()
    await post_all(transport, server.url())
    await transport.aclose()
    await closed_and_not_pooled(transport, server)
    with pytest.raises(TransportClosedError):
        await post_all(transport, server.url())
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_post_an_answer_still_streaming_at_aclose_ends_and_does_not_return_its_connection(
    serve: Callable[..., Awaitable[RawServer]], autojump_clock: Any
) -> None:
    server = await serve(keep_alive)
    transport = TrioTransport()
    response = await transport.post(RequestHead.build("POST", server.url(), []), b"{}")
    await transport.aclose()
    assert b"".join([chunk async for chunk in response.aiter_bytes()]) == b"conn 0"
    await closed_and_not_pooled(transport, server)


@pytest.mark.parametrize(
    "header",
    [("Bad Name", "x"), ("X-Trace", "a\r\nInjected: 1"), ("X-Trace", "caf\u00e9"), ("Content-Length", "1")],
    ids=["name-not-a-token", "crlf-in-value", "non-ascii-value", "framing-header"],
)
@pytest.mark.trio
async def test_post_with_a_bad_extra_header_is_a_local_protocol_error_before_anything_is_sent(
    serve: Callable[..., Awaitable[RawServer]],
    transport: TrioTransport,
    header: tuple[str, str],
    autojump_clock: Any,
) -> None:
    server = await serve(keep_alive)
    await post_all(transport, server.url())
    with pytest.raises(httpx.LocalProtocolError) as caught:
        await post_all(transport, server.url(), extra_headers=[header])
    assert isinstance(caught.value.__cause__, HeadError)
    await trio.testing.wait_all_tasks_blocked()
    assert len(server.peers) == 1 and len(server.peers[0].heads) == 1
    assert transport.idle_connections == 1  # the pooled connection was not even taken


def _content_coded(payload: bytes, coding: str) -> bytes:
    for step in (part.strip() for part in coding.split(",")):
        payload = gzip.compress(payload) if step in ("gzip", "x-gzip") else zlib.compress(payload)
    return payload


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "GZIP", "deflate, gzip"])
@pytest.mark.trio
async def test_post_decodes_a_gzip_or_deflate_encoded_body_as_it_arrives(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, coding: str, autojump_clock: Any
) -> None:
    payload = b"data: a streamed token\n\n" * 200
    encoded = _content_coded(payload, coding.lower())
    third = len(encoded) // 3

    async def compressed(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\n" % coding.encode())
            await peer.send(b"Transfer-Encoding: chunked\r\n\r\n")
            for piece in (encoded[:third], encoded[third : 2 * third], encoded[2 * third :]):
                await peer.send(b"%x\r\n%s\r\n" % (len(piece), piece))
                await trio.sleep(0.1)
            await peer.send(b"0\r\n\r\n")

    server = await serve(compressed)
    response, body = await post_all(transport, server.url())
    assert body == payload
    assert response.headers["content-encoding"] == coding
    assert (await post_all(transport, server.url()))[1] == payload
    assert len(server.peers) == 1


@pytest.mark.trio
async def test_post_passes_a_body_in_another_content_coding_as_it_is_and_refuses_a_corrupt_gzip_one(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def coded(peer: Peer) -> None:
        await peer.request()
        await peer.send(ok(b"\x0b\x02\x80raw", b"Content-Encoding: br"))
        await peer.request()
        await peer.send(ok(b"not gzip at all", b"Content-Encoding: gzip"))
        await peer.until_closed()

    server = await serve(coded)
    assert (await post_all(transport, server.url()))[1] == b"\x0b\x02\x80raw"
    with pytest.raises(httpx.DecodingError):
        await post_all(transport, server.url())


@pytest.mark.trio
async def test_post_closing_an_answer_before_the_end_of_its_body_closes_the_connection(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def slow_body(peer: Peer) -> None:
        if peer.index > 0:
            return await keep_alive(peer)
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
        await peer.until_closed()

    server = await serve(slow_body)
    response = await transport.post(RequestHead.build("POST", server.url(), []), b"{}")
    assert await response.aiter_bytes().__anext__() == b"hello"
    await response.aclose()
    await closed_and_not_pooled(transport, server)
    assert (await post_all(transport, server.url()))[1] == b"conn 1"


@pytest.mark.trio
async def test_post_cancelled_mid_body_closes_the_connection_and_pools_nothing(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def slow_body(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await peer.until_closed()

    server = await serve(slow_body)
    chunks = []
    with trio.move_on_after(1) as scope:
        response = await transport.post(RequestHead.build("POST", server.url(), []), b"{}")
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
    assert scope.cancelled_caught
    assert chunks == [b"hello"]
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_post_cancelled_before_the_answer_closes_the_connection(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def silent(peer: Peer) -> None:
        await peer.request()
        await peer.until_closed()

    server = await serve(silent)
    with trio.move_on_after(1) as scope:
        await post_all(transport, server.url())
    assert scope.cancelled_caught
    await closed_and_not_pooled(transport, server)


@pytest.mark.trio
async def test_post_to_a_server_that_never_reads_is_a_write_timeout(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def never_reads(peer: Peer) -> None:
        assert isinstance(peer.stream, trio.SocketStream)
        peer.stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await trio.sleep_forever()

    server = await serve(never_reads)
    started = trio.current_time()
    with pytest.raises(httpx.WriteTimeout):
        await post_all(transport, server.url(), b"x" * (16 << 20), write_timeout=3.0)
    assert trio.current_time() - started == pytest.approx(3.0)
    assert transport.idle_connections == 0


@pytest.mark.trio
async def test_post_to_a_refused_port_is_a_connect_error(transport: TrioTransport) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(httpx.ConnectError) as caught:
        await post_all(transport, f"http://127.0.0.1:{port}/")
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.trio
async def test_post_a_tls_handshake_that_never_ends_is_a_connect_timeout(
    serve: Callable[..., Awaitable[RawServer]], transport: TrioTransport, autojump_clock: Any
) -> None:
    async def mute(peer: Peer) -> None:
        await trio.sleep_forever()

    server = await serve(mute)
    started = trio.current_time()
    with pytest.raises(httpx.ConnectTimeout):
        await post_all(transport, server.url(scheme="https"), connect_timeout=2.0)
    assert trio.current_time() - started == pytest.approx(2.0)


@pytest.mark.trio
async def test_post_speaks_https_with_sni_and_keeps_the_connection_alive(
    serve: Callable[..., Awaitable[RawServer]], certificate: tuple[Path, Path]
) -> None:
    names: list[str | None] = []
    server = await serve(keep_alive, tls=_server_context(certificate, names))
    transport = TrioTransport(verify=ssl.create_default_context(cafile=str(certificate[0])))
    with trio.fail_after(10):
        bodies = [(await post_all(transport, server.url(scheme="https", host="localhost")))[1] for _ in "ab"]
        await transport.aclose()
    assert bodies == [b"conn 0", b"conn 0"]
    assert names == ["localhost"]
    assert server.alpn == ["http/1.1"]
