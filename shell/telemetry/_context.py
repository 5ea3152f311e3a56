"""W3C trace context (``traceparent``) to and from OpenTelemetry span contexts.

The trace context travels in the actor messages and the stored ``TurnStarted`` event as a plain
``traceparent`` string (``00-{trace id}-{span id}-{flags}``), so nothing outside this package imports
OpenTelemetry; these two functions are the only translation.
"""

from __future__ import annotations

from opentelemetry.trace import SpanContext, TraceFlags

__all__ = ["format_traceparent", "parse_traceparent"]

_HEX = frozenset("0123456789abcdef")


def format_traceparent(context: SpanContext) -> str | None:
    """The ``traceparent`` of ``context``; None for an invalid context (one that names no span)."""
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


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
