"""The HTTP plumbing of the embedded provider's ASGI app: reading bodies, noticing disconnects, answering."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import msgspec

from ._wire import Header, Response, json_response
from .faults import Fault

__all__ = [
    "Receive",
    "Scope",
    "Send",
    "credential",
    "form_or_json",
    "header",
    "method_not_allowed",
    "not_found",
    "read_body",
    "respond",
    "stall",
    "watch_disconnect",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def read_body(receive: Receive, limit: int | None) -> tuple[bytes, bool] | None:
    """The whole request body and whether it exceeded `limit` (then it is drained, not kept); None if the
    client went away first."""
    parts: list[bytes] = []
    size = 0
    over = False
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        data: bytes = message.get("body", b"")
        size += len(data)
        if limit is not None and size > limit:
            over = True
            parts.clear()
        elif not over:
            parts.append(data)
        if not message.get("more_body", False):
            return b"".join(parts), over


async def watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def stall(fault: Fault, gone: asyncio.Event) -> None:
    if fault.hang:
        await gone.wait()
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(gone.wait(), fault.stall_seconds)


async def respond(send: Send, response: Response, request_id: Header | None = None) -> None:
    headers = [
        (b"content-type", response.content_type),
        (b"content-length", str(len(response.body)).encode()),
    ]
    headers.extend(response.headers)
    if request_id is not None:
        headers.append(request_id)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def credential(scope: Scope) -> str | None:
    authorization = header(scope, b"authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    api_key = header(scope, b"x-api-key")
    return api_key.strip() if api_key and api_key.strip() else None


def form_or_json(body: bytes, content_type: str) -> dict[str, str]:
    if "json" in content_type:
        try:
            decoded = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return {}
        if not isinstance(decoded, dict):
            return {}
        return {key: value for key, value in decoded.items() if isinstance(value, str)}
    form = parse_qs(body.decode("utf-8", "replace"))
    return {key: values[0] for key, values in form.items() if values}


def not_found(method: str, path: str) -> Response:
    message = f"Unknown request URL: {method} {path}."
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": "unknown_url"}
    return json_response(404, {"error": error})


def method_not_allowed(method: str, path: str) -> Response:
    error = {"message": f"{method} is not allowed on {path}.", "type": "invalid_request_error"}
    return json_response(405, {"error": error}, ((b"allow", b"POST"),))
