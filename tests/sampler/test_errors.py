"""Specification of the LLM error classifier: real provider bodies, streams, exceptions, Retry-After."""

from __future__ import annotations

import json
import pickle
import random
import socket
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import msgspec
import pytest
import trio

from sampler.errors import (
    LlmError,
    LlmErrorKind,
    LlmRequestError,
    classify_exception,
    classify_http_error,
    classify_stream_error,
    parse_retry_after,
)

K = LlmErrorKind


def j(obj: object) -> str:
    return json.dumps(obj)


def openai(message: str, type_: str | None = "invalid_request_error", code: str | None = None) -> str:
    return j({"error": {"message": message, "type": type_, "param": None, "code": code}})


def anthropic(type_: str, message: str) -> str:
    return j({"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_011CX"})


def gemini(code: int, message: str, status: str, details: list[object] | None = None) -> str:
    error: dict[str, object] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return j({"error": error})


def mistral(message: object, type_: str = "invalid_request_error", code: str | None = None) -> str:
    return j({"object": "error", "message": message, "type": type_, "param": None, "code": code})


CLOUDFLARE_502 = """<html>
<head><title>502 Bad Gateway</title></head>
<body>
<center><h1>502 Bad Gateway</h1></center>
<hr><center>cloudflare</center>
</body>
</html>"""

NGINX_413 = """<html>
<head><title>413 Request Entity Too Large</title></head>
<body>
<center><h1>413 Request Entity Too Large</h1></center>
<hr><center>nginx/1.25.3</center>
</body>
</html>"""

GATEWAY_NO_TITLE = """<!DOCTYPE html><html><body><script>var x = 1;</script>
<h1>Gateway   Timeout</h1><p>The upstream server did not answer.</p></body></html>"""

