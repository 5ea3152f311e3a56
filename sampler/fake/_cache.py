"""The embedded provider's prompt cache: which leading part of a prompt an earlier request already sent.

A real provider serves the part of a prompt it has seen before from its cache and reports it as cached
input tokens. The fake does the same, deterministically: every prompt is a sequence of prefixes (the
fixed head of system text and tools, then one more message each), and the tokens of the longest prefix
that was the whole prompt of an earlier request are reported as cached.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec

from ._reply import estimate_tokens
from ._wire import measure

__all__ = ["PromptCache", "prompt_prefixes"]

Prefix = tuple[bytes, int]
"""A prefix's fingerprint and its tokens."""


def prompt_prefixes(head: Sequence[Any], messages: Sequence[Any]) -> tuple[Prefix, ...]:
    """The fingerprints and token counts of the prompt's prefixes: the head with the first message, the
    first two, …, the whole prompt last. ``head`` is what precedes the messages (system text, tools)."""
    digest = hashlib.blake2b(digest_size=16)
    chars = 0
    for part in head:
        digest.update(msgspec.json.encode(part))
        chars += measure(part)[0]
    out: list[Prefix] = []
    for message in messages:
        digest.update(msgspec.json.encode(message))
        chars += measure(message)[0]
        out.append((digest.copy().digest(), estimate_tokens(chars)))
    return tuple(out)


class PromptCache:
    """The fingerprints of the last ``capacity`` whole prompts, looked up by the prompts that follow."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity!r}")
        self._capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def cached_tokens(self, prefixes: Sequence[Prefix]) -> int:
        """The tokens of the longest prefix that was an earlier whole prompt (0 if none), then remember
        this prompt as seen."""
        cached = 0
        for fingerprint, tokens in reversed(prefixes):
            if fingerprint in self._seen:
                self._seen.move_to_end(fingerprint)
                cached = tokens
                break
        if prefixes:
            self._seen[prefixes[-1][0]] = None
            self._seen.move_to_end(prefixes[-1][0])
            while len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
        return cached
