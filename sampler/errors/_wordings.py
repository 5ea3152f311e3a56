"""What real providers say when something goes wrong, as data: structured field values, exact phrases and
families of meaning, each with the provider that says it and where that is documented or reported.

Sources name the provider's public error documentation ("docs") or its public bug reports ("reports").
"""

from __future__ import annotations

from ._families import Family as F
from ._families import Field, Meaning, Wording

__all__ = ["FIELDS", "MEANINGS", "NOISE", "WORDINGS"]

FIELDS: tuple[Field, ...] = (
    Field("context_length_exceeded", F.OVERFLOW, "OpenAI, Azure, Groq, OpenRouter: error code (docs)"),
    Field("exceed_context_size_error", F.OVERFLOW, "llama.cpp server: error type (server README)"),
    Field("ContextWindowExceededError", F.OVERFLOW, "LiteLLM proxy: exception name as type (docs)"),
    Field("model_context_window_exceeded", F.OVERFLOW, "Anthropic: stop reason on newer models (docs)"),
    Field("insufficient_quota", F.QUOTA, "OpenAI: 429 code (docs: error codes)"),
    Field("billing_hard_limit_reached", F.QUOTA, "OpenAI: 400 code (reports)"),
    Field("billing_not_active", F.QUOTA, "OpenAI: 429 code (reports)"),
    Field("billing_error", F.QUOTA, "Anthropic: 402 type (docs: errors)"),
    Field("budget_exceeded", F.QUOTA, "LiteLLM proxy: 400/429 type (docs: budgets)"),
    Field("exceeded_current_quota_error", F.QUOTA, "Moonshot / Kimi: type (docs)"),
    Field("insufficient_balance", F.QUOTA, "DeepSeek, SiliconFlow: code (reports)"),
    Field("payment_required", F.QUOTA, "Fireworks, OpenRouter: code (reports)"),
    Field("ServiceQuotaExceededException", F.QUOTA, "Amazon Bedrock: error type (docs: API errors)"),
    Field("invalid_image", F.IMAGE, "OpenAI: 400 code (reports)"),
    Field("invalid_image_format", F.IMAGE, "OpenAI: 400 code (reports)"),
    Field("invalid_image_url", F.IMAGE, "OpenAI: 400 code (reports)"),
    Field("image_parse_error", F.IMAGE, "OpenAI: 400 code (reports)"),
    Field("image_too_large", F.IMAGE, "OpenAI: 400 code (reports)"),
    Field("invalid_request_message_order", F.STRUCTURE, "Mistral: type (reports)"),
    Field("invalid_api_key", F.AUTH, "OpenAI, Groq, xAI: code (docs)"),
    Field("incorrect_api_key", F.AUTH, "OpenAI-compatible servers: code (reports)"),
    Field("API_KEY_INVALID", F.AUTH, "Gemini: ErrorInfo reason on a 400 (docs: troubleshooting)"),
    Field("authentication_error", F.AUTH, "Anthropic: 401 type (docs: errors)"),
    Field("content_filter", F.FILTERED, "Azure OpenAI: code (docs: content filtering)"),
    Field("content_policy_violation", F.FILTERED, "OpenAI images, Azure: code (docs)"),
    Field("overloaded_error", F.OVERLOADED, "Anthropic: 529 type (docs: errors)"),
    Field("rate_limit_exceeded", F.RATE_LIMIT, "OpenAI, Groq, Cerebras: 429 code (docs)"),
    Field("rate_limit_error", F.RATE_LIMIT, "Anthropic: 429 type (docs: errors)"),
    Field("RESOURCE_EXHAUSTED", F.RATE_LIMIT, "Gemini, Vertex AI: 429 status (docs: troubleshooting)"),
    Field("ThrottlingException", F.RATE_LIMIT, "Amazon Bedrock: 429 error type (docs: API errors)"),
    Field("too_many_requests", F.RATE_LIMIT, "Together, Fireworks: code (reports)"),
)

