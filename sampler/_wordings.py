"""What real providers say when something goes wrong: the wordings and tables the classifier matches.

Each table lists real providers' messages; the comments name who says it.
"""

from __future__ import annotations

import re

_CONTEXT_OVERFLOW = re.compile(
    "|".join(
        [
            r"context[_ ]length[_ ]exceeded",  # OpenAI, Azure, Groq, OpenRouter (code)
            r"maximum context length",  # OpenAI, Azure, DeepSeek, Mistral, vLLM, OpenRouter
            r"exceeds? the context window",  # OpenAI Responses API
            r"prompt is too long",  # Anthropic
            r"exceeds? (?:the )?context limit",  # Anthropic: input length and `max_tokens` exceed ...
            r"input token count.{0,40}exceeds the maximum",  # Gemini
            r"maximum prompt length is",  # xAI
            r"reduce the length of the messages",  # OpenAI, Groq, Cerebras
            r"exceeded model token limit",  # Moonshot / Kimi
            r"model max length exceeded",  # Moonshot (older models)
            r"longer than the (?:maximum model length|model'?s? (?:maximum )?context length)",  # vLLM, SGLang
            r"exceeds? the available context size",  # llama.cpp server
            r"exceed_context_size_error",  # llama.cpp server (type)
            r"(?:input length|prompt) (?:exceeds|is longer than) the context length",  # Ollama
            r"context size has been exceeded",  # llama.cpp server (older)
            r"greater than the context length",  # LM Studio
            r"input is too long for requested model",  # Amazon Bedrock
        ]
    ),
    re.IGNORECASE,
)

_IMAGE = re.compile(
    "|".join(
        [
            r"invalid[ _]image",  # OpenAI code invalid_image / invalid_image_format, OpenRouter
            r"image (?:is )?not valid",  # Gemini: Provided image is not valid
            r"(?:could not|couldn't|unable to|cannot|can't|failed to) (?:process|decode|read|load|parse)"
            r" (?:the |this |input |provided )*image",  # Anthropic, Gemini, vLLM
            r"unsupported image",  # OpenAI
            r"image format",
            r"image[_ ]parse[_ ]error",
            r"image exceeds",  # Anthropic: image exceeds 5 MB maximum
            r"image (?:is )?too large|image_too_large",
            r"image dimensions? exceed",  # Anthropic: At least one of the image dimensions exceed ...
            r"image_url is only supported",  # OpenAI, non-vision model
            r"invalid.{0,60}image_url",  # OpenAI: Invalid 'messages[1].content[0].image_url.url': ...
            r"(?:does not|doesn't) support (?:image|vision)",
        ]
    ),
    re.IGNORECASE,
)

_STRUCTURE = re.compile(
    "|".join(
        [
            r"tool_use.{0,3} ids? were found without.{0,3}tool_result",  # Anthropic
            r"tool_result.{0,3} blocks?.{0,60}corresponding.{0,3}tool_use",  # Anthropic
            r"unexpected.{0,3}tool_use_id",  # Anthropic
            r"role .?tool.? must be a response to a prece",  # OpenAI, DeepSeek, Qwen (preceding / preceeding)
            r"tool_calls.{0,3} must be followed by tool messages",  # OpenAI
            r"did not have response messages",  # OpenAI
            r"roles must alternate|must alternate between",  # Anthropic, Mistral and HF chat templates
            r"invalid_request_message_order",  # Mistral (type)
            r"unexpected role",  # Mistral: Unexpected role 'user' after role 'tool'
            r"expected last role",  # Mistral
            r"not the same number of function calls and responses",  # Mistral
            r"function (?:call|response) turn comes immediately after",  # Gemini
            r"number of function (?:response|call) parts",  # Gemini
            r"first message must (?:use|be|have) the .?user",  # Anthropic (older)
            r"must have either content or tool_calls",  # Mistral
        ]
    ),
    re.IGNORECASE,
)

_QUOTA = re.compile(
    "|".join(
        [
            r"insufficient_quota",  # OpenAI
            r"exceeded your current quota",  # OpenAI, Gemini
            r"exceeded_current_quota",  # Moonshot
            r"check your plan and billing",  # OpenAI, Gemini
            r"(?<![/\w])billing(?![/\w])",  # but not an upgrade link such as .../settings/billing
            r"credit balance",  # Anthropic: Your credit balance is too low
            r"insufficient (?:account )?(?:balance|credits?|funds)",  # DeepSeek, OpenRouter
            r"out of credits",
            r"payment required",
        ]
    ),
    re.IGNORECASE,
)

_RATE_LIMIT = re.compile(r"rate[_ ]limit|too many requests|per minute|resource_exhausted", re.IGNORECASE)
_OVERLOADED = re.compile(r"overloaded", re.IGNORECASE)
_OVERLOADED_CODE = re.compile(r"overloaded_error", re.IGNORECASE)
_BAD_API_KEY = re.compile(
    r"api[_ ]key[_ ]invalid|api key not valid|invalid api key|incorrect api key", re.IGNORECASE
)  # Gemini and xAI answer 400, not 401, to a bad key
_FILTERED = re.compile(
    "|".join(
        [
            r"content[_ ]filter",  # Azure OpenAI (code content_filter)
            r"content management policy",  # Azure OpenAI
            r"content_policy_violation",
            r"responsibleaipolicyviolation",  # Azure OpenAI inner error
            r"requires moderation",  # OpenRouter
            r"input was flagged",  # OpenRouter
        ]
    ),
    re.IGNORECASE,
)

_RETRY_HINT = re.compile(
    r"(?:try again|retry)(?:\s+(?:in|after))?\s+"
    r"((?:\d+(?:\.\d+)?\s*(?:ms|milliseconds?|hours?|h|minutes?|mins?|m|seconds?|secs?|s)(?![a-z])\s*)+)",
    re.IGNORECASE,
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)", re.IGNORECASE)
_HTML = re.compile(r"<(?:!doctype|html|head|body|title)\b", re.IGNORECASE)
_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HTML_H1 = re.compile(r"<h1[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_HTML_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")
_WHITESPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

# Error types (Anthropic, OpenAI, vLLM, llama.cpp) and Google RPC statuses, with the HTTP status they stand
# for; used when an error arrives inside a 200 stream.
_STATUS_BY_TYPE: dict[str, int] = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "authentication_error": 401,
    "permission_error": 403,
    "invalid_request_error": 400,
    "request_too_large": 413,
    "not_found_error": 404,
    "billing_error": 402,
    "timeout_error": 504,
    "server_error": 500,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "tokens": 429,
    "requests": 429,
    "context_length_exceeded": 400,
    "exceed_context_size_error": 400,
    "invalid_request_message_order": 400,
    "content_filter": 400,
    "badrequesterror": 400,
    "notfounderror": 404,
    "internalservererror": 500,
    "unavailable_error": 503,
    "invalid_argument": 400,
    "failed_precondition": 400,
    "out_of_range": 400,
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "resource_exhausted": 429,
    "internal": 500,
    "unavailable": 503,
    "deadline_exceeded": 504,
}

_GENERIC_MESSAGES = frozenset(
    {
        "error",
        "provider returned error",
        "upstream error",
        "bad request",
        "internal server error",
        "unknown error",
    }
)
_MAX_MESSAGE = 600
_MAX_TEXT = 256 * 1024
_MAX_HAYSTACK = 64 * 1024
_MAX_DEPTH = 6
_OVERFLOW_STATUSES = frozenset({400, 413, 422})
_SHAPE_STATUSES = frozenset({400, 422})
