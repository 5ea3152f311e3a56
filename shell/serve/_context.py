"""What every route needs: the host, the taps, the settings and the server's stop signal."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import trio
from starlette.requests import Request
from starlette.responses import Response

from ..config import ServeSettings
from ..host import AgentHost
from ._api import ApiError, ErrorBody
from ._taps import Taps

__all__ = ["ServeContext", "error_response", "json_response", "read_body"]

T = TypeVar("T")


@dataclass(eq=False)
class ServeContext:
    """The server's state shared by its routes (made on the event loop's thread)."""

    host: AgentHost
    settings: ServeSettings
    token: str
    workspace_root: Path
    taps: Taps = field(init=False)
    stopping: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.taps = Taps(self.host)


def json_response(body: Any, status: int = 200) -> Response:
    """``body`` (a struct or plain data) encoded by msgspec."""
    return Response(msgspec.json.encode(body), status_code=status, media_type="application/json")


def error_response(error: ApiError) -> Response:
    """The JSON error body every refusal has: ``kind`` and ``message``. A 413 also says ``Connection:
    close``: the rest of its body was not read, so the server ends the connection, and a client must not
    send its next request on it."""
    response = json_response(ErrorBody(error.kind, error.message), error.status)
    if error.status == 413:
        response.headers["connection"] = "close"
    return response


async def read_body(request: Request, limit: int, shape: type[T]) -> T:
    """The request's JSON body decoded as ``shape``; refuses (:class:`ApiError`) a body over ``limit``
    bytes (413, reading no further), malformed JSON (400 ``malformed_json``) and a body of the wrong
    shape or with unknown fields (400 ``invalid_body``)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"the body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "body_too_large", f"the body is larger than {limit} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    try:
        return msgspec.json.decode(body, type=shape)
    except msgspec.ValidationError as error:
        raise ApiError(400, "invalid_body", str(error)) from None
    except msgspec.DecodeError as error:
        raise ApiError(400, "malformed_json", f"the body is not JSON: {error}") from None
