"""The decision: from a status and an error's evidence to one kind, most specific evidence first.

1. Structured fields that name a family decisively (``context_length_exceeded``, ``budget_exceeded``,
   ``invalid_image``, ``RESOURCE_EXHAUSTED`` ...), the AWS error type header included.
2. The provider's words: exact phrases, then families matched by meaning (words near each other).
3. Structured fields that only say "rate limit" (a 429 saying the request alone is too large is decided
   by its words before that).
4. The status alone.

Each family becomes a kind only at statuses where it makes sense (an image complaint on a 401 is still an
auth failure). A field longer than allowed is an overflow only when the field is part of the conversation
(a message's content), else a parameter error. An HTML page contributes only its headline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ._body import Evidence
from ._families import Family
from ._fields import names_the_conversation
from ._types import LlmErrorKind
from ._wordings import FIELDS, MEANINGS, NOISE, WORDINGS

__all__ = ["families_in", "filtered", "kind_for", "kind_from_status"]

_MAX_HAYSTACK = 16 * 1024
_FIELD_FAMILIES = {entry.value.lower(): entry.family for entry in FIELDS}
_WORDINGS = [
    (re.compile("|".join(f"(?:{e.pattern})" for e in WORDINGS if e.family is family), re.IGNORECASE), family)
    for family in dict.fromkeys(entry.family for entry in WORDINGS)
]
"""One alternation per family: a body is searched once per family, not once per wording."""
_MEANINGS = [
    (tuple(re.compile(group, re.IGNORECASE) for group in entry.groups), entry.span, entry.family)
    for entry in MEANINGS
]
_NOISE = re.compile("|".join(NOISE), re.IGNORECASE)
_IMAGE_PARAM = re.compile(r"image", re.IGNORECASE)

_PRECEDENCE = (
    Family.FILTERED,
    Family.OUTPUT_LIMIT,
    Family.FIELD_LENGTH,
    Family.OVERFLOW,
    Family.MEMORY,
    Family.QUOTA,
    Family.IMAGE,
    Family.STRUCTURE,
    Family.AUTH,
    Family.OVERLOADED,
    Family.RATE_LIMIT,
)


def families_in(evidence: Evidence) -> tuple[set[Family], set[Family]]:
    """The families the evidence names: (by its structured fields, by its words)."""
    by_fields = {
        _FIELD_FAMILIES[value.lower()] for value in evidence.fields() if value.lower() in _FIELD_FAMILIES
    }
    if any(_IMAGE_PARAM.search(param) for param in evidence.params):
        by_fields.add(Family.IMAGE)
    haystack = _NOISE.sub(" ", " ".join(evidence.texts + evidence.codes + evidence.types)[:_MAX_HAYSTACK])
    by_words = {family for pattern, family in _WORDINGS if pattern.search(haystack)}
    if Family.FIELD_LENGTH in by_words and names_the_conversation(evidence):
        by_words = (by_words - {Family.FIELD_LENGTH}) | {Family.OVERFLOW}
    for groups, span, family in _MEANINGS:
        if family not in by_words and _near(groups, span, haystack):
            by_words.add(family)
    return by_fields, by_words


def filtered(by_fields: set[Family], by_words: set[Family]) -> bool:
    """Whether a content filter was involved."""
    return Family.FILTERED in by_fields or Family.FILTERED in by_words


def kind_for(
    status: int | None, by_fields: set[Family], by_words: set[Family], *, retry_hinted: bool
) -> LlmErrorKind:
    """The kind of an error with ``status`` (None inside a stream without a typed error) and families."""
    if status == 529 or Family.OVERLOADED in by_fields:
        return LlmErrorKind.OVERLOADED
    weak = {Family.RATE_LIMIT} & by_fields
    for families in (by_fields - weak, by_words, weak):
        kind = _first_fitting(status, families, by_words, retry_hinted)
        if kind is not None:
            return kind
    return LlmErrorKind.UNKNOWN if status is None else kind_from_status(status)


def kind_from_status(status: int) -> LlmErrorKind:
    """The kind a status implies when nothing else is known."""
    if status == 529:
        return LlmErrorKind.OVERLOADED
    if status == 413:
        return LlmErrorKind.REQUEST_TOO_LARGE
    if status == 429:
        return LlmErrorKind.RATE_LIMIT
    if status == 402:
        return LlmErrorKind.QUOTA_EXHAUSTED
    if status in (401, 403):
        return LlmErrorKind.AUTH
    if status in (408, 409) or 500 <= status < 600:
        return LlmErrorKind.STATUS
    if 400 <= status < 500:
        return LlmErrorKind.PROVIDER
    return LlmErrorKind.UNKNOWN


def _first_fitting(
    status: int | None, families: Iterable[Family], words: set[Family], retry_hinted: bool
) -> LlmErrorKind | None:
    present = set(families)
    for family in _PRECEDENCE:
        if family in present:
            kind = _fit(family, status, words, retry_hinted)
            if kind is not None:
                return kind
    return None


def _fit(family: Family, status: int | None, words: set[Family], retry_hinted: bool) -> LlmErrorKind | None:
    """The kind ``family`` stands for at ``status``, or None where it does not decide."""
    client = status is None or (400 <= status < 500 and status not in (401, 403, 404, 429))
    server = status is not None and 500 <= status < 600
    if family is Family.FILTERED:
        return LlmErrorKind.PROVIDER if status is None or (400 <= status < 500 and status != 429) else None
    if family is Family.OUTPUT_LIMIT:
        return LlmErrorKind.PROVIDER if client else None
    if family is Family.FIELD_LENGTH:
        return LlmErrorKind.PROVIDER if client and status != 413 else None
    if family is Family.OVERFLOW:
        return LlmErrorKind.CONTEXT_OVERFLOW if client or server or status == 429 else None
    if family is Family.MEMORY:
        return LlmErrorKind.PROVIDER if server or status is None else None
    if family is Family.QUOTA:
        if status is not None and not (400 <= status < 500 and status not in (401, 404)):
            return None
        # A limit per minute, or one the provider says when to retry, is temporary whatever its wording.
        temporary = retry_hinted or Family.RATE_WINDOW in words
        if temporary and status in (None, 402, 429):
            return LlmErrorKind.RATE_LIMIT
        return LlmErrorKind.QUOTA_EXHAUSTED
    if family is Family.IMAGE:
        return LlmErrorKind.IMAGE_FORMAT if (client and status != 413) or server else None
    if family is Family.STRUCTURE:
        return LlmErrorKind.REQUEST_STRUCTURE if client and status != 413 else None
    if family is Family.AUTH:
        return LlmErrorKind.AUTH if status in (None, 400, 401, 403) else None
    if family is Family.OVERLOADED:
        return LlmErrorKind.OVERLOADED if status is None or server else None
    if family is Family.RATE_LIMIT:
        return LlmErrorKind.RATE_LIMIT if status is None or status == 429 else None
    return None


def _near(groups: tuple[re.Pattern[str], ...], span: int, text: str) -> bool:
    """Whether one match of every group lies within ``span`` characters of a match of the first."""
    first, rest = groups[0], groups[1:]
    for match in first.finditer(text):
        window = text[max(0, match.start() - span) : match.end() + span]
        if all(group.search(window) for group in rest):
            return True
    return False
