"""Redaction of credentials from text before it is stored, logged or shown to the model.

Two kinds: the exact values of the secrets this process holds (:data:`KNOWN_SECRETS`: the provider's API
key, OAuth tokens, the serve token), each replaced by a marker naming it (``[redacted:OPENAI_API_KEY]``);
and anything that looks like a credential by its shape — API keys, bearer tokens, credential assignments
(``api_key=...``, ``x-api-key: ...``, ``"access_token": "..."``), JWTs and cloud access keys — replaced
with ``[redacted]``. :func:`redact` does both; :func:`redact_known` only the first, for tool output, which
must otherwise reach the model as it is. :class:`RedactingFilter` applies :func:`redact` to log records.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

__all__ = [
    "KNOWN_SECRETS",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "KnownSecrets",
    "RedactingFilter",
    "SecretWatch",
    "may_hold_secret",
    "redact",
    "redact_known",
    "redact_known_struct",
]

T = TypeVar("T")

MIN_SECRET_LENGTH = 8
"""Values shorter than this are not treated as known secrets: replacing every occurrence of a short
string would mangle ordinary text, and no real key or token is that short."""

_MARKER_NAME = re.compile(r"[^A-Za-z0-9_.:-]")


class SecretWatch:
    """A registration made by :meth:`KnownSecrets.watch`; :meth:`close` stops reading its source (values
    already seen stay known)."""

    def __init__(self, owner: KnownSecrets, name: str, read: Callable[[], str | None]) -> None:
        self.name = name
        self.read = read
        self._owner = owner

    def close(self) -> None:
        """Stop asking the source for new values. Idempotent."""
        self._owner._drop(self)


class KnownSecrets:
    """The secret values this process holds, each with the name its marker shows.

    Thread-safe. A value is known once :meth:`add`-ed or once a :meth:`watch`-ed source has returned it,
    and stays known for the life of the registry (an old token is still a secret). :meth:`redact` replaces
    every occurrence of every known value, longest first, by ``[redacted:NAME]``; the marker holds no
    quote or backslash, so redacting inside a JSON string keeps it valid.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, str] = {}
        self._ordered: tuple[tuple[str, str], ...] = ()
        self._watches: tuple[SecretWatch, ...] = ()

    def add(self, name: str, value: str | None) -> None:
        """Know ``value`` as the secret ``name`` (a variable's name, say); ``None``, blank values and values
        shorter than :data:`MIN_SECRET_LENGTH` are ignored. A value already known keeps its first name."""
        if value is None:
            return
        value = value.strip()
        if len(value) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if value in self._values:
                return
            self._values[value] = _MARKER_NAME.sub("_", name) or "secret"
            self._ordered = tuple(sorted(self._values.items(), key=lambda item: -len(item[0])))

    def watch(self, name: str, read: Callable[[], str | None]) -> SecretWatch:
        """Know whatever ``read`` returns, now and before each redaction, as ``name``: for a credential
        that changes (a refreshed access token). ``read`` must be cheap and must not raise."""
        registration = SecretWatch(self, name, read)
        with self._lock:
            self._watches += (registration,)
        self.add(name, read())
        return registration

    def _drop(self, registration: SecretWatch) -> None:
        with self._lock:
            self._watches = tuple(w for w in self._watches if w is not registration)

    def _refresh(self) -> tuple[tuple[str, str], ...]:
        for registration in self._watches:
            value = registration.read()
            if value is not None and value.strip() not in self._values:
                self.add(registration.name, value)
        return self._ordered

    def __bool__(self) -> bool:
        """Whether any secret is known or watched."""
        return bool(self._values or self._watches)

    def clear(self) -> None:
        """Forget every known value and stop every watch: for a process that starts over with other
        credentials (and for tests, which must not see each other's secrets)."""
        with self._lock:
            self._values.clear()
            self._ordered = ()
            self._watches = ()

    def names(self) -> list[str]:
        """The names of the known secrets, sorted (never a value)."""
        self._refresh()
        return sorted(set(self._values.values()))

    def redact(self, text: str) -> str:
        """``text`` with each known secret replaced by ``[redacted:NAME]``; unchanged when none occurs."""
        for value, name in self._refresh():
            if value in text:
                text = text.replace(value, f"[redacted:{name}]")
        return text

    def occurs_in(self, data: str | bytes) -> bool:
        """Whether any known secret occurs in ``data`` (text, or bytes searched as UTF-8), as it is or as
        JSON writes it inside a string."""
        text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
        return any(value in text or _in_json(value) in text for value, _ in self._refresh())


