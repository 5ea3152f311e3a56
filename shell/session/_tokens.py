"""Estimate how many tokens a request takes, without the provider's tokenizer, and learn from its answers.

:class:`TokenEstimator` counts characters and fixed costs, then scales the count by a ratio that it
calibrates against the input tokens the provider reports. :func:`effective_window` and
:func:`learned_window_from_overflow` decide the context window to plan with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

from sampler.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

__all__ = [
    "MAX_RATIO",
    "MIN_RATIO",
    "OVERFLOW_WINDOW_FACTOR",
    "TokenEstimator",
    "effective_window",
    "learned_window_from_overflow",
]

MIN_RATIO = 0.25
"""The smallest calibration ratio: the heuristic is never trusted to overestimate more than 4 times."""
MAX_RATIO = 4.0
"""The largest calibration ratio: the heuristic is never trusted to underestimate more than 4 times."""
OVERFLOW_WINDOW_FACTOR = 0.85
"""The window learned from an overflow, as a fraction of the estimate of the request that overflowed."""

_MESSAGE_OVERHEAD = 4
"""Tokens a message costs besides its content (role and framing)."""
_TOOL_CALL_OVERHEAD = 8
"""Tokens a tool call costs besides its name and arguments (id and framing)."""
_TOOL_SPEC_OVERHEAD = 12
"""Tokens a tool specification costs besides its name, description and schema."""


class TokenEstimator:
    """A deterministic estimate of a request's input tokens, calibrated by the provider's usage reports.

    Text costs one token per ``chars_per_token`` bytes of UTF-8 (so non-Latin scripts, which tokenizers
    split finer, cost more than their character count suggests); each image costs ``image_tokens``
    whatever its size; each message, tool call and tool specification costs a small fixed overhead; a
    tool call costs its name and arguments, a tool specification its name, description and JSON schema.
    The total is multiplied by :attr:`ratio` and rounded up.

    The estimate never decreases when content is added, and the same messages, tools and ratio always
    give the same number. Not thread-safe: one owner (the session's chat state) estimates and calibrates.
    Raises ``ValueError`` when a setting is out of range.
    """

    def __init__(
        self,
        *,
        chars_per_token: float = 4.0,
        image_tokens: int = 1_000,
        ratio: float = 1.0,
        smoothing: float = 0.3,
    ) -> None:
        if not chars_per_token > 0:
            raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
        if image_tokens < 0:
            raise ValueError(f"image_tokens must be >= 0, got {image_tokens}")
        if not 0 < smoothing <= 1:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        if not MIN_RATIO <= ratio <= MAX_RATIO:
            raise ValueError(f"ratio must be in [{MIN_RATIO}, {MAX_RATIO}], got {ratio}")
        self._chars_per_token = chars_per_token
        self._image_tokens = image_tokens
        self._ratio = ratio
        self._smoothing = smoothing

    @property
    def ratio(self) -> float:
        """The factor applied to the heuristic count, in [:data:`MIN_RATIO`, :data:`MAX_RATIO`]."""
        return self._ratio

    def estimate(self, messages: Iterable[Message], tools: Iterable[ToolSpec] = ()) -> int:
        """The estimated input tokens of a request made of ``messages`` and ``tools``; 0 for nothing."""
        fixed = text_bytes = 0
        for message in messages:
            more_fixed, more_bytes = self.weigh(message)
            fixed += more_fixed
            text_bytes += more_bytes
        return self.estimate_weighed(fixed, text_bytes, tools)

    def weigh(self, message: Message) -> tuple[int, int]:
        """What ``message`` adds to a request: fixed tokens and text bytes. A request's estimate is
        :meth:`estimate_weighed` of their sums over its messages, which equals :meth:`estimate`."""
        fixed = _MESSAGE_OVERHEAD
        text_bytes = 0
        if isinstance(message, SystemMessage):
            text_bytes += _utf8_len(message.content)
        elif isinstance(message, UserMessage):
            for part in message.parts:
                if isinstance(part, ImagePart):
                    fixed += self._image_tokens
                else:
                    text_bytes += _utf8_len(part.text)
        elif isinstance(message, AssistantMessage):
            text_bytes += _utf8_len(message.text)
            for call in message.tool_calls:
                fixed += _TOOL_CALL_OVERHEAD
                text_bytes += _utf8_len(call.name) + _utf8_len(call.arguments)
        elif isinstance(message, ToolMessage):
            text_bytes += _utf8_len(message.result.content)
        return fixed, text_bytes

    def estimate_weighed(self, fixed: int, text_bytes: int, tools: Iterable[ToolSpec] = ()) -> int:
        """The estimate of a request whose messages weigh ``fixed`` tokens and ``text_bytes`` bytes in all
        (sums of :meth:`weigh`), with ``tools``."""
        for tool in tools:
            fixed += _TOOL_SPEC_OVERHEAD
            text_bytes += _utf8_len(tool.name) + _utf8_len(tool.description)
            text_bytes += len(msgspec.json.encode(tool.parameters))
        raw = fixed + math.ceil(text_bytes / self._chars_per_token)
        return math.ceil(raw * self._ratio)

    def calibrate(self, estimated: int, reported_input_tokens: int) -> None:
        """Move :attr:`ratio` toward what makes ``estimated`` match the provider's report.

        ``estimated`` is what :meth:`estimate` returned for the request whose ``input_tokens`` the provider
        reported. The ratio moves by ``smoothing`` of the way (an exponential moving average) and stays
        within [:data:`MIN_RATIO`, :data:`MAX_RATIO`]. A report or estimate of 0 or less says nothing (some
        providers report no usage) and leaves the ratio unchanged.
        """
        if estimated <= 0 or reported_input_tokens <= 0:
            return
        target = self._ratio * reported_input_tokens / estimated
        moved = self._ratio + self._smoothing * (target - self._ratio)
        self._ratio = min(MAX_RATIO, max(MIN_RATIO, moved))


def effective_window(configured: int, learned: int | None) -> int:
    """The context window to plan with: the configured one, or the learned one when it is smaller."""
    return configured if learned is None else min(configured, learned)


def learned_window_from_overflow(estimated_tokens: int) -> int:
    """The window to assume after a request estimated at ``estimated_tokens`` overflowed the real one.

    It is :data:`OVERFLOW_WINDOW_FACTOR` (85 %) of the estimate, rounded down.
    """
    return int(estimated_tokens * OVERFLOW_WINDOW_FACTOR)


def _utf8_len(text: str) -> int:
    # ASCII text, the common case, needs no encoding to be measured.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
