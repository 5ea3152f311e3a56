"""Which field of the request an error names, and whether that field is part of the conversation."""

from __future__ import annotations

import re

from ._body import Evidence

__all__ = ["names_the_conversation"]

_CONVERSATION = frozenset({"messages", "input", "contents", "prompt"})
"""The fields that hold the conversation (Chat Completions, Responses, Gemini, legacy completions): what a
compaction makes smaller."""
_WRAPPERS = frozenset({"body", "request", "generatecontentrequest"})
"""Leading names of a validation error's location that only say where the request was read from."""
_QUOTED = re.compile(r"invalid '([^']+)'", re.IGNORECASE)
_LOCATED = re.compile(r"(?:^|\s)([a-z_][\w.\[\]]*)\s*:\s*(?:string|list|array)\b", re.IGNORECASE)
_SEGMENT = re.compile(r"[a-z_]\w*", re.IGNORECASE)


def names_the_conversation(evidence: Evidence) -> bool:
    """Whether the field the error names lies in the conversation (``messages[2].content``,
    ``input[4].content[0].text``, ``messages.3.content``). False when it names another field or none."""
    field = named_field(evidence)
    if field is None:
        return False
    segments = [segment.lower() for segment in _SEGMENT.findall(field)]
    while segments and segments[0] in _WRAPPERS:
        segments.pop(0)
    return bool(segments) and segments[0] in _CONVERSATION


def named_field(evidence: Evidence) -> str | None:
    """The field the error names: its ``param``, else the one its message quotes (``Invalid 'user'``) or
    locates (``metadata.user_id: String should ...``); None when it names none."""
    if evidence.params:
        return evidence.params[0]
    for text in evidence.messages:
        found = _QUOTED.search(text) or _LOCATED.search(text)
        if found:
            return found.group(1)
    return None
