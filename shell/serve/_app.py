"""The ASGI application: the API's routes behind the bearer-token check, errors as JSON, the console."""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from actors import ActorError

from ..store import StoreError
from . import _api as api
from ._auth import authorized
from ._context import ServeContext, error_response, json_response
from ._openapi import openapi_document
from ._routes import api_routes
from ._supervision import supervision

__all__ = ["build_app"]

logger = logging.getLogger("turnkeep.serve")

_PUBLIC = frozenset({"/healthz", "/", "/console.css", "/console.js"})
"""Paths answered without the token: the liveness probe and the console's static files (no data; the
console asks for the token and sends it with every API call)."""
_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
}
_VERSION = "0.1.0"


class _RequireToken:
    """Answers 401 (JSON, ``WWW-Authenticate: Bearer``) to any request but the public paths without
    the right bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in _PUBLIC:
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
            if not authorized(header, self._token):
                error = api.ApiError(401, "unauthorized", "a bearer token is required (Authorization header)")
                response = error_response(error)
                response.headers["www-authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _static(name: str, media_type: str) -> Route:
    body = resources.files("shell.serve").joinpath("console", name).read_bytes()

    async def serve(request: Request) -> Response:
        headers = {"cache-control": "no-cache", "x-content-type-options": "nosniff"}
        return Response(body, media_type=media_type, headers=headers)

    return Route(_request_path(name), serve, methods=["GET"])


def _request_path(name: str) -> str:
    """The URL path of a console file."""
    return next(path for path, (file, _) in _STATIC.items() if file == name)


def build_app(ctx: ServeContext) -> Starlette:
    """The application for ``ctx``: every route, the token check, JSON errors, CORS only if configured."""

    async def healthz(request: Request) -> Response:
        return json_response(api.Health())

    async def metrics(request: Request) -> Response:
        telemetry = ctx.host.telemetry
        if telemetry is None:
            raise api.ApiError(404, "not_found", "metrics are served when [telemetry] enabled = true")
        text = await trio.to_thread.run_sync(telemetry.prometheus_text)
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi(request: Request) -> Response:
        return json_response(openapi_document(_VERSION))

    async def supervise(request: Request) -> Response:
        return json_response(await trio.to_thread.run_sync(lambda: supervision(ctx.host)))

    async def api_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, api.ApiError)
        return error_response(error)

    async def unavailable(request: Request, error: Exception) -> Response:
        logger.warning("%s %s: %s: %s", request.method, request.url.path, type(error).__name__, error)
        message = f"the host could not do it now ({type(error).__name__}: {error}); try again"
        return error_response(api.ApiError(503, "unavailable", message))

    async def internal(request: Request, error: Exception) -> Response:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=error)
        return error_response(api.ApiError(500, "internal", f"the server failed: {type(error).__name__}"))

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        kind = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "bad_request")
        return error_response(api.ApiError(error.status_code, kind, str(error.detail)))

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/supervision", supervise, methods=["GET"]),
        *api_routes(ctx),
        *(_static(name, media) for name, media in _STATIC.values()),
    ]
    middleware: list[Middleware] = []
    if ctx.settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(ctx.settings.cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["authorization", "content-type", "last-event-id"],
            )
        )
    middleware.append(Middleware(_RequireToken, token=ctx.token))
    handlers: dict[Any, Any] = {
        api.ApiError: api_error,
        HTTPException: http_error,
        ActorError: unavailable,
        StoreError: unavailable,
        Exception: internal,
    }
    return Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
