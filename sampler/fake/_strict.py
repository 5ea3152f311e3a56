"""The history checks a strict provider makes before it answers, in each provider's own words.

Real providers refuse a request whose history is malformed: a tool call without its result, a result
without its call, an empty image; DeepSeek's reasoner also refuses two user (or two assistant) messages in
a row. The fake provider makes these checks when asked to (`strict_history`, `alternate_roles`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["history_problem", "structure_rejection"]

_OPENAI_UNPAIRED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
_OPENAI_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
    "'tool_calls'."
)
_OPENAI_EMPTY_IMAGE = (
    "Invalid 'messages[{i}].content[{j}].image_url.url'. Expected a base64-encoded data URL with an image "
    "MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an empty value."
)
_SUCCESSIVE = (
    "deepseek-reasoner does not support successive user or assistant messages (messages[{i}] and "
    "messages[{j}] in your input). You should interleave the user/assistant messages in the message sequence."
)
_ANTHROPIC_UNPAIRED = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. Each "
    "`tool_use` block must have a corresponding `tool_result` block in the next message."
)
_ANTHROPIC_ORPHAN = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each "
    "`tool_result` block must have a corresponding `tool_use` block in the previous message."
)
_ANTHROPIC_EMPTY_IMAGE = "messages.{i}.content.{j}.image.source.base64: image cannot be empty"


def structure_rejection(wire: str) -> str:
    """The wire's provider's words for a tool call left without its result (for an injected fault)."""
    if wire == "anthropic":
        return _ANTHROPIC_UNPAIRED.format(i=1, ids="toolu_fake")
    return _OPENAI_UNPAIRED.format(ids="call_fake")


def history_problem(wire: str, request: Any, strict: bool, alternate_roles: bool) -> str | None:
    """What a strict provider of ``wire`` ("openai" or "anthropic") says is wrong with the request's
    history, in its words, or None when nothing is (always None when neither check is asked for)."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not (strict or alternate_roles) or not isinstance(messages, list):
        return None
    if wire == "anthropic":
        return _anthropic(messages)
    return _openai(messages, alternate_roles)


def _openai(messages: list[Any], alternate_roles: bool) -> str | None:
    pending: list[str] = []
    previous_role = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role != "tool" and pending:
            return _OPENAI_UNPAIRED.format(ids=", ".join(pending))
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in pending:
                return _OPENAI_ORPHAN
            pending.remove(call_id)
        if alternate_roles and role in ("user", "assistant") and role == previous_role:
            return _SUCCESSIVE.format(i=i - 1, j=i)
        previous_role = role
        content = message.get("content")
        for j, part in enumerate(content if isinstance(content, list) else []):
            url = part.get("image_url", {}).get("url", "") if isinstance(part, dict) else ""
            if isinstance(part, dict) and part.get("type") == "image_url" and url.endswith("base64,"):
                return _OPENAI_EMPTY_IMAGE.format(i=i, j=j)
        if role == "assistant":
            pending = [str(c.get("id")) for c in message.get("tool_calls") or () if isinstance(c, dict)]
    if pending:
        return _OPENAI_UNPAIRED.format(ids=", ".join(pending))
    return None


def _anthropic(messages: list[Any]) -> str | None:
    pending: list[str] = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        for j, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in pending:
                return _ANTHROPIC_ORPHAN.format(i=i, j=j, id=block.get("tool_use_id"))
            source = block.get("source") if block.get("type") == "image" else None
            if isinstance(source, dict) and source.get("type") == "base64" and not source.get("data"):
                return _ANTHROPIC_EMPTY_IMAGE.format(i=i, j=j)
        missing = [call_id for call_id in pending if call_id not in answered]
        if missing:
            return _ANTHROPIC_UNPAIRED.format(i=i - 1, ids=", ".join(missing))
        pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    if pending:
        return _ANTHROPIC_UNPAIRED.format(i=len(messages) - 1, ids=", ".join(pending))
    return None
