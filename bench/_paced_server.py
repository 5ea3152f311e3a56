"""A paced OpenAI-style streaming model server, in a process of its own: ``chunks`` chunks ``interval``
seconds apart per answer, like a model producing 1/``interval`` tokens a second, each chunk carrying the
monotonic time (in microseconds, ``t<us>;``) at which it was written to the socket.

Run by :func:`paced_server`; ``python bench/_paced_server.py --chunks N --interval S`` prints its port and
serves until its standard input closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

__all__ = ["paced_server"]


def _sse(payload: bytes) -> bytes:
    event = b"data: " + payload + b"\n\n"
    return f"{len(event):x}\r\n".encode() + event + b"\r\n"


_HEAD = b'{"id":"paced","object":"chat.completion.chunk","created":0,"model":"paced","choices":[{"index":0,'
_FINISH = _sse(_HEAD + b'"delta":{},"finish_reason":"stop"}]}')
_DONE = _sse(b"[DONE]") + b"0\r\n\r\n"
_RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


async def _serve_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chunks: int, interval: float
) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(_RESPONSE_HEAD)
            for _ in range(chunks):
                stamp = f"t{time.monotonic_ns() // 1000};".encode()
                writer.write(_sse(_HEAD + b'"delta":{"content":"' + stamp + b'"},"finish_reason":null}]}'))
                await writer.drain()
                await asyncio.sleep(interval)
            writer.write(_FINISH + _DONE)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def _serve(chunks: int, interval: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve_one(r, w, chunks, interval), "127.0.0.1", 0, backlog=4096
    )
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    loop = asyncio.get_running_loop()
    # The server lives as long as its parent holds its stdin open.
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


@contextlib.contextmanager
def paced_server(chunks: int, interval: float) -> Iterator[str]:
    """A paced OpenAI-style streaming server in a child process; yields its base URL."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--chunks", str(chunks), "--interval", str(interval)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=40, help="chunks per answer")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between chunks")
    args = parser.parse_args()
    asyncio.run(_serve(args.chunks, args.interval))


if __name__ == "__main__":
    main()