WORDINGS: tuple[Wording, ...] = (
    # -- overflow ---------------------------------------------------------------------------------------
    Wording(r"context[_ ]length[_ ]exceeded", F.OVERFLOW, "OpenAI, Azure, Groq, OpenRouter (docs)"),
    Wording(r"maximum context length", F.OVERFLOW, "OpenAI, DeepSeek, Mistral, vLLM, OpenRouter (reports)"),
    Wording(r"prompt is too long", F.OVERFLOW, "Anthropic: invalid_request_error (docs)"),
    Wording(r"input token count.{0,40}exceeds the maximum", F.OVERFLOW, "Gemini (reports)"),
    Wording(r"maximum prompt length is", F.OVERFLOW, "xAI (reports)"),
    Wording(r"reduce the length of the messages", F.OVERFLOW, "OpenAI, Groq, Cerebras (reports)"),
    Wording(r"exceeded model token limit", F.OVERFLOW, "Moonshot / Kimi (reports)"),
    Wording(r"model max length exceeded", F.OVERFLOW, "Moonshot, older models (reports)"),
    Wording(
        r"longer than the (?:maximum model length|model'?s? (?:maximum )?context length)",
        F.OVERFLOW,
        "vLLM, SGLang (reports)",
    ),
    Wording(r"exceed_context_size_error", F.OVERFLOW, "llama.cpp server (reports)"),
    Wording(r"input is too long for requested model", F.OVERFLOW, "Amazon Bedrock (reports)"),
    Wording(r"too many input tokens|input tokens? exceed", F.OVERFLOW, "Amazon Bedrock, Cohere (reports)"),
    Wording(
        r"contextwindowexceedederror|context window exceeded for given call",
        F.OVERFLOW,
        "LiteLLM proxy: exception name and router message (docs, reports)",
    ),
    Wording(r"tokens \+ .?max_new_tokens.? must be <=", F.OVERFLOW, "Hugging Face TGI, Together (reports)"),
    Wording(r"prompt too long; exceeded (?:max )?context length", F.OVERFLOW, "Ollama (reports)"),
    Wording(
        r"request too large for .{0,80}(?:tokens per min|\(?tpm\)?)",
        F.OVERFLOW,
        "OpenAI, Groq: a request larger than the per-minute token limit (docs: rate limits)",
    ),
    Wording(r"keep the first \d+ tokens when context the overflows", F.OVERFLOW, "LM Studio (reports)"),
    Wording(r"input token count .{0,60}(?:exceeds|only supports up to)", F.OVERFLOW, "Vertex AI (docs)"),
    Wording(r"must have less than \d+ tokens", F.OVERFLOW, "Hugging Face TGI (reports)"),
    # -- a field longer than allowed (an overflow only when the field is part of the conversation) --------
    Wording(
        r"(?:string|array) too long|expected an? (?:string|array) with maximum length",
        F.FIELD_LENGTH,
        "OpenAI: Invalid 'user': string too long. Expected a string with maximum length 64 (reports)",
    ),
    Wording(r"(?:string|array)_above_max_length", F.FIELD_LENGTH, "OpenAI: 400 code (reports)"),
    Wording(
        r"(?:string|list) should have at most \d+ (?:characters|items)",
        F.FIELD_LENGTH,
        "Anthropic, vLLM and other pydantic-validated APIs: metadata.user_id: String should have at most 256"
        " characters (reports)",
    ),
    # -- output limits (not overflows) --------------------------------------------------------------------
    Wording(
        r"`?max_(?:completion_)?tokens`? must be less than or equal to",
        F.OUTPUT_LIMIT,
        "Groq: max_tokens above the model's limit, even though the message names the context window",
    ),
    Wording(r"max_tokens.{0,20}is too large", F.OUTPUT_LIMIT, "OpenAI: max_tokens above the model's limit"),
    # -- memory -----------------------------------------------------------------------------------------
    Wording(r"requires more system memory", F.MEMORY, "Ollama: 500 (reports)"),
    Wording(
        r"(?:not enough|insufficient) (?:system |gpu |v)?memory", F.MEMORY, "Ollama, LM Studio (reports)"
    ),
    Wording(
        r"failed to allocate .{0,40}buffer|unable to allocate .{0,20}memory",
        F.MEMORY,
        "llama.cpp, Ollama (reports)",
    ),
    # -- quota ------------------------------------------------------------------------------------------
    Wording(r"insufficient_quota", F.QUOTA, "OpenAI (docs)"),
    Wording(r"exceeded your current quota", F.QUOTA, "OpenAI, Gemini (docs)"),
    Wording(r"check your plan and billing", F.QUOTA, "OpenAI, Gemini (docs)"),
    Wording(
        r"(?<![/\w])billing(?![/\w])", F.QUOTA, "many providers; not a link such as .../settings/billing"
    ),
    Wording(r"credit balance", F.QUOTA, "Anthropic: Your credit balance is too low (docs)"),
    Wording(r"insufficient (?:account )?(?:balance|credits?|funds)", F.QUOTA, "DeepSeek, OpenRouter (docs)"),
    Wording(r"out of credits|payment required", F.QUOTA, "OpenRouter, Fireworks (reports)"),
    Wording(r"reached your specified (?:api )?usage limits?", F.QUOTA, "Anthropic (reports)"),
    Wording(r"budget has been exceeded", F.QUOTA, "LiteLLM proxy (docs: budgets)"),
    Wording(r"monthly spending limit|spend(?:ing)? limit", F.QUOTA, "xAI, OpenAI (reports)"),
    # -- rate windows -----------------------------------------------------------------------------------
    Wording(
        r"per[ -](?:minute|second)|per min\b|\brpm\b|\btpm\b|/min\b",
        F.RATE_WINDOW,
        "OpenAI, Gemini, Azure: limits per minute (docs)",
    ),
    # -- images -----------------------------------------------------------------------------------------
    Wording(r"invalid[ _]image", F.IMAGE, "OpenAI, OpenRouter (reports)"),
    Wording(r"image (?:is )?not valid", F.IMAGE, "Gemini: Provided image is not valid (reports)"),
    Wording(
        r"(?:could not|couldn't|unable to|cannot|can't|failed to) (?:process|decode|read|load|parse)"
        r" (?:the |this |input |provided )*image",
        F.IMAGE,
        "Anthropic, Gemini, vLLM (reports)",
    ),
    Wording(r"image_url is only supported", F.IMAGE, "OpenAI, non-vision model (reports)"),
    Wording(r"invalid.{0,60}image_url", F.IMAGE, "OpenAI: Invalid 'messages[1].content[0].image_url.url'"),
    Wording(r"unknown variant .?image_url", F.IMAGE, "DeepSeek, text-only models (reports)"),
    Wording(r"illegal base64 data at input byte", F.IMAGE, "Ollama: an image that is not base64 (reports)"),
    Wording(r"must be a base64 encoded image", F.IMAGE, "LM Studio (reports)"),
    Wording(r"missing data required for image input", F.IMAGE, "Ollama, model without a projector (reports)"),
    Wording(r"(?:does not|doesn't) support (?:image|vision|multimodal)", F.IMAGE, "Groq, DeepSeek (reports)"),
    # -- structure --------------------------------------------------------------------------------------
    Wording(r"tool_use.{0,3} ids? were found without.{0,3}tool_result", F.STRUCTURE, "Anthropic (reports)"),
    Wording(
        r"tool_result.{0,3} blocks?.{0,60}corresponding.{0,3}tool_use", F.STRUCTURE, "Anthropic (reports)"
    ),
    Wording(r"unexpected.{0,3}tool_use_id", F.STRUCTURE, "Anthropic (reports)"),
    Wording(r"role .?tool.? must be a response to a prece", F.STRUCTURE, "OpenAI, DeepSeek, Qwen (reports)"),
    Wording(r"tool_calls.{0,3} must be followed by tool messages", F.STRUCTURE, "OpenAI (reports)"),
    Wording(r"did not have response messages", F.STRUCTURE, "OpenAI (reports)"),
    Wording(r"roles must alternate|must alternate between", F.STRUCTURE, "Anthropic, Mistral, HF (reports)"),
    Wording(r"unexpected role|expected last role", F.STRUCTURE, "Mistral (reports)"),
    Wording(r"not the same number of function calls and responses", F.STRUCTURE, "Mistral (reports)"),
    Wording(r"function (?:call|response) turn comes immediately after", F.STRUCTURE, "Gemini (reports)"),
    Wording(r"number of function (?:response|call) parts", F.STRUCTURE, "Gemini (reports)"),
    Wording(r"first message must (?:use|be|have) the .?user", F.STRUCTURE, "Anthropic, older (reports)"),
    Wording(r"must have either content or tool_calls", F.STRUCTURE, "Mistral (reports)"),
    Wording(r"no tool output found for function call", F.STRUCTURE, "OpenAI Responses API (reports)"),
    Wording(r"no tool call found for function call output", F.STRUCTURE, "OpenAI Responses API (reports)"),
    Wording(
        r"(?:successive|consecutive) (?:user or assistant|user|assistant) messages",
        F.STRUCTURE,
        "DeepSeek reasoner (docs)",
    ),
    # -- auth, filters, load ----------------------------------------------------------------------------
    Wording(
        r"api[_ ]key[_ ]invalid|api key not valid|invalid api key|incorrect api key",
        F.AUTH,
        "Gemini and xAI answer 400, not 401, to a bad key (docs)",
    ),
    Wording(
        r"content[_ ]filter|content management policy|content_policy_violation",
        F.FILTERED,
        "Azure OpenAI (docs: content filtering)",
    ),
    Wording(r"responsibleaipolicyviolation", F.FILTERED, "Azure OpenAI inner error (docs)"),
    Wording(r"requires moderation|input was flagged", F.FILTERED, "OpenRouter (docs: errors)"),
    Wording(r"overloaded_error", F.OVERLOADED, "Anthropic (docs: errors)"),
    Wording(r"overloaded|over capacity|at capacity", F.OVERLOADED, "Anthropic, OpenAI, Mistral (reports)"),
    Wording(
        r"rate[_ ]limit|too many requests|resource_exhausted|throttl", F.RATE_LIMIT, "most providers (docs)"
    ),
)

