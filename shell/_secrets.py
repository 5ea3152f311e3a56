"""Redaction of credentials from text before it is stored or logged.

:func:`redact` recognises API keys, bearer tokens, credential assignments (``api_key=...``,
``x-api-key: ...``, ``"access_token": "..."``), JWTs and cloud access keys, and replaces the secret part with
``[redacted]``. :class:`RedactingFilter` applies it to log records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

__all__ = ["REDACTED", "RedactingFilter", "redact"]

REDACTED = "[redacted]"
"""What a secret is replaced with."""

# A secret value: stops at whitespace, quotes, backslashes (a JSON escape) and the usual separators.
_VALUE = r"[^\s\"'`\\,;&<>(){}\[\]]+"

_CREDENTIAL_NAME = (
    r"(?:x-)?api[_-]?key|x-goog-api-key|(?:access|refresh|auth|id|session)[_-]?token|client[_-]?secret"
    r"|private[_-]?key|authorization|proxy-authorization"
)


def _looks_secret(value: str) -> bool:
    # Spares names and expressions (``api_key = os.environ``, ``Bearer authentication``): secrets are long
    # and random, so they have a digit or are long.
    return len(value) >= 8 and (len(value) >= 20 or any(char.isdigit() for char in value))


def _keep_name(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    return name + REDACTED if _looks_secret(value) else match.group(0)


# Each pattern is (regex, replacement); a group-based replacement keeps the name of what was redacted.
_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # "Authorization: Bearer x", "api_key=x", '"x-api-key": "x"', "refresh_token: x" ...
    (
        re.compile(
            rf"(?i)(?<![A-Za-z0-9_-])((?:{_CREDENTIAL_NAME})[\"']?\s*[:=]\s*[\"']?"
            rf"(?:(?:bearer|basic|token)\s+)?)({_VALUE})"
        ),
        _keep_name,
    ),
    (re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]+=*)"), _keep_name),
    # Anthropic and OpenAI style keys: sk-ant-..., sk-proj-..., sk-...
    (re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{16,}"), REDACTED),
    # JSON Web Tokens: three base64url segments, the first one a JSON object.
    (re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), REDACTED),
    # AWS access key ids.
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    # GitHub, Slack and Google API tokens.
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAIza[A-Za-z0-9_-]{30,}"), REDACTED),
)


def redact(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[redacted]``.

    Recognised: ``sk-...`` and ``sk-ant-...`` keys, ``Bearer <token>``, the values of credential
    assignments such as ``x-api-key: ...``, ``api_key=...``, ``"access_token": "..."`` or
    ``Authorization: Basic ...``, JWT-looking tokens, ``AKIA...``/``ASIA...`` AWS key ids, and GitHub,
    Slack and Google API tokens. An assigned or bearer value is taken for a secret only when it looks
    random enough (8 characters with a digit, or 20 characters), so ``api_key = os.environ`` or ``a Bearer
    token`` are left alone. The replacement never contains a quote or a backslash, so redacting the
    inside of a JSON string keeps it valid. Text without secrets is returned unchanged, and
    ``redact(redact(t)) == redact(t)``.
    """
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from every record it sees; it never drops a record.

    The record's message is formatted with its arguments, redacted, and stored back with no arguments; an
    exception traceback or stack information attached to the record is redacted too. Attach it to a
    handler to cover every record the handler emits (a filter on a logger sees only records logged on
    that very logger).
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place and keep it."""
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string: redact the parts as they are
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
