"""``turnkeep serve``: a host as an HTTP service, with resumable event streams and a live console.

The API (``/v1``) runs on the host's own trio loop (hypercorn's trio worker, Starlette routes); bodies
are msgspec structs, described at ``/openapi.json``. Every path but ``/healthz`` and the console's
static files needs ``Authorization: Bearer TOKEN``. A session's event stream replays from its stored
log after ``Last-Event-ID`` and goes on live, with no gap and no duplicate; slow readers get a bounded
buffer and are disconnected when a write stays stuck.

Needs ``pip install 'turnkeep[serve]'``; without it, importing this package raises
:class:`~shell._extras.MissingExtra` naming that extra.
"""

from .._extras import needs_extra

with needs_extra("turnkeep serve", "serve"):
    from ._api import ApiError
    from ._auth import TOKEN_ENV, ServeRefused, authorized, check_bind, is_loopback, resolve_token
    from ._buffer import StreamBuffer
    from ._server import RunningServer, start_server
    from ._workspace import WorkspaceRefused, confine

__all__ = [
    "TOKEN_ENV",
    "ApiError",
    "RunningServer",
    "ServeRefused",
    "StreamBuffer",
    "WorkspaceRefused",
    "authorized",
    "check_bind",
    "confine",
    "is_loopback",
    "resolve_token",
    "start_server",
]