@functools.lru_cache(maxsize=256)
def _in_json(value: str) -> str:
    """``value`` as it is written inside a JSON string."""
    return msgspec.json.encode(value)[1:-1].decode()


KNOWN_SECRETS = KnownSecrets()
"""The process's known secrets: :func:`redact`, and so the store and the logs, replace them all."""


def redact_known(text: str) -> str:
    """``text`` with every value of :data:`KNOWN_SECRETS` replaced by its marker, and nothing else changed."""
    return KNOWN_SECRETS.redact(text)


def redact_known_struct(value: T) -> T:
    """``value`` (a msgspec struct, an event say) itself when no known secret occurs in it, else a copy of
    the same type with every string redacted by :func:`redact_known`. A value that cannot be encoded as
    JSON (not an event) is returned as it is."""
    if not KNOWN_SECRETS:
        return value
    try:
        if not KNOWN_SECRETS.occurs_in(msgspec.json.encode(value)):
            return value
        cleaned = _known_tree(msgspec.to_builtins(value))
        return msgspec.convert(cleaned, type(value))
    except (TypeError, msgspec.EncodeError, msgspec.ValidationError):
        return value


def _known_tree(value: Any) -> Any:
    if isinstance(value, str):
        return redact_known(value)
    if isinstance(value, list):
        return [_known_tree(item) for item in value]
    if isinstance(value, dict):
        return {key: _known_tree(item) for key, item in value.items()}
    return value


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


_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
"""With ``str.lower()``, what makes a text match a case-insensitive pattern of ASCII letters literally:
the three letters besides the ASCII ones that :mod:`re` matches to them ignoring case."""

_FOLDED_MARKS = (
    "bearer",
    "authorization",
    *(
        first + separator + second
        for first, second in (
            ("api", "key"),
            ("client", "secret"),
            ("private", "key"),
            *((name, "token") for name in ("access", "refresh", "auth", "id", "session")),
        )
        for separator in ("", "_", "-")
    ),
)
"""What a match of a case-insensitive pattern of :data:`_PATTERNS` holds, in the text folded by
:data:`_FOLD` and lowered."""

_EXACT_MARKS = (
    "sk-",
    "eyJ",
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "AIza",
)
"""What a match of a case-sensitive pattern of :data:`_PATTERNS` starts with."""


def may_hold_secret(encoded_json: bytes) -> bool:
    """Whether :func:`redact` could change any string inside the JSON document ``encoded_json``.

    False guarantees that redacting each string of the decoded document changes nothing, so the document
    can be kept as it is; True means only that it must be redacted string by string. Every mark looked
    for is made of letters, digits, ``-`` and ``_``, which JSON writes as they are.
    """
    text = encoded_json.decode("utf-8", "surrogateescape")
    for mark in _EXACT_MARKS:
        if mark in text:
            return True
    folded = (text if text.isascii() else text.translate(_FOLD)).lower()
    for mark in _FOLDED_MARKS:
        if mark in folded:
            return True
    return bool(KNOWN_SECRETS) and KNOWN_SECRETS.occurs_in(text)


def redact(text: str) -> str:
    """Return ``text`` with every known secret replaced by its marker (:func:`redact_known`) and every
    recognised secret replaced by ``[redacted]``.

    Recognised: ``sk-...`` and ``sk-ant-...`` keys, ``Bearer <token>``, the values of credential
    assignments such as ``x-api-key: ...``, ``api_key=...``, ``"access_token": "..."`` or
    ``Authorization: Basic ...``, JWT-looking tokens, ``AKIA...``/``ASIA...`` AWS key ids, and GitHub,
    Slack and Google API tokens. An assigned or bearer value is taken for a secret only when it looks
    random enough (8 characters with a digit, or 20 characters), so ``api_key = os.environ`` or ``a Bearer
    token`` are left alone. The replacement never contains a quote or a backslash, so redacting the
    inside of a JSON string keeps it valid. Text without secrets is returned unchanged, and
    ``redact(redact(t)) == redact(t)``.
    """
    text = KNOWN_SECRETS.redact(text)
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