# (status, body, headers, expected kind)
CASES = [
    # --- OpenAI -------------------------------------------------------------------------------------
    pytest.param(
        400,
        openai(
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 "
            "tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="openai-context-length-exceeded",
    ),
    pytest.param(
        400,
        openai(
            "This model's maximum context length is 4097 tokens. However, you requested 4268 tokens (4012 in "
            "the messages, 256 in the completion). Please reduce the length of the messages or completion."
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="openai-context-with-completion",
    ),
    pytest.param(
        400,
        openai(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            code="context_length_exceeded",
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="openai-responses-context-window",
    ),
    pytest.param(
        429,
        openai(
            "You exceeded your current quota, please check your plan and billing details. For more "
            "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes.",
            type_="insufficient_quota",
            code="insufficient_quota",
        ),
        {},
        K.QUOTA_EXHAUSTED,
        id="openai-insufficient-quota",
    ),
    pytest.param(
        429,
        openai(
            "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, "
            "Used 25000, Requested 8000. Please try again in 6s. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        {},
        K.RATE_LIMIT,
        id="openai-tpm-rate-limit",
    ),
    pytest.param(
        400,
        openai("Billing hard limit has been reached", code="billing_hard_limit_reached"),
        {},
        K.QUOTA_EXHAUSTED,
        id="openai-billing-hard-limit",
    ),
    pytest.param(
        400,
        openai(
            "You uploaded an unsupported image. Please make sure your image has of one the following "
            "formats: ['png', 'jpeg', 'gif', 'webp'].",
            code="invalid_image_format",
        ),
        {},
        K.IMAGE_FORMAT,
        id="openai-unsupported-image",
    ),
    pytest.param(
        400,
        j(
            {
                "error": {
                    "message": "Invalid 'user': string too long. Expected a string with maximum "
                    "length 64, but got a string with length 80 instead.",
                    "type": "invalid_request_error",
                    "param": "user",
                    "code": "string_above_max_length",
                }
            }
        ),
        {},
        K.PROVIDER,
        id="openai-user-field-too-long-is-no-overflow",
    ),
    pytest.param(
        400,
        openai(
            "Invalid 'messages[1].content': string too long. Expected a string with maximum length "
            "10485760, but got a string with length 10485761 instead.",
            code="string_above_max_length",
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="openai-message-content-too-long-is-overflow",
    ),
    pytest.param(
        400,
        openai("Invalid content type. image_url is only supported by certain models."),
        {},
        K.IMAGE_FORMAT,
        id="openai-image-on-text-model",
    ),
    pytest.param(
        400,
        openai(
            "Invalid 'messages[1].content[0].image_url.url'. Expected a base64-encoded data URL with an "
            "image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME "
            "type 'application/pdf'.",
            code="invalid_value",
        ),
        {},
        K.IMAGE_FORMAT,
        id="openai-invalid-image-url",
    ),
    pytest.param(
        400,
        openai(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
            "'tool_calls'."
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="openai-orphan-tool-message",
    ),
    pytest.param(
        400,
        openai(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            "'tool_call_id'. The following tool_call_ids did not have response messages: call_8xL2"
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="openai-missing-tool-result",
    ),
    pytest.param(
        401,
        openai(
            "Incorrect API key provided: sk-abc***xyz. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        ),
        {},
        K.AUTH,
        id="openai-bad-key",
    ),
    pytest.param(
        404,
        openai("The model `gpt-9` does not exist or you do not have access to it.", code="model_not_found"),
        {},
        K.PROVIDER,
        id="openai-model-not-found",
    ),
    pytest.param(
        500,
        openai(
            "The server had an error while processing your request. Sorry about that!", type_="server_error"
        ),
        {},
        K.STATUS,
        id="openai-server-error",
    ),
    pytest.param(
        503,
        openai("The engine is currently overloaded, please try again later", type_="server_error"),
        {},
        K.OVERLOADED,
        id="openai-engine-overloaded",
    ),
    # --- Azure OpenAI -------------------------------------------------------------------------------
    pytest.param(
        400,
        openai(
            "This model's maximum context length is 128000 tokens. However, you requested 1124171 tokens "
            "(124171 in the messages, 1000000 in the completion). Please reduce the length of the messages "
            "or completion.",
            code="context_length_exceeded",
        ),
        {"apim-request-id": "8d1c"},
        K.CONTEXT_OVERFLOW,
        id="azure-context-length-exceeded",
    ),
    pytest.param(
        429,
        j(
            {
                "error": {
                    "code": "429",
                    "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
                    "version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing "
                    "tier. Please retry after 6 seconds.",
                }
            }
        ),
        {},
        K.RATE_LIMIT,
        id="azure-token-rate-limit",
    ),
    pytest.param(
        400,
        j(
            {
                "error": {
                    "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
                    "content management policy.",
                    "type": None,
                    "param": "prompt",
                    "code": "content_filter",
                    "status": 400,
                    "innererror": {"code": "ResponsibleAIPolicyViolation"},
                }
            }
        ),
        {},
        K.PROVIDER,
        id="azure-content-filter",
    ),
    # --- Anthropic ----------------------------------------------------------------------------------
    pytest.param(
        400,
        anthropic("invalid_request_error", "prompt is too long: 219898 tokens > 200000 maximum"),
        {},
        K.CONTEXT_OVERFLOW,
        id="anthropic-prompt-too-long",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input "
            "length or `max_tokens` and try again",
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="anthropic-input-plus-max-tokens",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for "
            "claude-3-5-sonnet-20240620",
        ),
        {},
        K.PROVIDER,
        id="anthropic-max-tokens-is-not-overflow",
    ),
    pytest.param(
        529,
        anthropic("overloaded_error", "Overloaded"),
        {"x-should-retry": "true"},
        K.OVERLOADED,
        id="anthropic-overloaded-529",
    ),
    pytest.param(
        429,
        anthropic(
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50,000 input tokens per "
            "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        ),
        {"retry-after": "30"},
        K.RATE_LIMIT,
        id="anthropic-rate-limit",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to "
            "upgrade or purchase credits.",
        ),
        {},
        K.QUOTA_EXHAUSTED,
        id="anthropic-credit-balance",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "messages.5: `tool_use` ids were found without `tool_result` blocks immediately after: "
            "toolu_01SWBkC2GPGhoSfEqTZ6y91b. Each `tool_use` block must have a corresponding `tool_result` "
            "block in the next message.",
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="anthropic-tool-use-without-result",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01Ab. Each "
            "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="anthropic-unexpected-tool-use-id",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            'messages: roles must alternate between "user" and "assistant", but found multiple "user" '
            "roles in a row",
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="anthropic-roles-alternate",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "messages.2.content.0.image.source.base64: image exceeds 5 MB maximum: 8259148 bytes > 5242880 "
            "bytes",
        ),
        {},
        K.IMAGE_FORMAT,
        id="anthropic-image-too-big",
    ),
    pytest.param(
        400,
        anthropic(
            "invalid_request_error",
            "messages.7.content.2.image.source.base64.data: At least one of the image dimensions exceed max "
            "allowed size: 8000 pixels",
        ),
        {},
        K.IMAGE_FORMAT,
        id="anthropic-image-dimensions",
    ),
    pytest.param(
        400,
        anthropic("invalid_request_error", "Could not process image"),
        {},
        K.IMAGE_FORMAT,
        id="anthropic-could-not-process-image",
    ),
    pytest.param(
        413,
        anthropic("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        {},
        K.REQUEST_TOO_LARGE,
        id="anthropic-request-too-large",
    ),
    pytest.param(
        401,
        anthropic("authentication_error", "invalid x-api-key"),
        {},
        K.AUTH,
        id="anthropic-authentication",
    ),
    pytest.param(
        403,
        anthropic("permission_error", "Your API key does not have permission to use the specified resource."),
        {},
        K.AUTH,
        id="anthropic-permission",
    ),
    pytest.param(
        500, anthropic("api_error", "Internal server error"), {}, K.STATUS, id="anthropic-api-error"
    ),
    # --- Google Gemini ------------------------------------------------------------------------------
    pytest.param(
        400,
        j(
            [
                {
                    "error": {
                        "code": 400,
                        "message": "The input token count (1200293) exceeds the maximum number of tokens "
                        "allowed (1048576).",
                        "errors": [
                            {
                                "message": "The input token count (1200293) exceeds the maximum number of "
                                "tokens allowed (1048576).",
                                "domain": "global",
                                "reason": "badRequest",
                            }
                        ],
                        "status": "INVALID_ARGUMENT",
                    }
                }
            ]
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="gemini-input-token-count-list-body",
    ),
    pytest.param(
        429,
        gemini(
            429,
            "You exceeded your current quota, please check your plan and billing details. For more "
            "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
            "RESOURCE_EXHAUSTED",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "59s"},
            ],
        ),
        {},
        K.RATE_LIMIT,
        id="gemini-per-minute-quota-with-retry-info",
    ),
    pytest.param(
        429,
        gemini(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "RESOURCE_EXHAUSTED",
            [{"@type": "type.googleapis.com/google.rpc.Help", "links": [{"url": "https://ai.google.dev"}]}],
        ),
        {},
        K.QUOTA_EXHAUSTED,
        id="gemini-quota-without-retry",
    ),
    pytest.param(
        429,
        gemini(429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED"),
        {},
        K.RATE_LIMIT,
        id="vertex-resource-exhausted",
    ),
    pytest.param(
        400,
        gemini(
            400,
            "Please ensure that function call turn comes immediately after a user turn or after a function "
            "response turn.",
            "INVALID_ARGUMENT",
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="gemini-function-call-turn",
    ),
    pytest.param(
        400,
        gemini(400, "Provided image is not valid.", "INVALID_ARGUMENT"),
        {},
        K.IMAGE_FORMAT,
        id="gemini-image-not-valid",
    ),
    pytest.param(
        400,
        gemini(
            400,
            "Unable to process input image. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting",
            "INVALID_ARGUMENT",
        ),
        {},
        K.IMAGE_FORMAT,
        id="gemini-unable-to-process-image",
    ),
    pytest.param(
        400,
        j(
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
                    ],
                }
            }
        ),
        {},
        K.AUTH,
        id="gemini-bad-key-is-400",
    ),
    pytest.param(
        503,
        gemini(503, "The model is overloaded. Please try again later.", "UNAVAILABLE"),
        {},
        K.OVERLOADED,
        id="gemini-model-overloaded",
    ),
    # --- Mistral ------------------------------------------------------------------------------------
    pytest.param(
        400,
        mistral(
            "Prompt contains 152960 tokens and 0 draft tokens, too large for model with 131072 maximum "
            "context length"
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="mistral-prompt-too-large",
    ),
    pytest.param(
        400,
        mistral(
            "Unexpected role 'user' after role 'tool'", type_="invalid_request_message_order", code="3230"
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="mistral-message-order",
    ),
    pytest.param(
        400,
        mistral("Not the same number of function calls and responses"),
        {},
        K.REQUEST_STRUCTURE,
        id="mistral-function-call-count",
    ),
    pytest.param(
        422,
        mistral(
            {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "stream_options", "include_usage"],
                        "msg": "Extra inputs are not permitted",
                        "input": True,
                    }
                ]
            }
        ),
        {},
        K.PROVIDER,
        id="mistral-validation-detail",
    ),
    pytest.param(
        429,
        j({"message": "Requests rate limit exceeded"}),
        {},
        K.RATE_LIMIT,
        id="mistral-rate-limit",
    ),
    # --- DeepSeek -----------------------------------------------------------------------------------
    pytest.param(
        400,
        openai(
            "This model's maximum context length is 131072 tokens. However, you requested 131134 tokens "
            "(122942 in the messages, 8192 in the completion). Please reduce the length of the messages or "
            "completion.",
            code="invalid_request_error",
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="deepseek-context",
    ),
    pytest.param(
        402,
        openai("Insufficient Balance", type_="unknown_error", code="invalid_request_error"),
        {},
        K.QUOTA_EXHAUSTED,
        id="deepseek-insufficient-balance",
    ),
    pytest.param(
        503,
        openai("Server overloaded, please try again later", type_="server_error"),
        {},
        K.OVERLOADED,
        id="deepseek-server-overloaded",
    ),
    # --- Moonshot / Kimi ----------------------------------------------------------------------------
    pytest.param(
        400,
        openai("Invalid request: Your request exceeded model token limit: 262144"),
        {},
        K.CONTEXT_OVERFLOW,
        id="moonshot-token-limit",
    ),
    pytest.param(
        403,
        openai(
            "Your account org-abc<ak-xyz> is not active, organization <org-abc> exceeded current quota, "
            "please check your plan and billing details",
            type_="exceeded_current_quota_error",
        ),
        {},
        K.QUOTA_EXHAUSTED,
        id="moonshot-quota-is-not-auth",
    ),
    pytest.param(
        429,
        openai(
            "Your account org-abc request reached organization max RPM: 3, please try again after 1 seconds",
            type_="rate_limit_reached_error",
        ),
        {},
        K.RATE_LIMIT,
        id="moonshot-rpm",
    ),
    # --- xAI ----------------------------------------------------------------------------------------
    pytest.param(
        400,
        j(
            {
                "code": "Client specified an invalid argument",
                "error": "This model's maximum prompt length is 131072 but the request contains 136973 "
                "tokens.",
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="xai-prompt-length",
    ),
    pytest.param(
        400,
        j(
            {
                "code": "Client specified an invalid argument",
                "error": "Incorrect API key provided: xa***yz. You can obtain an API key from https://console.x.ai.",
            }
        ),
        {},
        K.AUTH,
        id="xai-bad-key-is-400",
    ),
    # --- Groq ---------------------------------------------------------------------------------------
    pytest.param(
        400,
        openai("Please reduce the length of the messages or completion.", code="context_length_exceeded"),
        {},
        K.CONTEXT_OVERFLOW,
        id="groq-context",
    ),
    pytest.param(
        413,
        openai(
            "Request too large for model `llama-3.3-70b-versatile` in organization `org_01jp` service tier "
            "`on_demand` on tokens per minute (TPM): Limit 6000, Requested 14810, please reduce your message "
            "size and try again.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        {},
        K.REQUEST_TOO_LARGE,
        id="groq-413-over-tpm",
    ),
    pytest.param(
        429,
        openai(
            "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_01jp` service tier "
            "`on_demand` on tokens per minute (TPM): Limit 12000, Used 9000, Requested 4000. Please try "
            "again in 5.2s. Need more tokens? Upgrade to Dev Tier today at "
            "https://console.groq.com/settings/billing",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        {},
        K.RATE_LIMIT,
        id="groq-rate-limit-with-billing-link",
    ),
    # --- OpenRouter ---------------------------------------------------------------------------------
    pytest.param(
        400,
        j(
            {
                "error": {
                    "message": "This endpoint's maximum context length is 200000 tokens. However, you "
                    "requested about 5028244 tokens (4945291 of text input, 2953 of tool input, 80000 in the "
                    'output). Please reduce the length of either one, or use the "middle-out" transform to '
                    "compress your prompt automatically.",
                    "code": 400,
                }
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="openrouter-endpoint-context",
    ),
    pytest.param(
        402,
        j(
            {
                "error": {
                    "message": "Insufficient credits. Add more using https://openrouter.ai/credits",
                    "code": 402,
                }
            }
        ),
        {},
        K.QUOTA_EXHAUSTED,
        id="openrouter-credits",
    ),
    pytest.param(
        400,
        j(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 400,
                    "metadata": {
                        "raw": mistral(
                            "Unexpected role 'tool' after role 'user'",
                            type_="invalid_request_message_order",
                            code="3230",
                        ),
                        "provider_name": "Mistral",
                    },
                }
            }
        ),
        {},
        K.REQUEST_STRUCTURE,
        id="openrouter-wrapped-upstream-error",
    ),
    pytest.param(
        403,
        j(
            {
                "error": {
                    "message": "Your chosen model requires moderation and your input was flagged",
                    "code": 403,
                    "metadata": {
                        "reasons": ["harassment"],
                        "flagged_input": "...",
                        "provider_name": "OpenAI",
                    },
                }
            }
        ),
        {},
        K.PROVIDER,
        id="openrouter-moderation-is-not-auth",
    ),
    pytest.param(
        408,
        j({"error": {"message": "Your request timed out", "code": 408}}),
        {},
        K.STATUS,
        id="openrouter-timeout",
    ),
    pytest.param(
        502,
        j({"error": {"message": "Provider returned error", "code": 502}}),
        {},
        K.STATUS,
        id="openrouter-model-down",
    ),
    # --- vLLM ---------------------------------------------------------------------------------------
    pytest.param(
        400,
        j(
            {
                "object": "error",
                "message": "This model's maximum context length is 6048 tokens. However, you requested 6616 "
                "tokens (568 in the messages, 6048 in the completion). Please reduce the length of the "
                "messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="vllm-maximum-context",
    ),
    pytest.param(
        400,
        j(
            {
                "object": "error",
                "message": "The decoder prompt (length 9000) is longer than the maximum model length of "
                "8192. Make sure that `max_model_len` is no smaller than the number of text tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="vllm-longer-than-max-model-length",
    ),
    pytest.param(
        400,
        j(
            {
                "error": {
                    "object": "error",
                    "message": "The input (85050 tokens) is longer than the model's context length "
                    "(32768 tokens).",
                    "type": "BadRequestError",
                    "code": 400,
                }
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="vllm-longer-than-context-length",
    ),
    pytest.param(
        400,
        j(
            {
                "object": "error",
                "message": "max_tokens must be at least 1, got -186.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        {},
        K.PROVIDER,
        id="vllm-bad-parameter",
    ),
    # --- llama.cpp server ---------------------------------------------------------------------------
    pytest.param(
        400,
        j(
            {
                "error": {
                    "code": 400,
                    "message": "request (4390 tokens) exceeds the available context size (4096 tokens), try "
                    "increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4390,
                    "n_ctx": 4096,
                }
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="llamacpp-exceed-context-size",
    ),
    pytest.param(
        400,
        j(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size. try increasing the context "
                    "size or enable context shift",
                    "type": "invalid_request_error",
                }
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="llamacpp-exceeds-available-context",
    ),
    pytest.param(
        503,
        j({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
        {},
        K.STATUS,
        id="llamacpp-loading-model",
    ),
    # --- Ollama -------------------------------------------------------------------------------------
    pytest.param(
        400,
        j({"error": "the input length exceeds the context length"}),
        {},
        K.CONTEXT_OVERFLOW,
        id="ollama-input-length",
    ),
    pytest.param(
        400,
        j(
            {
                "error": j(
                    {
                        "error": {
                            "code": 400,
                            "message": "request (8889 tokens) exceeds the available context size "
                            "(4096 tokens), try increasing it",
                            "type": "exceed_context_size_error",
                        }
                    }
                )
            }
        ),
        {},
        K.CONTEXT_OVERFLOW,
        id="ollama-wrapped-llamacpp-error",
    ),
    pytest.param(
        400,
        j({"error": "the prompt is longer than the context length currently available to the model"}),
        {},
        K.CONTEXT_OVERFLOW,
        id="ollama-no-shift",
    ),
    pytest.param(
        404,
        j({"error": 'model "llama9" not found, try pulling it first'}),
        {},
        K.PROVIDER,
        id="ollama-model-not-found",
    ),
    pytest.param(
        500,
        j({"error": "llama runner process has terminated: signal: killed"}),
        {},
        K.STATUS,
        id="ollama-runner-died",
    ),
    # --- Proxies, odd bodies, status gates ----------------------------------------------------------
    pytest.param(502, CLOUDFLARE_502, {"content-type": "text/html"}, K.STATUS, id="html-cloudflare-502"),
    pytest.param(413, NGINX_413, {"content-type": "text/html"}, K.REQUEST_TOO_LARGE, id="html-nginx-413"),
    pytest.param(504, GATEWAY_NO_TITLE, {}, K.STATUS, id="html-without-title"),
    pytest.param(504, b"", {}, K.STATUS, id="empty-504"),
    pytest.param(429, "Too Many Requests", {"Retry-After": "2"}, K.RATE_LIMIT, id="plain-text-429"),
    pytest.param(400, "prompt is too long", {}, K.CONTEXT_OVERFLOW, id="plain-text-overflow"),
    pytest.param(
        500,
        j({"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}),
        {},
        K.CONTEXT_OVERFLOW,
        id="overflow-wording-on-500-is-overflow-not-retried",
    ),
    pytest.param(
        429,
        openai("This model's maximum context length is 8192 tokens.", code="context_length_exceeded"),
        {},
        K.CONTEXT_OVERFLOW,
        id="overflow-wording-on-429-is-overflow-not-retried",
    ),
    pytest.param(409, "", {}, K.STATUS, id="conflict"),
    pytest.param(400, b"\x89PNG\r\n\x1a\n\x00\x00garbage\xff\xfe", {}, K.PROVIDER, id="garbage-bytes-400"),
    pytest.param(401, '{"error": {"message": "unterminated', {}, K.AUTH, id="truncated-json-401"),
    pytest.param(418, "I'm a teapot", {}, K.PROVIDER, id="other-4xx"),
    pytest.param(302, "", {"location": "https://login"}, K.UNKNOWN, id="redirect-is-unknown"),
]


@pytest.mark.parametrize(("status", "body", "headers", "expected"), CASES)
def test_http_errors_of_every_provider_are_classified_by_status_and_message(status, body, headers, expected):
    error = classify_http_error(status, body, headers)

    assert error.kind is expected
    assert error.status == status
    assert error.message


def test_the_table_covers_enough_real_bodies():
    assert len(CASES) >= 40
    assert {case.values[3] for case in CASES} >= {
        K.CONTEXT_OVERFLOW,
        K.REQUEST_TOO_LARGE,
        K.IMAGE_FORMAT,
        K.REQUEST_STRUCTURE,
        K.QUOTA_EXHAUSTED,
        K.RATE_LIMIT,
        K.OVERLOADED,
        K.AUTH,
        K.STATUS,
        K.PROVIDER,
    }


def test_the_providers_message_and_code_are_carried_over():
    error = classify_http_error(
        400,
        openai("This model's maximum context length is 8192 tokens.", code="context_length_exceeded"),
        {},
    )

    assert error.message == "This model's maximum context length is 8192 tokens."
    assert error.code == "context_length_exceeded"


def test_the_error_type_stands_in_for_a_missing_code():
    error = classify_http_error(529, anthropic("overloaded_error", "Overloaded"), {})

    assert (error.code, error.message) == ("overloaded_error", "Overloaded")


def test_a_google_status_name_stands_in_for_a_numeric_code():
    error = classify_http_error(400, gemini(400, "Provided image is not valid.", "INVALID_ARGUMENT"), {})

    assert error.code == "INVALID_ARGUMENT"


def test_a_generic_wrapper_message_gives_way_to_the_upstream_one():
    raw = mistral("Unexpected role 'tool' after role 'user'", type_="invalid_request_message_order")
    body = j({"error": {"message": "Provider returned error", "code": 400, "metadata": {"raw": raw}}})

    error = classify_http_error(400, body, {})

    assert error.message == "Unexpected role 'tool' after role 'user'"
    assert error.code == "invalid_request_message_order"


def test_a_json_error_nested_in_a_message_string_is_unwrapped():
    inner = anthropic("invalid_request_error", "prompt is too long: 207368 tokens > 200000 maximum")
    body = j({"error": {"code": 400, "message": inner, "status": "INVALID_ARGUMENT"}})

    error = classify_http_error(400, body, {})

    assert error.kind is K.CONTEXT_OVERFLOW
    assert error.message == "prompt is too long: 207368 tokens > 200000 maximum"


def test_field_errors_of_a_validation_body_are_joined():
    body = j(
        {
            "detail": [
                {"type": "float_type", "loc": ["body", "top_p"], "msg": "Input should be a valid number"},
                {
                    "type": "extra_forbidden",
                    "loc": ["body", "store"],
                    "msg": "Extra inputs are not permitted",
                },
            ]
        }
    )

    error = classify_http_error(422, body, {})

    assert error.message == "Input should be a valid number; Extra inputs are not permitted"
    assert error.kind is K.PROVIDER


def test_a_content_filter_marks_the_error_filtered():
    filtered = classify_http_error(
        400,
        j({"error": {"message": "The response was filtered", "code": "content_filter", "status": 400}}),
        {},
    )
    plain = classify_http_error(400, openai("Invalid value for 'temperature'"), {})

    assert filtered.filtered
    assert not plain.filtered


def test_html_from_a_proxy_is_reduced_to_its_title():
    assert classify_http_error(502, CLOUDFLARE_502, {}).message == "502 Bad Gateway"
    assert classify_http_error(413, NGINX_413, {}).message == "413 Request Entity Too Large"


def test_html_without_a_title_falls_back_to_its_headline_and_hides_scripts():
    message = classify_http_error(504, GATEWAY_NO_TITLE, {}).message

    assert message == "Gateway Timeout"


def test_an_empty_body_is_described_by_its_status():
    assert classify_http_error(504, b"", {}).message == "HTTP 504 Gateway Timeout"
    assert classify_http_error(529, "   \n", {}).message == "HTTP 529"


def test_plain_text_bodies_are_the_message_with_whitespace_collapsed():
    error = classify_http_error(500, "upstream\n\n  connect   error\x00", {})

    assert error.message == "upstream connect error"


def test_messages_are_trimmed_to_a_readable_length():
    error = classify_http_error(400, openai("x" * 100_000), {})

    assert 100 < len(error.message) <= 600
    assert error.message.endswith("...")


@pytest.mark.parametrize(
    "body",
    [
        "{",
        "[]",
        "{}",
        "null",
        "42",
        '"just a string"',
        '{"error": null}',
        '{"error": {"message": 7, "code": true, "type": ["x"]}}',
        '{"error": {"details": "not a list", "metadata": {"raw": 5}}}',
        "[" * 5000,
        j(["nested"] * 3),
        '{"error": ' * 50 + "1" + "}" * 50,
        b"\xff\xfe\xfd",
        "<html><title></title></html>",
    ],
)
def test_malformed_bodies_never_raise(body):
    error = classify_http_error(400, body, {})

    assert error.kind is K.PROVIDER
    assert isinstance(error.message, str)
    assert error.message


def test_a_status_that_is_not_a_number_never_raises():
    error = classify_http_error("500", "oops", {})  # type: ignore[arg-type]

    assert error.kind is K.UNKNOWN
    assert error.status is None


def test_random_bytes_never_raise_for_any_status():
    rng = random.Random(7)
    for _ in range(300):
        status = rng.choice([400, 401, 413, 422, 429, 500, 503, 529])
        body = rng.randbytes(rng.randrange(0, 200))
        error = classify_http_error(status, body, {"retry-after": rng.choice(["", "x", "5", "-1"])})
        assert isinstance(error, LlmError)
        assert error.status == status


# --- Waits the provider asks for --------------------------------------------------------------------------


def test_retry_after_header_is_carried_over():
    error = classify_http_error(429, anthropic("rate_limit_error", "slow down"), {"Retry-After": "30"})

    assert error.retry_after == 30.0


def test_retry_after_ms_header_is_carried_over():
    error = classify_http_error(429, "", {"retry-after-ms": "1500", "retry-after": "9"})

    assert error.retry_after == 1.5


@pytest.mark.parametrize(
    ("message", "seconds"),
    [
        ("Please try again in 6s.", 6.0),
        ("Please try again in 1.302s. Visit https://platform.openai.com", 1.302),
        ("Please try again in 20ms.", 0.02),
        ("Please try again in 7m12.5s.", 432.5),
        ("Please retry after 6 seconds.", 6.0),
        ("Please retry in 20.04466179s.", 20.04466179),
        ("please try again after 1 seconds", 1.0),
        ("Try again in 2 minutes", 120.0),
    ],
)
def test_a_wait_named_in_the_message_is_used_when_no_header_gives_one(message, seconds):
    error = classify_http_error(429, openai(message, type_="tokens"), {})

    assert error.retry_after == pytest.approx(seconds)


def test_a_header_wait_wins_over_one_named_in_the_message():
    error = classify_http_error(429, openai("Please try again in 6s."), {"retry-after": "2"})

    assert error.retry_after == 2.0


def test_google_retry_info_gives_the_wait():
    body = gemini(
        429,
        "Quota exceeded for metric: generate_content_free_tier_requests",
        "RESOURCE_EXHAUSTED",
        [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
    )

    assert classify_http_error(429, body, {}).retry_after == 37.0


def test_a_retry_without_a_number_is_no_wait():
    error = classify_http_error(500, openai("Please retry your request after a brief wait."), {})

    assert error.retry_after is None


NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "5"}, 5.0),
        ({"Retry-After": "2.5"}, 2.5),
        ({"RETRY-AFTER": " 7 "}, 7.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After-Ms": "1000", "Retry-After": "60"}, 1.0),
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
        ({"retry-after": "Wed, 01 Jan 2025 12:00:42 GMT"}, 42.0),
        ({"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, 0.0),
        ({"retry-after": "-5"}, None),
        ({"retry-after-ms": "-5"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "1_000"}, None),
        ({"retry-after": "5, 6"}, None),
        ({"x-ratelimit-reset-requests": "1s"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers, now=NOW) == expected


def test_parse_retry_after_measures_dates_from_the_current_time_by_default():
    soon = format_datetime(datetime.fromtimestamp(datetime.now(UTC).timestamp() + 3600, UTC), usegmt=True)

    wait = parse_retry_after({"retry-after": soon})

    assert wait is not None
    assert 3500 < wait <= 3600


def test_parse_retry_after_reads_httpx_headers():
    headers = httpx.Headers([("Retry-After", "4")])

    assert parse_retry_after(headers) == 4.0


# --- Errors inside a 200 stream ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "event", "kind", "status"),
    [
        pytest.param(
            anthropic("overloaded_error", "Overloaded"), "error", K.OVERLOADED, 529, id="anthropic-overloaded"
        ),
        pytest.param(
            "event: error\n"
            'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n',
            None,
            K.OVERLOADED,
            529,
            id="anthropic-raw-sse-block",
        ),
        pytest.param(
            anthropic("rate_limit_error", "Number of request tokens has exceeded your rate limit"),
            "error",
            K.RATE_LIMIT,
            429,
            id="anthropic-rate-limit",
        ),
        pytest.param(
            anthropic("api_error", "Internal server error"), "error", K.STATUS, 500, id="anthropic-api"
        ),
        pytest.param(
            anthropic("authentication_error", "invalid x-api-key"), "error", K.AUTH, 401, id="anthropic-auth"
        ),
        pytest.param(
            anthropic("permission_error", "not allowed"), "error", K.AUTH, 403, id="anthropic-permission"
        ),
        pytest.param(
            anthropic("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
            "error",
            K.CONTEXT_OVERFLOW,
            400,
            id="anthropic-invalid-request",
        ),
        pytest.param(
            anthropic("request_too_large", "Request exceeds the maximum allowed number of bytes."),
            "error",
            K.REQUEST_TOO_LARGE,
            413,
            id="anthropic-too-large",
        ),
        pytest.param(
            anthropic("not_found_error", "model: claude-9"),
            "error",
            K.PROVIDER,
            404,
            id="anthropic-not-found",
        ),
        pytest.param(
            "data: "
            + openai(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "130000 tokens.",
                code="context_length_exceeded",
            ),
            None,
            K.CONTEXT_OVERFLOW,
            400,
            id="openai-data-line",
        ),
        pytest.param(
            openai("The server had an error while processing your request.", type_="server_error").encode(),
            None,
            K.STATUS,
            500,
            id="openai-server-error-bytes",
        ),
        pytest.param(
            j({"error": {"code": 502, "message": "Provider returned error: upstream disconnected"}}),
            None,
            K.STATUS,
            502,
            id="openrouter-numeric-code",
        ),
        pytest.param(
            j({"error": {"object": "error", "message": "boom", "type": "InternalServerError", "code": 500}}),
            None,
            K.STATUS,
            500,
            id="vllm-internal",
        ),
        pytest.param(
            j(
                {
                    "error": {
                        "code": 500,
                        "message": "the request exceeds the available context size",
                        "type": "exceed_context_size_error",
                    }
                }
            ),
            None,
            K.CONTEXT_OVERFLOW,
            400,
            id="llamacpp-type-wins-over-its-500",
        ),
        pytest.param(
            gemini(503, "The model is overloaded. Please try again later.", "UNAVAILABLE"),
            None,
            K.OVERLOADED,
            503,
            id="gemini-unavailable",
        ),
        pytest.param(
            j({"error": {"message": "Rate limit exceeded, please slow down"}}),
            None,
            K.RATE_LIMIT,
            None,
            id="untyped-rate-limit-wording",
        ),
        pytest.param(
            j({"error": {"message": "roles must alternate between user and assistant"}}),
            None,
            K.REQUEST_STRUCTURE,
            None,
            id="untyped-structure-wording",
        ),
        pytest.param(j({"error": {"message": "something odd"}}), None, K.UNKNOWN, None, id="untyped-unknown"),
        pytest.param("not json at all", "error", K.UNKNOWN, None, id="garbage-text"),
        pytest.param(b"\xff\xfe{", None, K.UNKNOWN, None, id="garbage-bytes"),
        pytest.param("", "error", K.UNKNOWN, None, id="empty"),
    ],
)
def test_errors_inside_a_stream_are_classified_like_http_errors(payload, event, kind, status):
    error = classify_stream_error(payload, event)

    assert error.kind is kind
    assert error.status == status
    assert error.message


def test_a_field_too_long_inside_a_stream_fails_at_once_with_the_providers_words():
    message = (
        "Invalid 'user': string too long. Expected a string with maximum length 64, but got a string with "
        "length 80 instead."
    )
    payload = {
        "error": {"message": message, "type": "invalid_request_error", "code": "string_above_max_length"}
    }

    error = classify_stream_error(payload, None)

    assert (error.kind, error.status, error.message) == (K.PROVIDER, 400, message)


def test_a_decoded_mapping_is_accepted_as_the_stream_payload():
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

    error = classify_stream_error(payload, "error")

    assert (error.kind, error.status, error.code, error.message) == (
        K.OVERLOADED,
        529,
        "overloaded_error",
        "Overloaded",
    )


def test_an_overloaded_error_type_is_overloaded_at_any_status():
    body = anthropic("overloaded_error", "Overloaded")

    assert classify_http_error(500, body, {}).kind is K.OVERLOADED
    assert classify_http_error(200, body, {}).kind is K.OVERLOADED


def test_a_stream_event_without_data_names_the_event():
    error = classify_stream_error("event: error\n", "error")

    assert error.kind is K.UNKNOWN
    assert "error" in error.message


# --- Exceptions -------------------------------------------------------------------------------------------

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        pytest.param(
            httpx.ConnectError("[Errno 111] Connection refused", request=REQUEST), K.CONNECTION, id="connect"
        ),
        pytest.param(httpx.ConnectTimeout("timed out", request=REQUEST), K.TIMEOUT, id="connect-timeout"),
        pytest.param(httpx.ReadTimeout("timed out", request=REQUEST), K.TIMEOUT, id="read-timeout"),
        pytest.param(httpx.WriteTimeout("timed out", request=REQUEST), K.TIMEOUT, id="write-timeout"),
        pytest.param(httpx.PoolTimeout("timed out", request=REQUEST), K.TIMEOUT, id="pool-timeout"),
        pytest.param(
            httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body", request=REQUEST
            ),
            K.CONNECTION,
            id="remote-protocol",
        ),
        pytest.param(
            httpx.ReadError("[Errno 104] Connection reset by peer", request=REQUEST), K.CONNECTION, id="read"
        ),
        pytest.param(httpx.WriteError("broken pipe", request=REQUEST), K.CONNECTION, id="write"),
        pytest.param(httpx.ProxyError("proxy refused", request=REQUEST), K.CONNECTION, id="proxy"),
        pytest.param(
            ConnectionResetError(104, "Connection reset by peer"), K.CONNECTION, id="connection-reset"
        ),
        pytest.param(BrokenPipeError(32, "Broken pipe"), K.CONNECTION, id="broken-pipe"),
        pytest.param(socket.gaierror(-2, "Name or service not known"), K.CONNECTION, id="dns"),
        pytest.param(trio.BrokenResourceError(), K.CONNECTION, id="trio-broken-resource"),
        pytest.param(TimeoutError(), K.TIMEOUT, id="builtin-timeout"),
        pytest.param(trio.TooSlowError(), K.TIMEOUT, id="trio-too-slow"),
        pytest.param(
            msgspec.DecodeError("JSON is malformed: invalid character"), K.SYNTAX, id="msgspec-decode"
        ),
        pytest.param(msgspec.ValidationError("Expected `str`, got `int`"), K.SYNTAX, id="msgspec-validation"),
        pytest.param(ValueError("bad SSE line"), K.SYNTAX, id="value-error"),
        pytest.param(json.JSONDecodeError("Expecting value", "{", 1), K.SYNTAX, id="json-decode"),
        pytest.param(
            httpx.DecodingError("incorrect header check", request=REQUEST), K.SYNTAX, id="content-decoding"
        ),
        pytest.param(KeyboardInterrupt(), K.ABORT, id="keyboard-interrupt"),
        pytest.param(
            httpx.LocalProtocolError("illegal header", request=REQUEST), K.UNKNOWN, id="local-protocol"
        ),
        pytest.param(RuntimeError("surprise"), K.UNKNOWN, id="other"),
    ],
)
def test_exceptions_are_classified(exc, kind):
    error = classify_exception(exc)

    assert error.kind is kind
    assert error.status is None
    assert error.code == type(exc).__name__
    assert error.message.startswith(type(exc).__name__)


def test_a_real_refused_connection_is_a_connection_error():
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(httpx.ConnectError) as caught:
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=2.0)

    assert classify_exception(caught.value).kind is K.CONNECTION


@pytest.mark.trio
async def test_trio_cancellation_is_an_abort():
    caught: list[BaseException] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as exc:
            caught.append(exc)
            raise

    assert classify_exception(caught[0]).kind is K.ABORT


def test_an_http_status_error_is_classified_by_its_response():
    response = httpx.Response(
        529,
        request=REQUEST,
        content=anthropic("overloaded_error", "Overloaded").encode(),
        headers={"retry-after": "3"},
    )
    exc = httpx.HTTPStatusError("Server error '529'", request=REQUEST, response=response)

    error = classify_exception(exc)

    assert (error.kind, error.status, error.retry_after, error.message) == (
        K.OVERLOADED,
        529,
        3.0,
        "Overloaded",
    )


def test_an_http_status_error_of_an_unread_stream_is_classified_by_its_status():
    response = httpx.Response(503, request=REQUEST, stream=httpx.ByteStream(b"never read"))
    exc = httpx.HTTPStatusError("Server error '503'", request=REQUEST, response=response)

    error = classify_exception(exc)

    assert (error.kind, error.status, error.message) == (K.STATUS, 503, "HTTP 503 Service Unavailable")


def test_an_llm_request_error_keeps_its_error():
    original = LlmError(kind=K.CONTEXT_OVERFLOW, status=400, message="prompt is too long")

    assert classify_exception(LlmRequestError(original)) is original


def test_an_exception_group_is_classified_by_its_leaves():
    group = BaseExceptionGroup("nursery", [RuntimeError("x"), httpx.ReadTimeout("t", request=REQUEST)])

    assert classify_exception(group).kind is K.TIMEOUT


def test_an_abort_inside_an_exception_group_wins():
    group = BaseExceptionGroup(
        "nursery",
        [httpx.ReadError("reset", request=REQUEST), BaseExceptionGroup("inner", [KeyboardInterrupt()])],
    )

    assert classify_exception(group).kind is K.ABORT


def test_an_exception_without_text_is_named_by_its_type():
    error = classify_exception(trio.TooSlowError())

    assert error.message == "TooSlowError"


# --- The error values themselves --------------------------------------------------------------------------


def test_error_kinds_have_stable_values():
    assert [kind.value for kind in LlmErrorKind] == [
        "syntax",
        "abort",
        "connection",
        "timeout",
        "status",
        "rate_limit",
        "quota_exhausted",
        "overloaded",
        "context_overflow",
        "request_too_large",
        "request_structure",
        "image_format",
        "empty_response",
        "auth",
        "provider",
        "unknown",
    ]


def test_an_error_survives_json_msgpack_and_pickle():
    error = LlmError(
        kind=K.RATE_LIMIT,
        status=429,
        message="slow down",
        code="rate_limit_error",
        retry_after=2.5,
        filtered=False,
    )

    assert msgspec.json.decode(msgspec.json.encode(error), type=LlmError) == error
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(error), type=LlmError) == error
    assert pickle.loads(pickle.dumps(error)) == error
    assert msgspec.json.decode(msgspec.json.encode(error))["type"] == "LlmError"


def test_an_error_is_immutable():
    error = LlmError(kind=K.AUTH)

    with pytest.raises(AttributeError):
        error.kind = K.UNKNOWN  # type: ignore[misc]


def test_an_llm_request_error_carries_and_describes_its_error():
    error = LlmError(kind=K.AUTH, status=401, message="invalid x-api-key")
    exc = LlmRequestError(error)

    assert exc.error is error
    assert str(exc) == "auth (HTTP 401): invalid x-api-key"
    assert str(LlmRequestError(LlmError(kind=K.TIMEOUT, message="ReadTimeout"))) == "timeout: ReadTimeout"
    assert pickle.loads(pickle.dumps(exc)).error == error