MEANINGS: tuple[Meaning, ...] = (
    Meaning(
        (
            r"\bcontext",
            r"length|window|size|limit|tokens?",
            r"exceed|too long|too large|maximum|overflow|only|(?:longer|greater|more) than",
        ),
        F.OVERFLOW,
        "context + length/window/size + exceeded: OpenAI, Anthropic 413, LM Studio, llama.cpp, Ollama",
    ),
    Meaning(
        (r"\b(?:prompt|input|inputs|request)\b", r"too long|too many tokens"),
        F.OVERFLOW,
        "prompt/input too long: Anthropic, Ollama, Cohere, Bedrock",
        span=40,
    ),
    Meaning(
        (r"\btokens?\b", r"exceeds? (?:the )?(?:model'?s? )?(?:max|maximum|limit)|cannot exceed"),
        F.OVERFLOW,
        "tokens exceed the maximum: Cerebras, Fireworks, Together",
        span=40,
    ),
    Meaning(
        (
            r"credits?|billing|spend|spending|budget|balance|quota|usage limits?",
            r"exhausted|exceeded|exceeds|insufficient|reached|used (?:up|all)|too low|run out|ran out"
            r"|depleted|not enough|no remaining|hit",
        ),
        F.QUOTA,
        "credit/budget/quota + exhausted: xAI, LiteLLM, Anthropic, Together, Fireworks, Cerebras",
        span=60,
    ),
    Meaning(
        (
            r"\b(?:image|images|media|picture|vision|base64)\b",
            r"invalid|empty|unsupported|not supported|too large|too big|cannot be|could not|unable|failed to"
            r"|exceeds?|not valid|malformed|corrupt|decode|not allowed",
        ),
        F.IMAGE,
        "image + invalid/empty/unsupported: Anthropic, llama.cpp, Gemini, Bedrock, Ollama",
        span=50,
    ),
    Meaning(
        (
            r"tool[_ ]calls?|tool_use|tool_result|tool[_ ]call[_ ]id|tool (?:message|output|result)s?"
            r"|function[_ ]calls?|function[_ ]call[_ ]output|function (?:response|result)s?|call_id",
            r"\bwithout\b|\bmissing\b|not found|no .{0,30}found|followed by|must be a response|corresponding"
            r"|preceding|preceeding|immediately after|does not match|do not match|must have|did not find"
            r"|must begin with",
        ),
        F.STRUCTURE,
        "tool call + missing/without/not found/followed by: OpenAI, Anthropic, Gemini, Bedrock, Mistral",
        span=70,
    ),
    Meaning(
        (r"successive|consecutive|alternat|interleave", r"\broles?\b|\buser\b|\bassistant\b|messages"),
        F.STRUCTURE,
        "roles must alternate: DeepSeek, Bedrock Converse, Mistral, chat templates",
        span=50,
    ),
    Meaning(
        (r"\bmemory\b", r"requires more|out of|too small|not enough|insufficient|exceeds? available"),
        F.MEMORY,
        "memory too small: Ollama, LM Studio, llama.cpp",
        span=40,
    ),
)

NOISE: tuple[str, ...] = (
    r"context_window_fallbacks\s*=\s*\S*",  # LiteLLM lists its router settings in every message
    r"https?://\S+",  # a documentation link names topics, not what happened
    r"\(e\.g\. check quota\)",  # Vertex AI's generic 429 only guesses at a quota; the status decides
)
"""Text removed before wordings and meanings are matched: it names things that did not happen."""
