"""W3C trace context (``traceparent``) to and from OpenTelemetry span contexts.

The trace context travels in the actor messages and the stored ``TurnStarted`` event as a plain
``traceparent`` string (``00-{trace id}-{span id}-{flags}``), so nothing outside this package imports
OpenTelemetry; these functions are the only translation.
"""

from __future__ import annotations

from opentelemetry.trace import SpanContext, TraceFlags

__all__ = ["format_traceparent", "parse_traceparent", "traceparent_of"]

_HEX = frozenset("0123456789abcdef")


def format_traceparent(context: SpanContext) -> str | None:
    """The ``traceparent`` of ``context``; None for an invalid context (one that names no span)."""
    if not context.is_valid:
        return None
    return traceparent_of(context.trace_id, context.span_id, context.trace_flags)


def traceparent_of(trace_id: int, span_id: int, flags: int) -> str:
    """The version-00 ``traceparent`` naming span ``span_id`` of trace ``trace_id`` with ``flags``
    (lower-case hex, zero-padded: 32, 16 and 2 digits)."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def parse_traceparent(value: str) -> SpanContext | None:
    """The remote span context ``value`` names, or None when it is not a valid ``traceparent``: four
    dash-separated lower-case hex fields (version, 32-digit trace id, 16-digit span id, flags), neither id
    all zeros, version not ``ff``; a later version may add fields after the fourth, which are ignored."""
    parts = value.strip().split("-")
    if len(parts) < 4:
        return None
    version, trace_id, span_id, flags = parts[:4]
    sizes = ((version, 2), (trace_id, 32), (span_id, 16), (flags, 2))
    if any(len(text) != size or not _HEX.issuperset(text) for text, size in sizes):
        return None
    if version == "ff" or (version == "00" and len(parts) != 4):
        return None
    trace, span = int(trace_id, 16), int(span_id, 16)
    if not trace or not span:
        return None
    return SpanContext(trace, span, is_remote=True, trace_flags=TraceFlags(int(flags, 16) & 0xFF))
