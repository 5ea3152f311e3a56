"""The OpenAPI 3.1 document of the API, its schemas generated from the same structs the API decodes."""

from __future__ import annotations

from typing import Any

import msgspec

from . import _api as api

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{name}"
_ERRORS = {
    "400": "bad request",
    "401": "no or wrong token",
    "404": "unknown session",
    "413": "body too large",
}


def _content(struct: type[Any] | None, description: str) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description}
    if struct is not None:
        ref = {"$ref": _REF.format(name=struct.__name__)}
        answer["content"] = {"application/json": {"schema": ref}}
    return answer


def _op(
    summary: str,
    status: str,
    answer: type[Any] | None,
    *,
    body: type[Any] | None = None,
    errors: tuple[str, ...] = ("401",),
    stream: bool = False,
    public: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {}}
    if stream:
        op["responses"][status] = {
            "description": "Server-Sent Events; resumable with Last-Event-ID or ?after=",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    else:
        op["responses"][status] = _content(answer, summary)
    for code in errors:
        op["responses"][code] = _content(api.ErrorBody, _ERRORS.get(code, "refused"))
    if body is not None:
        schema = {"$ref": _REF.format(name=body.__name__)}
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if public:
        op["security"] = []
    return op


def openapi_document(version: str) -> dict[str, Any]:
    """The document served at ``/openapi.json``."""
    structs = (
        api.CreateSession, api.ForkBody, api.RewindBody, api.PromptBody, api.PermissionAnswer, api.ErrorBody,
        api.SessionView,
        api.SessionList, api.TurnAccepted, api.CancelAnswer, api.PermissionTaken, api.HistoryView,
        api.Health, api.Supervision,
    )  # fmt: skip
    _, components = msgspec.json.schema_components(structs, ref_template=_REF)
    sid = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    session = ("401", "404")
    paths: dict[str, Any] = {
        "/healthz": {"get": _op("liveness", "200", api.Health, errors=(), public=True)},
        "/v1/sessions": {
            "post": _op("open a session", "201", api.SessionView, body=api.CreateSession,
                        errors=("400", "401", "403", "409", "413")),
            "get": _op("list the sessions", "200", api.SessionList),
        },
        "/v1/sessions/{id}": {
            "parameters": [sid],
            "get": _op("one session", "200", api.SessionView, errors=session),
            "delete": _op("close a session", "200", api.SessionView, errors=session),
        },
        "/v1/sessions/{id}/prompts": {
            "parameters": [sid],
            "post": _op("start (or queue) a turn", "202", api.TurnAccepted, body=api.PromptBody,
                        errors=("400", "401", "404", "409", "413")),
        },
        "/v1/sessions/{id}/cancel": {
            "parameters": [sid],
            "post": _op("cancel the running turn", "200", api.CancelAnswer, errors=(*session, "409")),
        },
        "/v1/sessions/{id}/permissions/{request_id}": {
            "parameters": [sid, {**sid, "name": "request_id"}],
            "post": _op("answer a permission request", "200", api.PermissionTaken,
                        body=api.PermissionAnswer, errors=("400", "401", "404", "409", "413")),
        },
        "/v1/sessions/{id}/fork": {
            "parameters": [sid],
            "post": _op("fork a session at the end of a turn", "201", api.SessionView, body=api.ForkBody,
                        errors=("400", "401", "403", "404", "409", "413")),
        },
        "/v1/sessions/{id}/rewind": {
            "parameters": [sid],
            "post": _op("fork a session at the end of a turn and archive it", "201", api.SessionView,
                        body=api.RewindBody, errors=("400", "401", "403", "404", "409", "413")),
        },
        "/v1/sessions/{id}/history": {
            "parameters": [sid],
            "get": _op("the stored messages", "200", api.HistoryView, errors=session),
        },
        "/v1/sessions/{id}/events": {
            "parameters": [sid],
            "get": _op("the session's events", "200", None, errors=("400", *session), stream=True),
        },
        "/v1/events": {"get": _op("every session's events", "200", None, errors=("400", "401"), stream=True)},
        "/v1/supervision": {"get": _op("the actor tree and dead letters", "200", api.Supervision)},
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "turnkeep serve", "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
