"""Reading an error body of any shape (JSON of many dialects, HTML, plain text) into its evidence.

The evidence keeps apart what a provider states as structured fields (``code``, ``type``, ``status``,
``param``, ``details[].reason``, ``details.error_code``) and what it says in words; an HTML page contributes
only its headline, never its boilerplate.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import msgspec

from ._waits import retry_info

__all__ = ["Evidence", "collapse", "evidence_from_body", "read_value", "sse_data", "trim"]

MAX_MESSAGE = 600
_MAX_TEXT = 256 * 1024
_MAX_DEPTH = 6
_HTML = re.compile(r"<(?:!doctype|html|head|body|title)\b", re.IGNORECASE)
_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HTML_H1 = re.compile(r"<h1[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_HTML_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")
_WHITESPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


@dataclass(slots=True)
class Evidence:
    """What one error body says: its messages (for the user), its structured fields, its words."""

    messages: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    numeric_codes: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    retry_hint: float | None = None
    html: bool = False

    def fields(self) -> list[str]:
        """Every structured field value, most specific first (codes, then types, then statuses)."""
        return self.codes + self.types + self.statuses


def evidence_from_body(body: bytes | str | None) -> Evidence:
    """The evidence in a raw error body; never raises on any bytes or text."""
    evidence = Evidence()
    if body is None:
        return evidence
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else str(body)
    _read_text(text[:_MAX_TEXT], evidence, 0)
    return evidence


def read_value(value: object, evidence: Evidence) -> None:
    """Add what an already decoded JSON value says to ``evidence``."""
    _read(value, evidence, 0)


def sse_data(payload: bytes | str) -> str:
    """The ``data:`` of a raw SSE event (joined), or the payload itself when it is not SSE."""
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes | bytearray) else str(payload)
    lines = text.splitlines()
    data = [line[5:].lstrip() for line in lines if line.startswith("data:")]
    if data:
        return "\n".join(data)
    if any(line.startswith("event:") for line in lines):
        return ""
    return text


def collapse(text: str) -> str:
    """``text`` on one line: control characters and runs of whitespace become one space."""
    return _WHITESPACE.sub(" ", _CONTROL.sub(" ", text)).strip()


def trim(text: str) -> str:
    """``text`` collapsed and cut to a readable length (with an ellipsis when cut)."""
    text = collapse(text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3].rstrip() + "..."


def _read_text(text: str, evidence: Evidence, depth: int) -> None:
    stripped = text.strip()
    if not stripped:
        return
    if stripped[0] in "{[" and depth <= _MAX_DEPTH:
        try:
            decoded = msgspec.json.decode(stripped)
        except msgspec.DecodeError:
            pass
        else:
            if isinstance(decoded, dict | list):
                _read(decoded, evidence, depth + 1)
                return
    if _HTML.search(stripped[:2048]):
        _read_html(stripped, evidence)
        return
    evidence.messages.append(stripped)
    evidence.texts.append(stripped)


def _read_html(text: str, evidence: Evidence) -> None:
    headline = _HTML_TITLE.search(text) or _HTML_H1.search(text)
    title = collapse(html.unescape(_HTML_TAG.sub(" ", headline.group(1)))) if headline else ""
    if not title:
        visible = collapse(html.unescape(_HTML_TAG.sub(" ", _HTML_HIDDEN.sub(" ", text))))
        title = visible[:200]
    evidence.html = True
    evidence.messages.append(title)
    evidence.texts.append(title)


def _read(value: object, evidence: Evidence, depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        _read_text(value, evidence, depth)
    elif isinstance(value, list):
        _read_list(value, evidence, depth)
    elif isinstance(value, dict):
        _read_dict(value, evidence, depth)


def _read_list(items: list[object], evidence: Evidence, depth: int) -> None:
    field_messages = [
        item["msg"] for item in items[:5] if isinstance(item, dict) and isinstance(item.get("msg"), str)
    ]
    if field_messages:  # FastAPI / pydantic validation errors (Mistral, vLLM)
        evidence.messages.append("; ".join(field_messages))
        evidence.texts.extend(field_messages)
        return
    for item in items[:8]:
        found = len(evidence.messages)
        _read(item, evidence, depth + 1)
        if len(evidence.messages) > found:
            return


def _read_dict(obj: dict[str, object], evidence: Evidence, depth: int) -> None:
    error = obj.get("error")
    if isinstance(error, dict | list | str):
        _read(error, evidence, depth + 1)
    for key in ("message", "msg", "detail", "error_message", "Message"):
        value = obj.get(key)
        if isinstance(value, str | dict | list):
            _read(value, evidence, depth + 1)
    errors = obj.get("errors")
    if isinstance(errors, list):
        if evidence.messages:
            evidence.texts.extend(_strings_of(errors))
        else:
            _read(errors, evidence, depth + 1)
    _read_code(obj.get("code"), evidence)
    _read_code(obj.get("error_code"), evidence)
    for key in ("type", "__type"):  # __type: AWS JSON errors (Bedrock)
        kind = obj.get(key)
        if isinstance(kind, str) and kind and kind != "error":
            evidence.types.append(kind.rsplit("#", 1)[-1])
            evidence.texts.append(kind)
    status = obj.get("status")
    if isinstance(status, str) and status:
        evidence.statuses.append(status)
        evidence.texts.append(status)
    elif isinstance(status, int) and not isinstance(status, bool):
        evidence.numeric_codes.append(status)
    param = obj.get("param")
    if isinstance(param, str) and param:
        evidence.params.append(param)
    for key in ("reason", "innererror"):
        evidence.texts.extend(_strings_of(obj.get(key)))
    _read_details(obj.get("details"), evidence)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):  # OpenRouter passes the upstream provider's own body in metadata.raw
        raw = metadata.get("raw")
        if isinstance(raw, str | dict | list):
            _read(raw, evidence, depth + 1)


def _read_details(details: object, evidence: Evidence) -> None:
    if evidence.retry_hint is None:
        evidence.retry_hint = retry_info(details)
    if isinstance(details, dict):
        _read_code(details.get("error_code"), evidence)
    elif isinstance(
        details, list
    ):  # Google ErrorInfo: {"@type": "...ErrorInfo", "reason": "API_KEY_INVALID"}
        for entry in details[:16]:
            if isinstance(entry, dict):
                reason = entry.get("reason")
                if isinstance(reason, str) and reason:
                    evidence.codes.append(reason)
                    evidence.texts.append(reason)


def _read_code(code: object, evidence: Evidence) -> None:
    if isinstance(code, bool):
        return
    if isinstance(code, int):
        evidence.numeric_codes.append(code)
    elif isinstance(code, str) and code:
        evidence.texts.append(code)
        if code.isdigit():
            evidence.numeric_codes.append(int(code))
        else:
            evidence.codes.append(code)


def _strings_of(value: object, depth: int = 0) -> list[str]:
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value[:8] for text in _strings_of(item, depth + 1)]
    if isinstance(value, dict):
        return [text for item in list(value.values())[:16] for text in _strings_of(item, depth + 1)]
    return []
