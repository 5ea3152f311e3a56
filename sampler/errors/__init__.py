"""What went wrong with an LLM request, in terms the retry policy and the session can act on.

Providers report failures in a dozen shapes (JSON of several dialects, HTML from a proxy, plain text, an
error event inside a 200 stream, or an exception from the transport). The functions here turn all of them
into one :class:`LlmError` with a :class:`LlmErrorKind`. They are pure and total: whatever the input, they
return an ``LlmError`` and never raise.

One job per module: ``_types`` (the vocabulary), ``_body`` (reading bodies into evidence), ``_wordings``
and ``_families`` (what providers say, as data with sources), ``_decide`` (evidence to kind),
``_classify`` (HTTP and stream errors), ``_waits`` (requested waits), ``_exceptions`` (raised errors).
"""

from ._classify import classify_http_error, classify_stream_error
from ._exceptions import classify_exception
from ._types import LlmError, LlmErrorKind, LlmRequestError
from ._waits import parse_retry_after

__all__ = [
    "LlmError",
    "LlmErrorKind",
    "LlmRequestError",
    "classify_exception",
    "classify_http_error",
    "classify_stream_error",
    "parse_retry_after",
]
