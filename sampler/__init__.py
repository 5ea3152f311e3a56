"""turnkeep's sampler: one LLM request, with every transient failure absorbed.

It knows HTTP and providers, nothing about sessions: it retries what a retry can fix, re-shapes what a
re-shaped request can fix, and otherwise fails with a precise, named kind.
"""

from .actor import CancelSample, EndTurn, Sample, SamplerActor, SamplerRuntime, StepState, StepStatus
from .core import FILTERED_MESSAGE, ProjectionMemory, SamplerSettings, sample_step
from .errors import (
    LlmError,
    LlmErrorKind,
    LlmRequestError,
    classify_exception,
    classify_http_error,
    classify_stream_error,
    parse_retry_after,
)
from .events import (
    Cancelled,
    Completed,
    Delta,
    Failed,
    Outcome,
    Projection,
    ProjectionFallback,
    Retrying,
    SamplerEvent,
)
from .messages import (
    AssistantMessage,
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
    UserPart,
    media_parts_count,
)
from .projection import degrade_media, strict_structure, strip_media
from .providers import ProviderName, StreamDecodeError, get_adapter
from .retry import RetryDecision, RetryPolicy, backoff_delay, decide, is_retryable

__all__ = [
    "FILTERED_MESSAGE",
    "AssistantMessage",
    "CancelSample",
    "Cancelled",
    "Completed",
    "Delta",
    "EndTurn",
    "Failed",
    "FinishReason",
    "ImagePart",
    "LlmError",
    "LlmErrorKind",
    "LlmRequestError",
    "Message",
    "ModelRequest",
    "Outcome",
    "Projection",
    "ProjectionFallback",
    "ProjectionMemory",
    "ProviderName",
    "RetryDecision",
    "RetryPolicy",
    "Retrying",
    "Sample",
    "SamplerActor",
    "SamplerEvent",
    "SamplerRuntime",
    "SamplerSettings",
    "StepState",
    "StepStatus",
    "StreamDecodeError",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "UserPart",
    "backoff_delay",
    "classify_exception",
    "classify_http_error",
    "classify_stream_error",
    "decide",
    "degrade_media",
    "get_adapter",
    "is_retryable",
    "media_parts_count",
    "parse_retry_after",
    "sample_step",
    "strict_structure",
    "strip_media",
]
