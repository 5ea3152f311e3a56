"""What a turn goes through that ACP has no update for, as turnkeep's own notification. Pure.

A client that says it takes them (``clientCapabilities._meta["turnkeep/notices"]`` true in
``initialize``) gets a ``_turnkeep/notice`` notification, an extension notification as the protocol
allows them, for each of these events of its sessions; other clients get none (the events stay in the
store):

| ``kind``              | event                 | when                                              |
| --------------------- | --------------------- | ------------------------------------------------- |
| ``retrying``          | ``Retrying``          | a model request failed transiently and is retried |
| ``queued``            | ``Queued``            | a model request waits at the provider gate        |
| ``compaction_started`` | ``CompactionStarted`` | older history is being summarised               |
| ``compaction_finished`` | ``CompactionFinished`` | the summary took its place, or did not shrink |
| ``doom_loop_warning`` | ``DoomLoopWarning``   | the model repeats itself and was told so          |
| ``mcp_status``        | ``McpServerStatus``   | an MCP server became unavailable or came back     |

Its params are ``{sessionId, kind, message, event}``: ``message`` says it in words (known secrets
replaced by markers), ``event`` is the event as the store and ``turnkeep serve`` have it.
"""

from __future__ import annotations

from typing import Any, Final

from .. import events as ev
from .._secrets import redact_known

__all__ = ["NOTICE_CAPABILITY", "NOTICE_METHOD", "notice_of", "wants_notices"]

NOTICE_METHOD: Final = "_turnkeep/notice"
NOTICE_CAPABILITY: Final = "turnkeep/notices"
_MAX_MESSAGE = 2000


def wants_notices(client_meta: dict[str, Any] | None) -> bool:
    """Whether the client's capabilities ask for turnkeep's notices."""
    return client_meta is not None and client_meta.get(NOTICE_CAPABILITY) is True


def _words(event: Any) -> tuple[str, str] | None:
    match event:
        case ev.Retrying(attempt=attempt, max_attempts=most, delay=delay, kind=kind, message=message):
            return (
                "retrying",
                f"retrying the model request in {delay:g} s (attempt {attempt} of {most}, {kind}): {message}",
            )
        case ev.Queued(place=place, reason=reason, expected_wait=wait):
            expected = "" if wait is None else f", about {wait:g} s"
            return "queued", f"waiting for the provider ({reason}): place {place} in line{expected}"
        case ev.CompactionStarted(reason=reason, estimated_tokens=tokens, window=window):
            return (
                "compaction_started",
                f"summarising older history ({reason}): about {tokens} of {window} tokens",
            )
        case ev.CompactionFinished(ok=True, replaced=replaced, tokens_before=before, tokens_after=after):
            return "compaction_finished", f"summarised {replaced} messages: {before} -> {after} tokens"
        case ev.CompactionFinished(message=message):
            return "compaction_finished", f"the summary did not shrink the request enough: {message}"
        case ev.DoomLoopWarning(reason=reason):
            return "doom_loop_warning", f"the model repeats itself ({reason}); it was told to change approach"
        case ev.McpServerStatus(server=server, status=status, message=message):
            return "mcp_status", f"MCP server {server}: {status}" + (f": {message}" if message else "")
    return None


def notice_of(session_id: str, event: Any) -> dict[str, Any] | None:
    """The params of the notice ``event`` makes, or None for an event that makes none."""
    words = _words(event)
    if words is None:
        return None
    kind, message = words
    body = ev.event_to_json_dict(event)
    if isinstance(body.get("message"), str):
        body["message"] = redact_known(body["message"])
    said = redact_known(message)
    if len(said) > _MAX_MESSAGE:
        said = said[: _MAX_MESSAGE - 1] + "…"
    return {"sessionId": session_id, "kind": kind, "message": said, "event": body}
