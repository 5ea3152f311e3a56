"""An in-process httpx transport serving scripted OpenAI-style responses, for autojump-clock tests.

Each request takes the next reply from the script; a reply is a status with a body, or a stream of SSE
chunks in which a float means "stay silent this many seconds" and an exception means "break here".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio


def chunk(text: str) -> bytes:
    payload = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(payload)}\n\n".encode()


def finish(reason: str = "stop") -> bytes:
    payload = {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}
    return f"data: {json.dumps(payload)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()


def stream_of(text: str, pieces: int = 4) -> list[Any]:
    size = max(1, len(text) // pieces)
    return [chunk(text[i : i + size]) for i in range(0, len(text), size)] + [finish()]


@dataclass
class Status:
    status: int
    body: Any = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stream:
    parts: Sequence[Any]


@dataclass
class ScriptedTransport(httpx.AsyncBaseTransport):
    script: list[Status | Stream]
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(await request.aread()))
        if not self.script:
            raise AssertionError("the script has no reply left")
        reply = self.script.pop(0)
        if isinstance(reply, Status):
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            return httpx.Response(reply.status, content=body, headers=reply.headers)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_play(reply.parts))


async def _play(parts: Sequence[Any]) -> AsyncIterator[bytes]:
    for part in parts:
        if isinstance(part, float | int):
            await trio.sleep(part)
        elif isinstance(part, BaseException):
            raise part
        else:
            yield part
