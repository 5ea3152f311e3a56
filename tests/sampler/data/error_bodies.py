# ruff: noqa: E501  (providers' messages are kept whole, one per line, so each reads as it was sent)
"""Real error responses of LLM providers and proxies, with the kind each must be classified as.

Every entry names the provider (or proxy) and where its wording comes from: the provider's error
documentation ("docs") or a public bug report ("report: owner/repo#n"). Bodies keep the providers' shape;
ids, organisations and numbers are shortened. Requests ids are made up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sampler.errors import LlmErrorKind as K


@dataclass(frozen=True)
class Body:
    """One real error response and the kind it must be classified as."""

    provider: str
    source: str
    status: int
    body: str
    expected: K
    headers: dict[str, str] = field(default_factory=dict)


def j(obj: object) -> str:
    return json.dumps(obj)


def oai(
    message: str,
    type_: str | None = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> str:
    return j({"error": {"message": message, "type": type_, "param": param, "code": code}})


def ant(type_: str, message: str) -> str:
    return j({"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_011CX0"})


def goog(code: int, message: str, status: str, details: list[object] | None = None) -> str:
    error: dict[str, object] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return j({"error": error})


def flat(message: str, type_: str = "invalid_request_error", code: object = None) -> str:
    """vLLM, SGLang, Mistral, Moonshot: the error at the top level."""
    return j({"object": "error", "message": message, "type": type_, "param": None, "code": code})


def simple(message: str) -> str:
    """Ollama, TGI, many gateways: {"error": "..."}."""
    return j({"error": message})


def aws(message: str) -> str:
    return j({"message": message})


def litellm(message: str, type_: str | None = None, code: str = "400") -> str:
    return j({"error": {"message": message, "type": type_, "param": None, "code": code}})


def openrouter(message: str, code: int, raw: object = None, provider: str = "OpenAI") -> str:
    error: dict[str, object] = {"message": message, "code": code}
    if raw is not None:
        error["metadata"] = {"raw": raw, "provider_name": provider}
    return j({"error": error, "user_id": "user_2x"})


def html(status: int, title: str, extra: str = "") -> str:
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
        f"<p>{extra}</p><hr><center>cloudflare</center></body></html>"
    )


CLOUDFLARE_524 = html(
    524,
    "example.com | 524: A timeout occurred",
    "The origin web server timed out responding to this request. The likely cause is an overloaded "
    "background task, database or application, stressing the resources on your web server.",
)
CLOUDFLARE_522 = html(
    522,
    "example.com | 522: Connection timed out",
    "The initial connection between Cloudflare's network "
    "and the origin web server timed out. The server may be overloaded or offline.",
)
CLOUDFLARE_520 = html(
    520,
    "example.com | 520: Web server is returning an unknown error",
    "There is an unknown connection issue between Cloudflare and the origin web server; the image below "
    "cannot be loaded, the context window of the page exceeded its maximum.",
)
CLOUDFLARE_521 = html(
    521, "example.com | 521: Web server is down", "The web server is not returning a connection."
)
CLOUDFLARE_523 = html(523, "example.com | 523: Origin is unreachable", "Check your DNS settings.")

TABLE: list[Body] = [
    # ---------------------------------------------------------------- OpenAI (Chat Completions, Responses)
    Body(
        "OpenAI",
        "docs: error codes",
        400,
        oai(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. "
            "Please reduce the length of the messages.",
            code="context_length_exceeded",
            param="messages",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "docs: Responses API",
        400,
        oai(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            code="context_length_exceeded",
            param="input",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "report: vanna-ai/vanna-flask#11",
        429,
        oai(
            "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 342389. The input or "
            "output tokens must be reduced in order to run successfully.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "report: DrShushen/climb#13",
        429,
        oai(
            "Request too large for gpt-4o in organization org-VD on tokens per min (TPM): Limit 30000, Requested "
            "30601. The input or output tokens must be reduced in order to run successfully. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "report: continuedev/continue#11717",
        429,
        oai(
            "Request too large for gpt-4.1-2025-04-14 (for limit gpt-4.1) in organization org-lF on tokens per min "
            "(TPM): Limit 30000, Requested 37313. The input or output tokens must be reduced in order to run "
            "successfully.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "report: BuilderIO/micro-agent#86",
        429,
        oai(
            "Rate limit reached for gpt-4o in organization org-uO on tokens per min (TPM): Limit 30000, Used 29937, "
            "Requested 385. Please try again in 644ms.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "OpenAI",
        "docs: error codes",
        429,
        oai(
            "Rate limit reached for gpt-4 in organization org-x on requests per min (RPM): Limit 500, Used 500, "
            "Requested 1. Please try again in 120ms.",
            type_="requests",
            code="rate_limit_exceeded",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "OpenAI",
        "docs: error codes",
        429,
        oai(
            "You exceeded your current quota, please check your plan and billing details. For more information on "
            "this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
            type_="insufficient_quota",
            code="insufficient_quota",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenAI",
        "report: billing hard limit",
        400,
        oai("Billing hard limit has been reached", code="billing_hard_limit_reached"),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenAI",
        "docs: error codes",
        401,
        oai(
            "Incorrect API key provided: sk-abc***. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        ),
        K.AUTH,
    ),
    Body(
        "OpenAI",
        "docs: error codes",
        500,
        oai("The server had an error while processing your request. Sorry about that!", type_="server_error"),
        K.STATUS,
    ),
    Body(
        "OpenAI",
        "docs: error codes",
        503,
        oai("The engine is currently overloaded, please try again later", type_="server_error"),
        K.OVERLOADED,
    ),
    Body(
        "OpenAI",
        "report: invalid tool message order",
        400,
        oai(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
            "'tool_calls'.",
            param="messages.[3].role",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI",
        "report: missing tool results",
        400,
        oai(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            "'tool_call_id'. The following tool_call_ids did not have response messages: call_8Rx",
            param="messages.[4].role",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI",
        "report: jlcodes99/cockpit-tools#1234, ranxianglei/billion-context#766",
        400,
        oai("No tool output found for function call call_00_Jix34GFEsxl1dwSX.", param="input"),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI",
        "report: agentscope-ai/AgentTeams#299",
        400,
        oai(
            "No tool call found for function call output with call_id fcUdHXdv33lqE3HoR9P6yJNJ7.",
            param="input",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI",
        "report: binaricat/Netcatty#684",
        400,
        oai(
            "No tool call found for function call output with call_id call_jRznqKc4nwQo80WbWXIZJz7d.",
            param="input",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI",
        "report: invalid image",
        400,
        oai(
            "You uploaded an unsupported image. Please make sure your image is below 20 MB in size and is of one the "
            "following formats: ['png', 'jpeg', 'gif', 'webp'].",
            code="invalid_image_format",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "OpenAI",
        "report: image on a text model",
        400,
        oai(
            "Invalid content type. image_url is only supported by certain models.",
            param="messages.[0].content.[1].type",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "OpenAI",
        "report: data URL",
        400,
        oai(
            "Invalid 'messages[1].content[0].image_url.url'. Expected a base64-encoded data URL with an image MIME "
            "type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an empty value.",
            param="messages[1].content[0].image_url.url",
            code="invalid_value",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "OpenAI",
        "report: image could not be processed",
        400,
        oai(
            "The image data you provided does not represent a valid image. Please check your input and try again "
            "with one of the supported image formats: ['image/jpeg', 'image/png', 'image/gif', 'image/webp'].",
            code="invalid_image",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "OpenAI",
        "docs: error codes",
        404,
        oai(
            "The model `gpt-5-nano-x` does not exist or you do not have access to it.", code="model_not_found"
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: OpenCowork#82 (vLLM-style wording on an OpenAI-compatible API)",
        400,
        oai(
            "This model's maximum context length is 131072 tokens. However, you requested 102400 output tokens and "
            "your prompt contains at least 28673 input tokens, for a total of at least 131073 tokens. Please reduce "
            "the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, "
            "value=28673)"
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "report: string too long",
        400,
        oai(
            "Invalid 'messages[2].content': string too long. Expected a string with maximum length 10485760, but got "
            "a string with length 11534336 instead.",
            param="messages[2].content",
            code="string_above_max_length",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "report: a parameter's length is not the context window",
        400,
        oai(
            "Invalid 'user': string too long. Expected a string with maximum length 64, but got a string with length 80 "
            "instead.",
            param="user",
            code="string_above_max_length",
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: a tool's name above the name limit",
        400,
        oai(
            "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got a "
            "string with length 71 instead.",
            param="tools[0].function.name",
            code="string_above_max_length",
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: a tool's description above the description limit",
        400,
        oai(
            "Invalid 'tools[3].function.description': string too long. Expected a string with maximum length 1024, but "
            "got a string with length 4210 instead.",
            param="tools[3].function.description",
            code="string_above_max_length",
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: more tools than the tool limit",
        400,
        oai(
            "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length "
            "143 instead.",
            param="tools",
            code="array_above_max_length",
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: a field's length named without the field",
        400,
        oai(
            "String too long. Expected a string with maximum length 512, but got a string with length 600 instead.",
            code="string_above_max_length",
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: Responses API, a message's text above the string limit",
        400,
        oai(
            "Invalid 'input[4].content[0].text': string too long. Expected a string with maximum length 10485760, but "
            "got a string with length 10502144 instead.",
            param="input[4].content[0].text",
            code="string_above_max_length",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI",
        "docs: safety",
        400,
        oai(
            "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
            code="invalid_prompt",
        ),
        K.PROVIDER,
    ),
    # ---------------------------------------------------------------- Azure OpenAI
    Body(
        "Azure OpenAI",
        "docs: quotas and limits",
        429,
        j(
            {
                "error": {
                    "code": "429",
                    "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded "
                    "token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds. Please go here: "
                    "https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.",
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Azure OpenAI",
        "docs: quotas and limits",
        429,
        j(
            {
                "error": {
                    "code": "429",
                    "message": "Requests to the Embeddings_Create Operation under Azure OpenAI API version 2023-05-15 have exceeded call "
                    "rate limit of your current AIServices S0 pricing tier. Please retry after 1 second.",
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Azure OpenAI",
        "docs: content filtering",
        400,
        j(
            {
                "error": {
                    "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please "
                    "modify your prompt and retry.",
                    "type": None,
                    "param": "prompt",
                    "code": "content_filter",
                    "status": 400,
                    "innererror": {
                        "code": "ResponsibleAIPolicyViolation",
                        "content_filter_result": {"hate": {"filtered": True, "severity": "high"}},
                    },
                }
            }
        ),
        K.PROVIDER,
    ),
    Body(
        "Azure OpenAI",
        "docs: error codes",
        400,
        j(
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. "
                    "Please reduce the length of the messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Azure OpenAI",
        "docs: authentication",
        401,
        j(
            {
                "error": {
                    "code": "401",
                    "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
                    "for an active subscription and use a correct regional API endpoint for your resource.",
                }
            }
        ),
        K.AUTH,
    ),
    Body(
        "Azure OpenAI",
        "docs: deployments",
        404,
        j(
            {
                "error": {
                    "code": "DeploymentNotFound",
                    "message": "The API deployment for this resource does not exist. If you created the deployment within the last 5 "
                    "minutes, please wait a moment and try again.",
                }
            }
        ),
        K.PROVIDER,
    ),
    # ---------------------------------------------------------------- Anthropic
    Body(
        "Anthropic",
        "docs: errors",
        400,
        ant("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Anthropic",
        "report: metadata.user_id above its length limit",
        400,
        ant("invalid_request_error", "metadata.user_id: String should have at most 256 characters"),
        K.PROVIDER,
    ),
    Body(
        "Anthropic",
        "report: a tool's input_schema description above its length limit",
        400,
        ant(
            "invalid_request_error",
            "tools.2.custom.input_schema.description: String should have at most 1024 characters",
        ),
        K.PROVIDER,
    ),
    Body(
        "Anthropic",
        "docs: errors",
        400,
        ant(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000, decrease input length or "
            "`max_tokens` and try again",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Anthropic",
        "report: anthropics/claude-code#6368",
        413,
        ant("invalid_request_error", "Request size exceeds model context window"),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Anthropic",
        "docs: errors",
        413,
        ant("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        K.REQUEST_TOO_LARGE,
    ),
    Body("Anthropic", "docs: errors", 529, ant("overloaded_error", "Overloaded"), K.OVERLOADED),
    Body(
        "Anthropic",
        "docs: errors",
        429,
        ant(
            "rate_limit_error",
            "This request would exceed the rate limit for your organization (a1b2) of 50,000 input tokens per minute. "
            "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Anthropic",
        "docs: errors",
        400,
        ant(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
            "purchase credits.",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Anthropic",
        "report: anthropics/claude-code#2127",
        400,
        ant(
            "invalid_request_error",
            "You have reached your specified API usage limits. You will regain access on 2025-07-01 at 00:00 UTC.",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Anthropic",
        "report: usage limits on 429",
        429,
        ant(
            "rate_limit_error",
            "You have reached your specified API usage limits. You will regain access on 2026-01-01 at 00:00 UTC.",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Anthropic",
        "docs: errors",
        402,
        ant("billing_error", "Your account has a billing issue."),
        K.QUOTA_EXHAUSTED,
    ),
    Body("Anthropic", "docs: errors", 401, ant("authentication_error", "invalid x-api-key"), K.AUTH),
    Body(
        "Anthropic",
        "docs: errors",
        403,
        ant("permission_error", "Your API key does not have permission to use the specified resource."),
        K.AUTH,
    ),
    Body("Anthropic", "docs: errors", 500, ant("api_error", "Internal server error"), K.STATUS),
    Body(
        "Anthropic",
        "report: anthropics/claude-code#12750",
        400,
        ant("invalid_request_error", "messages.118.content.4.image.source.base64: image cannot be empty"),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Anthropic",
        "report: anthropics/claude-code#9007",
        400,
        ant("invalid_request_error", "messages.50.content.0.image.source.base64: image cannot be empty"),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Anthropic",
        "report: anthropics/claude-code#15746",
        400,
        ant(
            "invalid_request_error",
            "messages.6.content.5.image.source.base64.data: Image does not match the provided media type image/png",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Anthropic",
        "docs: vision",
        400,
        ant(
            "invalid_request_error",
            "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: 7340032 bytes > 5242880 bytes",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Anthropic",
        "docs: vision",
        400,
        ant(
            "invalid_request_error",
            "messages.0.content.0.image.source.base64.data: At least one of the image dimensions exceed max allowed "
            "size: 8000 pixels",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Anthropic",
        "report: Could not process image",
        400,
        ant("invalid_request_error", "Could not process image"),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Anthropic",
        "docs: tool use",
        400,
        ant(
            "invalid_request_error",
            "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A. Each "
            "`tool_use` block must have a corresponding `tool_result` block in the next message.",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Anthropic",
        "docs: tool use",
        400,
        ant(
            "invalid_request_error",
            "messages.4.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01B. Each "
            "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Anthropic",
        "report: roles",
        400,
        ant(
            "invalid_request_error",
            'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a '
            "row",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Anthropic",
        "report: empty text block",
        400,
        ant("invalid_request_error", "messages.5.content.0.text: text content blocks must be non-empty"),
        K.PROVIDER,
    ),
    Body(
        "Anthropic",
        "docs: errors (max_tokens above the model's output limit is not overflow)",
        400,
        ant(
            "invalid_request_error",
            "max_tokens: 100000 > 64000, which is the maximum allowed number of output "
            "tokens for claude-sonnet-4",
        ),
        K.PROVIDER,
    ),
    Body("Anthropic", "docs: streaming errors", 500, ant("api_error", "Overloaded"), K.OVERLOADED),
    # ---------------------------------------------------------------- Amazon Bedrock
    Body(
        "Amazon Bedrock",
        "report: langgenius/dify#9294",
        400,
        aws(
            "A conversation must alternate between user and assistant roles. Make sure the conversation alternates "
            "between user and assistant roles and try again."
        ),
        K.REQUEST_STRUCTURE,
        {"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
    ),
    Body(
        "Amazon Bedrock",
        "report: browser-use/browser-use#988",
        400,
        aws(
            "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. Messages following "
            "`tool_use` blocks must begin with a matching number of `tool_result` blocks."
        ),
        K.REQUEST_STRUCTURE,
        {"x-amzn-ErrorType": "ValidationException"},
    ),
    Body(
        "Amazon Bedrock",
        "report: sample-multi-agent-orchestration-chat-on-agentcore#15",
        400,
        aws(
            "The content field at messages.7.content.0.toolResult cannot be empty when status value is error."
        ),
        K.PROVIDER,
        {"x-amzn-ErrorType": "ValidationException"},
    ),
    Body(
        "Amazon Bedrock",
        "report: aws-samples/bedrock-engineer#8",
        400,
        aws(
            "The text field in the ContentBlock object at messages.15.content.0 is blank. Add text to the text field, "
            "and try again."
        ),
        K.PROVIDER,
        {"x-amzn-ErrorType": "ValidationException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        400,
        aws("Input is too long for requested model."),
        K.CONTEXT_OVERFLOW,
        {"x-amzn-ErrorType": "ValidationException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        400,
        aws("The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum"),
        K.CONTEXT_OVERFLOW,
        {"x-amzn-ErrorType": "ValidationException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        429,
        aws("Too many tokens, please wait before trying again."),
        K.RATE_LIMIT,
        {"x-amzn-ErrorType": "ThrottlingException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        429,
        aws("Too many requests, please wait before trying again."),
        K.RATE_LIMIT,
        {"x-amzn-ErrorType": "ThrottlingException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        400,
        aws("Your request exceeds the service quota for your account."),
        K.QUOTA_EXHAUSTED,
        {"x-amzn-ErrorType": "ServiceQuotaExceededException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        403,
        aws("You don't have access to the model with the specified model ID."),
        K.AUTH,
        {"x-amzn-ErrorType": "AccessDeniedException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: API errors",
        503,
        aws("Bedrock is unable to process your request."),
        K.STATUS,
        {"x-amzn-ErrorType": "ServiceUnavailableException"},
    ),
    Body(
        "Amazon Bedrock",
        "docs: image limits",
        400,
        aws("messages.0.content.1.image.source: image exceeds max pixels allowed (8000x8000)"),
        K.IMAGE_FORMAT,
        {"x-amzn-ErrorType": "ValidationException"},
    ),
    # ---------------------------------------------------------------- Gemini (native) and Vertex AI
    Body(
        "Gemini",
        "docs: troubleshooting",
        400,
        goog(
            400,
            "The input token count (1250000) exceeds the maximum number of tokens allowed (1048576).",
            "INVALID_ARGUMENT",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Gemini",
        "docs: troubleshooting",
        429,
        goog(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "RESOURCE_EXHAUSTED",
            [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "33s"}],
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Gemini",
        "docs: rate limits",
        429,
        goog(
            429,
            "Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent "
            "request limit per minute for a region' of service 'generativelanguage.googleapis.com'.",
            "RESOURCE_EXHAUSTED",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Gemini",
        "docs: troubleshooting",
        400,
        goog(
            400,
            "API key not valid. Please pass a valid API key.",
            "INVALID_ARGUMENT",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            ],
        ),
        K.AUTH,
    ),
    Body(
        "Gemini",
        "docs: troubleshooting",
        500,
        goog(
            500,
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/"
            "troubleshooting",
            "INTERNAL",
        ),
        K.STATUS,
    ),
    Body(
        "Gemini",
        "docs: troubleshooting",
        503,
        goog(503, "The model is overloaded. Please try again later.", "UNAVAILABLE"),
        K.OVERLOADED,
    ),
    Body(
        "Gemini",
        "report: google-gemini/gemini-cli#11814",
        400,
        goog(
            400,
            "Please ensure that function call turn comes immediately after a user turn or after a function response "
            "turn.",
            "INVALID_ARGUMENT",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Gemini",
        "report: function responses",
        400,
        goog(
            400,
            "Please ensure that the number of function response parts is equal to the number of function call parts "
            "of the function call turn.",
            "INVALID_ARGUMENT",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Gemini",
        "report: invalid image",
        400,
        goog(400, "Provided image is not valid.", "INVALID_ARGUMENT"),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Gemini",
        "report: unsupported media",
        400,
        goog(
            400,
            "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/"
            "troubleshooting",
            "INVALID_ARGUMENT",
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Gemini",
        "docs: troubleshooting",
        403,
        goog(
            403,
            "Method doesn't allow unregistered callers (callers without established identity). Please use API Key "
            "or other form of API consumer identity to call this API.",
            "PERMISSION_DENIED",
        ),
        K.AUTH,
    ),
    Body(
        "Gemini",
        "docs: troubleshooting",
        404,
        goog(
            404,
            "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.",
            "NOT_FOUND",
        ),
        K.PROVIDER,
    ),
    Body(
        "Vertex AI",
        "docs: 429 errors",
        429,
        goog(429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED"),
        K.RATE_LIMIT,
    ),
    Body(
        "Vertex AI",
        "docs: error codes",
        400,
        goog(
            400,
            "Unable to submit request because the input token count is 2100000 but model only supports up to "
            "2097152. Reduce the input token count and try again.",
            "INVALID_ARGUMENT",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Vertex AI",
        "docs: error codes",
        504,
        goog(504, "Deadline expired before operation could complete.", "DEADLINE_EXCEEDED"),
        K.STATUS,
    ),
    # ---------------------------------------------------------------- Mistral
    Body(
        "Mistral",
        "report: BerriAI/litellm#17761",
        400,
        flat("Unexpected role 'user' after role 'tool'", type_="invalid_request_message_order", code="3230"),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Mistral",
        "report: 0xPlaygrounds/rig#1130",
        400,
        flat(
            "Expected last role User or Tool (or Assistant with prefix True) for serving but got assistant",
            type_="invalid_request_message_order",
            code="3230",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Mistral",
        "report: tool calls",
        400,
        flat("Not the same number of function calls and responses", code="3230"),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Mistral",
        "report: context",
        400,
        flat(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
            code="3051",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body("Mistral", "docs: rate limits", 429, j({"message": "Requests rate limit exceeded"}), K.RATE_LIMIT),
    Body("Mistral", "report: unauthorized", 401, j({"message": "Unauthorized", "request_id": "8c"}), K.AUTH),
    Body(
        "Mistral",
        "report: capacity",
        503,
        j(
            {
                "object": "error",
                "message": "Service tier capacity exceeded for this model.",
                "type": "service_tier_capacity_exceeded",
                "param": None,
                "code": "3505",
            }
        ),
        K.STATUS,
    ),
    # ---------------------------------------------------------------- Groq
    Body(
        "Groq",
        "docs: errors",
        413,
        oai(
            "Request too large for model `llama3-70b-8192` in organization `org_01` service tier `on_demand` on "
            "tokens per minute (TPM): Limit 6000, Requested 9187, please reduce your message size and try again.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Groq",
        "docs: errors",
        429,
        oai(
            "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_01` service tier `on_demand` "
            "on tokens per minute (TPM): Limit 12000, Used 11000, Requested 1500. Please try again in 2.5s.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Groq",
        "docs: errors",
        400,
        oai(
            "Please reduce the length of the messages or completion.",
            param="messages",
            code="context_length_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body("Groq", "docs: errors", 401, oai("Invalid API Key", code="invalid_api_key"), K.AUTH),
    Body(
        "Groq",
        "report: max_tokens above the model's limit is not an overflow",
        400,
        oai(
            "`max_tokens` must be less than or equal to `32768`, the maximum value for `max_tokens` is less than the "
            "`context_window` for this model",
            param="max_tokens",
        ),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: max_tokens too large is not an overflow",
        400,
        oai(
            "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you "
            "provided 100000.",
            param="max_tokens",
            code="invalid_value",
        ),
        K.PROVIDER,
    ),
    Body(
        "Groq",
        "report: vision",
        400,
        oai("messages[1].content must be a string", param="messages[1].content"),
        K.PROVIDER,
    ),
    Body("Groq", "docs: errors", 503, oai("Service Unavailable", type_="internal_server_error"), K.STATUS),
    # ---------------------------------------------------------------- DeepSeek
    Body(
        "DeepSeek",
        "report: deepseek-ai/DeepSeek-R1#21",
        400,
        oai(
            "deepseek-reasoner does not support successive user or assistant messages (messages[1] and messages[2] "
            "in your input). You should interleave the user/assistant messages in the message sequence.",
            code="invalid_request_error",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "DeepSeek",
        "report: Aider-AI/aider#2974",
        400,
        oai(
            "deepseek-reasoner does not support successive user or assistant messages (messages[5] and messages[6] "
            "in your input). You should interleave the user/assistant messages in the message sequence.",
            code="invalid_request_error",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "DeepSeek",
        "docs: error codes",
        402,
        oai("Insufficient Balance", type_="unknown_error", code="invalid_request_error"),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "DeepSeek",
        "docs: error codes",
        400,
        oai(
            "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (66000 in the "
            "messages, 4000 in the completion). Please reduce the length of the messages or completion.",
            code="invalid_request_error",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "DeepSeek",
        "docs: error codes",
        503,
        oai("Server overloaded, please try again later.", type_="server_error"),
        K.OVERLOADED,
    ),
    Body(
        "DeepSeek",
        "report: tool message",
        400,
        oai(
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
            code="invalid_request_error",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "DeepSeek",
        "report: image on a text model",
        400,
        oai(
            "Failed to deserialize the JSON body into the target type: messages[0]: unknown variant `image_url`, "
            "expected `text` at line 1 column 120"
        ),
        K.IMAGE_FORMAT,
    ),
    # ---------------------------------------------------------------- xAI
    Body(
        "xAI",
        "report: continuedev/continue#10373",
        429,
        j(
            {
                "code": "Some resource has been exhausted",
                "error": "Your team 16f2151a has either used all available credits or reached its monthly spending limit. "
                "To continue making API requests, please purchase more credits or raise your spending limit.",
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "xAI",
        "report: warpdotdev/warp#14863",
        403,
        j(
            {
                "code": "The caller does not have permission to execute the specified operation",
                "error": "Your team 8c268de0 has either used all available credits or "
                "reached its monthly spending limit. To continue making API requests, please purchase more credits or "
                "raise your spending limit.",
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "xAI",
        "report: context",
        400,
        j(
            {
                "code": "Client specified an invalid argument",
                "error": "This model's maximum prompt length is 131072 but the request contains 140000 tokens.",
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "xAI",
        "report: bad key",
        400,
        j(
            {
                "code": "Client specified an invalid argument",
                "error": "Incorrect API key provided: xa***. You can obtain an API key from https://console.x.ai.",
            }
        ),
        K.AUTH,
    ),
    Body(
        "xAI",
        "report: rate limit",
        429,
        j(
            {
                "code": "Some resource has been exhausted",
                "error": "Rate limit exceeded for team 1a2b: 60 requests per minute.",
            }
        ),
        K.RATE_LIMIT,
    ),
    # ---------------------------------------------------------------- OpenRouter
    Body(
        "OpenRouter",
        "docs: errors",
        402,
        openrouter(
            "This request requires more credits, or fewer max_tokens. You requested up to 8192 tokens, but can only "
            "afford 1200.",
            402,
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenRouter",
        "docs: errors",
        403,
        openrouter("Your chosen model requires moderation and your input was flagged", 403),
        K.PROVIDER,
    ),
    Body(
        "OpenRouter",
        "docs: errors",
        400,
        openrouter(
            "Provider returned error",
            400,
            raw=j(
                {
                    "error": {
                        "message": "This endpoint's maximum context length is 163840 tokens. However, you requested about 170000 tokens.",
                        "code": "context_length_exceeded",
                    }
                }
            ),
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenRouter",
        "docs: errors",
        429,
        openrouter(
            "Provider returned error",
            429,
            raw="google/gemini-2.5-pro is temporarily rate-limited upstream. Please retry shortly.",
            provider="Google",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "OpenRouter",
        "docs: errors",
        502,
        openrouter(
            "Provider returned error",
            502,
            raw="upstream connect error or disconnect/reset before headers",
            provider="Together",
        ),
        K.STATUS,
    ),
    Body("OpenRouter", "docs: errors", 401, openrouter("No auth credentials found", 401), K.AUTH),
    Body(
        "OpenRouter",
        "report: insufficient credits",
        402,
        openrouter("Insufficient credits. Add more using https://openrouter.ai/credits", 402),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenRouter",
        "report: anthropic upstream tool_use",
        400,
        openrouter(
            "Provider returned error",
            400,
            raw=ant(
                "invalid_request_error",
                "messages.7: `tool_use` ids were found without `tool_result` blocks "
                "immediately after: toolu_vrtx_01",
            ),
            provider="Anthropic",
        ),
        K.REQUEST_STRUCTURE,
    ),
    # ---------------------------------------------------------------- Together
    Body(
        "Together",
        "report: huggingface/chat-ui#1149 (TGI wording, also served by Together)",
        422,
        j(
            {
                "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 6204 `inputs` tokens "
                "and 2047 `max_new_tokens`",
                "error_type": "validation",
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Together",
        "docs: error codes",
        400,
        j(
            {
                "id": "8f",
                "error": {
                    "message": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32769. Given: 40000 `inputs` "
                    "tokens and 2048 `max_new_tokens`",
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": None,
                },
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Together",
        "docs: error codes",
        429,
        j(
            {
                "id": "8f",
                "error": {
                    "message": "You are on tier Build Tier 1, which offers 600 queries per minute (10.0 queries per second).",
                    "type": "model_rate_limit",
                    "param": None,
                    "code": None,
                },
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Together",
        "docs: error codes",
        402,
        j(
            {
                "id": "8f",
                "error": {
                    "message": "Credit limit exceeded. Please navigate to https://api.together.xyz/settings/billing to add credit or "
                    "upgrade your plan.",
                    "type": "credit_limit",
                    "param": None,
                    "code": None,
                },
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Together",
        "docs: error codes",
        401,
        j(
            {
                "id": "8f",
                "error": {
                    "message": "Invalid API key provided. You "
                    "can find your API key at https://api.together.xyz/settings/api-keys.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                },
            }
        ),
        K.AUTH,
    ),
    Body(
        "Together",
        "docs: error codes",
        503,
        j(
            {
                "id": "8f",
                "error": {
                    "message": "The server is overloaded or not ready yet.",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                },
            }
        ),
        K.OVERLOADED,
    ),
    # ---------------------------------------------------------------- Fireworks
    Body(
        "Fireworks",
        "report: ogx-ai/ogx#697 reports this 400; the wording here is paraphrased",
        400,
        j(
            {
                "error": {
                    "object": "error",
                    "type": "invalid_request_error",
                    "message": "The prompt is too long: 40000, model maximum context length: 32767",
                }
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Fireworks",
        "docs: errors",
        412,
        j(
            {
                "error": {
                    "object": "error",
                    "type": "invalid_request_error",
                    "message": "Account suspended due to payment issues; please update your billing information",
                    "code": "payment_required",
                }
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Fireworks",
        "docs: errors",
        429,
        j(
            {
                "error": {
                    "object": "error",
                    "type": "invalid_request_error",
                    "message": "Request didn't generate first token before the given deadline",
                    "code": "too_many_requests",
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Fireworks",
        "docs: errors",
        404,
        j(
            {
                "error": {
                    "object": "error",
                    "type": "invalid_request_error",
                    "message": "Model not found, inaccessible, and/or not deployed",
                    "code": "NOT_FOUND",
                }
            }
        ),
        K.PROVIDER,
    ),
    Body(
        "Fireworks",
        "report: image",
        400,
        j(
            {
                "error": {
                    "object": "error",
                    "type": "invalid_request_error",
                    "message": "Failed to decode image: cannot identify image file",
                }
            }
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Fireworks",
        "report: tokens exceed",
        400,
        j(
            {
                "error": {
                    "object": "error",
                    "type": "invalid_request_error",
                    "message": "Requested token count exceeds the model's maximum context length "
                    "of 131072 tokens. You requested a total of 140000 tokens.",
                }
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    # ---------------------------------------------------------------- Cerebras
    Body(
        "Cerebras",
        "docs: errors",
        400,
        j(
            {
                "message": "Please reduce the length of the messages or completion. "
                "Current length is 70000 while limit is 65536",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Cerebras",
        "docs: errors",
        429,
        j(
            {
                "message": "Tokens per minute limit exceeded - too many tokens processed.",
                "type": "too_many_requests_error",
                "param": "quota",
                "code": "token_quota_exceeded",
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Cerebras",
        "docs: errors",
        429,
        j(
            {
                "message": "Requests per day limit exceeded - too many requests sent.",
                "type": "too_many_requests_error",
                "param": "quota",
                "code": "request_quota_exceeded",
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Cerebras",
        "docs: errors",
        401,
        j(
            {
                "message": "Wrong API Key",
                "type": "invalid_request_error",
                "param": "api_key",
                "code": "wrong_api_key",
            }
        ),
        K.AUTH,
    ),
    Body(
        "Cerebras",
        "docs: errors",
        503,
        j(
            {
                "message": "We're experiencing high traffic right now! Please try again soon.",
                "type": "too_many_requests_error",
                "param": "queue",
                "code": "queue_exceeded",
            }
        ),
        K.STATUS,
    ),
    # ---------------------------------------------------------------- LM Studio
    Body(
        "LM Studio",
        "report: lmstudio-ai/lmstudio-bug-tracker#546",
        400,
        simple(
            "Trying to keep the first 111490 tokens when context the overflows. However, the model is loaded with "
            "context length of only 32768 tokens, which is not enough. Try to load the model with a larger context "
            "length, or provide a shorter input"
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "LM Studio",
        "report: lmstudio-ai/lmstudio-bug-tracker#237",
        400,
        simple(
            "Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with "
            "context length of only 4096 tokens, which is not enough."
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "LM Studio",
        "report: context length",
        400,
        simple(
            "The number of tokens to keep from the initial prompt is greater than the context length. Try to load "
            "the model with a larger context length, or provide a shorter input"
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "LM Studio",
        "report: vision",
        400,
        simple("Model does not support images. Please use a model that does."),
        K.IMAGE_FORMAT,
    ),
    Body(
        "LM Studio",
        "report: no model",
        404,
        simple("No models loaded. Please load a model in the developer page or use the `lms load` command."),
        K.PROVIDER,
    ),
    # ---------------------------------------------------------------- LiteLLM proxy
    Body(
        "LiteLLM proxy",
        "report: BerriAI/litellm#12680",
        400,
        litellm(
            "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: "
            "Hosted_vllmException - Error code: 400 - {'object': 'error', 'message': \"This model's maximum context "
            'length is 32768 tokens."}\nmodel=LongWriter. context_window_fallbacks=None. fallbacks=None. Set '
            "'context_window_fallback' - https://docs.litellm.ai/docs/routing#fallbacks"
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "LiteLLM proxy",
        "docs: exception mapping",
        400,
        litellm(
            "litellm.ContextWindowExceededError: Context Window exceeded for given call. No fallbacks available. "
            "context_window_fallbacks=None",
            type_="ContextWindowExceededError",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "LiteLLM proxy",
        "docs: budgets",
        400,
        litellm(
            "Budget has been exceeded! Current cost: 10.02, Max budget: 10.0",
            type_="budget_exceeded",
            code="400",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "LiteLLM proxy",
        "report: BerriAI/litellm#40002",
        429,
        litellm(
            "Budget has been exceeded! Key=e7fbc61f Current cost: 0.0, Estimated request cost: 3.64, Max budget: 2.5",
            type_="budget_exceeded",
            code="429",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "LiteLLM proxy",
        "docs: rate limits (router settings in the message are not an overflow)",
        429,
        litellm(
            "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit exceeded. Received Model "
            "Group=gpt-4o\nAvailable Model Group Fallbacks=None context_window_fallbacks=None",
            type_="throttling_error",
            code="429",
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "LiteLLM proxy",
        "docs: virtual keys",
        401,
        litellm(
            "Authentication Error, Invalid proxy server token passed. Received API Key = sk-...x",
            type_="auth_error",
            code="401",
        ),
        K.AUTH,
    ),
    Body(
        "LiteLLM proxy",
        "report: BerriAI/litellm#8018",
        400,
        litellm(
            "litellm.BadRequestError: DeepseekException - Error code: 400 - {'error': {'message': 'deepseek-reasoner "
            "does not support successive user or assistant messages (messages[1] and messages[2] in your input). You "
            "should interleave the user/assistant messages in the message sequence.'}}"
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "LiteLLM proxy",
        "docs: exception mapping",
        500,
        litellm(
            "litellm.InternalServerError: AnthropicException - Overloaded. Handle with "
            "`litellm.InternalServerError`.",
            type_=None,
            code="500",
        ),
        K.OVERLOADED,
    ),
    # ---------------------------------------------------------------- Hugging Face TGI
    Body(
        "Hugging Face TGI",
        "report: huggingface/llm-vscode#94",
        422,
        j(
            {
                "error": "Input validation error: "
                "`inputs` tokens + `max_new_tokens` must be <= 2048. Given: 3474 `inputs` tokens and 60 "
                "`max_new_tokens`",
                "error_type": "validation",
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Hugging Face TGI",
        "report: meta-llama/llama#1103",
        422,
        j(
            {
                "error": "Input validation error: `inputs` must have less than 4096 tokens. Given: 4545",
                "error_type": "validation",
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Hugging Face TGI",
        "report: huggingface/transformers#28523 (not the context: max_new_tokens alone)",
        422,
        j(
            {
                "error": "Input validation error: `max_new_tokens` must be <= 192. Given: 200",
                "error_type": "validation",
            }
        ),
        K.PROVIDER,
    ),
    Body(
        "Hugging Face TGI",
        "docs: overloaded",
        429,
        j({"error": "Model is overloaded", "error_type": "overloaded"}),
        K.RATE_LIMIT,
    ),
    Body(
        "Hugging Face Inference",
        "docs: errors",
        503,
        j({"error": "Model meta-llama/Llama-2-7b is currently loading", "estimated_time": 20.0}),
        K.STATUS,
    ),
    Body(
        "Hugging Face router",
        "report: credits",
        402,
        j(
            {
                "error": "You have exceeded your monthly included "
                "credits for Inference Providers. Subscribe to PRO to get 20x more monthly included credits."
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    # ---------------------------------------------------------------- Ollama
    Body(
        "Ollama",
        "report: continuedev/continue#11715",
        500,
        simple("model requires more system memory (5.0 GiB) than is available (3.9 GiB)"),
        K.PROVIDER,
    ),
    Body(
        "Ollama",
        "report: yuntianhe2014/Easy-RAG#9",
        500,
        simple("model requires more system memory (3.7 GiB) than is available (3.6 GiB)"),
        K.PROVIDER,
    ),
    Body(
        "Ollama",
        "report: prompt too long",
        400,
        simple("prompt too long; exceeded max context length by 1843 tokens"),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Ollama",
        "report: no shift",
        400,
        simple("the prompt is longer than the context length currently available to the model"),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Ollama",
        "report: input length",
        500,
        simple("input length exceeds the context length"),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Ollama",
        "report: model not found",
        404,
        simple('model "llama9" not found, try pulling it first'),
        K.PROVIDER,
    ),
    Body(
        "Ollama",
        "report: vision",
        500,
        simple("this model is missing data required for image input"),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Ollama",
        "report: runner crash",
        500,
        simple("llama runner process has terminated: exit status 2"),
        K.STATUS,
    ),
    Body(
        "Ollama",
        "report: tool support",
        400,
        simple("registry.ollama.ai/library/gemma:2b does not support tools"),
        K.PROVIDER,
    ),
    # ---------------------------------------------------------------- llama.cpp server
    Body(
        "llama.cpp server",
        "report: ggml-org/llama.cpp#13566",
        500,
        j(
            {
                "error": {
                    "code": 500,
                    "message": "image input is not supported by this server",
                    "type": "server_error",
                }
            }
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "llama.cpp server",
        "docs: server README",
        400,
        j(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 8192,
                }
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "llama.cpp server",
        "docs: server README (older builds answer 500)",
        500,
        j(
            {
                "error": {
                    "code": 500,
                    "message": "the request exceeds the available context size. try increasing the context size or enable "
                    "context shift",
                    "type": "exceed_context_size_error",
                }
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "llama.cpp server",
        "report: context size",
        500,
        j({"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "llama.cpp server",
        "report: mozilla-ai/llamafile#298",
        500,
        j(
            {
                "error": {
                    "code": 500,
                    "message": "The server was not compiled for multimodal or the model projector can't be loaded.",
                    "type": "server_error",
                }
            }
        ),
        K.STATUS,
    ),
    Body(
        "llama.cpp server",
        "docs: server README",
        503,
        j({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
        K.STATUS,
    ),
    Body(
        "llama.cpp server",
        "docs: server README",
        401,
        j({"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}),
        K.AUTH,
    ),
    # ---------------------------------------------------------------- vLLM / SGLang
    Body(
        "vLLM",
        "report: ruipeterpan/specreason#4",
        400,
        flat(
            "This model's maximum context length is 8192 tokens. However, you requested 8203 tokens (7691 in the "
            "messages, 512 in the completion). Please reduce the length of the messages or completion.",
            type_="BadRequestError",
            code=400,
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "vLLM",
        "report: max model length",
        400,
        flat(
            "The decoder prompt (length 40000) is longer than the maximum model length of 32768. Make sure that "
            "`max_model_len` is no smaller than the number of text tokens.",
            type_="BadRequestError",
            code=400,
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "vLLM",
        "report: images",
        400,
        flat("At most 1 image(s) may be provided in one request.", type_="BadRequestError", code=400),
        K.PROVIDER,
    ),
    Body(
        "vLLM",
        "report: image decode",
        400,
        flat(
            "Failed to load image: cannot identify image file <_io.BytesIO object at 0x7f>",
            type_="BadRequestError",
            code=400,
        ),
        K.IMAGE_FORMAT,
    ),
    Body(
        "vLLM",
        "report: validation",
        400,
        j(
            {
                "object": "error",
                "message": [
                    {"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}}
                ],
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        K.PROVIDER,
    ),
    Body(
        "SGLang",
        "report: BerriAI/litellm#10793",
        400,
        flat(
            "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
            type_="BadRequestError",
            code=400,
        ),
        K.CONTEXT_OVERFLOW,
    ),
    # ---------------------------------------------------------------- Moonshot / Kimi, Qwen, SiliconFlow, Cohere, Perplexity
    Body(
        "Moonshot",
        "docs: errors",
        400,
        j(
            {
                "error": {
                    "message": "Invalid request: Your request exceeded model token limit: 131072",
                    "type": "invalid_request_error",
                }
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Moonshot",
        "docs: errors",
        429,
        j(
            {
                "error": {
                    "message": "Your account org-1 is suspended, please check your plan and billing details",
                    "type": "exceeded_current_quota_error",
                }
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "Moonshot",
        "docs: errors",
        429,
        j(
            {
                "error": {
                    "message": "Your account org-1<ak-1> request reached max "
                    "request: 3, please try again after 1 seconds",
                    "type": "rate_limit_reached_error",
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Qwen (DashScope)",
        "docs: error codes",
        400,
        j(
            {
                "error": {
                    "message": "Range of input length should be [1, 129024]",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_parameter_error",
                }
            }
        ),
        K.PROVIDER,
    ),
    Body(
        "Qwen (DashScope)",
        "docs: error codes",
        400,
        j(
            {
                "error": {
                    "message": "<400> InternalError.Algo."
                    'InvalidParameter: An assistant message with "tool_calls" must be followed by tool messages responding '
                    'to each "tool_call_id". The following tool_call_ids did not have response messages: message[3].role',
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_parameter_error",
                }
            }
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Qwen (DashScope)",
        "docs: error codes",
        400,
        j(
            {
                "error": {
                    "message": "Access denied, please make sure your account is in good standing.",
                    "type": "Arrearage",
                    "param": None,
                    "code": "Arrearage",
                }
            }
        ),
        K.PROVIDER,
    ),
    Body(
        "Qwen (DashScope)",
        "docs: error codes",
        429,
        j(
            {
                "error": {
                    "message": "Requests rate limit exceeded, please try again later.",
                    "type": "limit_requests",
                    "param": None,
                    "code": "limit_requests",
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "SiliconFlow",
        "docs: error codes",
        403,
        j({"code": 30001, "message": "Sorry, your account balance is insufficient", "data": None}),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "SiliconFlow",
        "docs: error codes",
        413,
        j(
            {
                "code": 20015,
                "message": "length of prompt_tokens (40000) must be less than max_seq_len (32768).",
                "data": None,
            }
        ),
        K.REQUEST_TOO_LARGE,
    ),
    Body(
        "Cohere",
        "docs: errors",
        400,
        j(
            {
                "message": "too many tokens: total number of tokens in the prompt "
                "cannot exceed 128000 - received 140000. Try using a shorter prompt or enabling prompt truncating."
            }
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "Cohere",
        "docs: errors",
        429,
        j(
            {
                "message": "You are using a Trial key, which is limited to 10 API "
                "calls / minute. You can continue to use the Trial key for free or upgrade to a Production key."
            }
        ),
        K.RATE_LIMIT,
    ),
    Body("Perplexity", "docs: errors", 401, html(401, "401 Authorization Required"), K.AUTH),
    Body(
        "Perplexity",
        "report: alternation",
        400,
        j(
            {
                "error": {
                    "message": "After the (optional) system "
                    "message(s), user and assistant roles should be alternating.",
                    "type": "invalid_message",
                    "code": 400,
                }
            }
        ),
        K.REQUEST_STRUCTURE,
    ),
    # ---------------------------------------------------------------- Cloudflare, nginx and other HTML pages
    Body("Cloudflare", "docs: 5xx errors (524 boilerplate says overloaded)", 524, CLOUDFLARE_524, K.STATUS),
    Body("Cloudflare", "docs: 5xx errors", 522, CLOUDFLARE_522, K.STATUS),
    Body("Cloudflare", "docs: 5xx errors (boilerplate with misleading words)", 520, CLOUDFLARE_520, K.STATUS),
    Body("Cloudflare", "docs: 5xx errors", 521, CLOUDFLARE_521, K.STATUS),
    Body("Cloudflare", "docs: 5xx errors", 523, CLOUDFLARE_523, K.STATUS),
    Body(
        "Cloudflare",
        "docs: 502",
        502,
        "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<center>"
        "<h1>502 Bad Gateway</h1></center>\n<hr><center>cloudflare</center>\n</body>\n</html>",
        K.STATUS,
    ),
    Body(
        "nginx",
        "docs: client_max_body_size",
        413,
        "<html>\n<head><title>413 Request Entity Too Large</title>"
        "</head>\n<body>\n<center><h1>413 Request Entity Too Large</h1></center>\n<hr><center>nginx</center>\n"
        "</body>\n</html>",
        K.REQUEST_TOO_LARGE,
    ),
    Body(
        "nginx",
        "docs: upstream timeout",
        504,
        "<html><head><title>504 Gateway Time-out</title></head><body>"
        "<center><h1>504 Gateway Time-out</h1></center></body></html>",
        K.STATUS,
    ),
    Body(
        "AWS ALB",
        "docs: load balancer errors",
        503,
        "<html><head><title>503 Service Temporarily Unavailable"
        "</title></head><body><center><h1>503 Service Temporarily Unavailable</h1></center></body></html>",
        K.STATUS,
    ),
    Body(
        "Google Frontend",
        "docs: 429 page",
        429,
        "<!DOCTYPE html><html lang=en><title>Error 429 (Too Many "
        "Requests)!!1</title><p><b>429.</b> <ins>That's an error.</ins><p>We're sorry, but you have sent too "
        "many requests to us recently. Please try again later.</html>",
        K.RATE_LIMIT,
    ),
    Body(
        "LiteLLM proxy",
        "report: BerriAI/litellm#4208",
        400,
        j(
            {
                "error": {
                    "message": "Budget has been exceeded! Current cost: 0.0010747, Max budget: 0.0",
                    "type": "auth_error",
                    "param": None,
                    "code": 400,
                }
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "LiteLLM proxy",
        "report: BerriAI/litellm#14144",
        429,
        litellm(
            "No deployments available - crossed budget: Exceeded budget for deployment model_name: gpt-4o, "
            "litellm_params.model: openai/gpt-4o: 0.363 >= 1d",
            code="429",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "LiteLLM proxy",
        "docs: customer budgets",
        400,
        litellm(
            "ExceededBudget: End User=ishaan3 over budget. Spend=0.000887, Budget=0.0001",
            type_="auth_error",
            code="400",
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenRouter",
        "report: charmbracelet/crush#279 (Mistral upstream)",
        400,
        openrouter(
            "Provider returned error",
            400,
            raw=flat(
                "Unexpected role 'tool' after role 'user'", type_="invalid_request_message_order", code="3230"
            ),
            provider="Mistral",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Gemini",
        "report: continuedev/continue#11164 (wrapped by a gateway)",
        400,
        j(
            {
                "error": {
                    "message": '{"error": {"code": 400, "message": "Please ensure that function call turn comes immediately after a '
                    'user turn or after a function response turn.", "status": "INVALID_ARGUMENT"}}',
                    "code": 400,
                    "status": "Bad Request",
                }
            }
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Gemini",
        "report: google-gemini/gemini-cli#1811",
        429,
        j(
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "errors": [
                        {
                            "message": "Resource has been exhausted (e.g. check quota).",
                            "domain": "global",
                            "reason": "rateLimitExceeded",
                        }
                    ],
                    "status": "RESOURCE_EXHAUSTED",
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Mistral",
        "report: datapizza-labs/datapizza-ai#98",
        400,
        flat("Unexpected role 'user' after role 'tool'", type_="invalid_request_message_order", code="3230"),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "vLLM (Mistral model)",
        "report: mistralai/mistral-vibe#578",
        400,
        j(
            {
                "error": {
                    "message": "Unexpected role 'user' after role 'tool'",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            }
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Ollama",
        "report: continuedev/continue#9528",
        500,
        simple("model requires more system memory (127.8 GiB) than is available (13.2 GiB)"),
        K.PROVIDER,
    ),
    Body(
        "OpenAI",
        "report: Aider-AI/aider#1880",
        429,
        oai(
            "Request too large for gpt-4o in organization org-2it on tokens per min (TPM): Limit 30000, Requested "
            "36278. The input or output tokens must be reduced in order to run successfully. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            type_="tokens",
            code="rate_limit_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI-compatible gateway",
        "report: itmisx/deepx-code#94",
        400,
        oai(
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
            code="invalid_request_error",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI-compatible gateway",
        "report: miurla/morphic#136",
        400,
        oai(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
            "'tool_calls'. (request id: 2024051116100984850589317176109) (request id: 20240511161006903012458ab9obA9U)",
            param="messages.[3].role",
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "Qwen (DashScope)",
        "report: QwenLM/qwen-code#2435",
        400,
        oai(
            "<400> InternalError.Algo.InvalidParameter: An assistant message with \u201ctool_calls\u201d must be "
            "followed by tool messages responding to each \u201ctool_call_id\u201d. The following tool_call_ids did "
            "not have response messages: message[571].role"
        ),
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI",
        "report: BloomLabsInc/genkit-plugins#225 (as plain text)",
        400,
        "400 An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages",
        K.REQUEST_STRUCTURE,
    ),
    Body(
        "OpenAI-compatible gateway",
        "report: MayDay-wpf/snow-app#113",
        413,
        j({"error": {"message": "Request payload is too large", "type": "invalidrequesterror"}}),
        K.REQUEST_TOO_LARGE,
    ),
    Body(
        "OpenAI-compatible gateway",
        "report: MayDay-wpf/snow-app#113",
        400,
        j({"error": {"message": "upstream request failed", "type": "upstream_error"}}),
        K.PROVIDER,
    ),
    Body(
        "Azure OpenAI",
        "report: microsoft/azurechat#481",
        400,
        oai("Invalid image (base64) data."),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Ollama",
        "report: langgenius/dify#8170",
        400,
        simple("illegal base64 data at input byte 5"),
        K.IMAGE_FORMAT,
    ),
    Body(
        "LM Studio",
        "report: presidio-oss/cline-based-code-generator#195",
        400,
        simple("'url' field must be a base64 encoded image."),
        K.IMAGE_FORMAT,
    ),
    Body(
        "Gemini (through a gateway)",
        "report: tech-shrimp/gemini-balance-lite#7",
        429,
        j(
            {
                "error": {
                    "message": 'Error from provider(429): {\n  "error": {\n    "code": 429,\n    "message": "Resource has been '
                    'exhausted (e.g. check quota).",\n    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n'
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Gemini (through a gateway)",
        "report: lbjlaq/Antigravity-Manager#583",
        429,
        j(
            {
                "error": {
                    "message": 'All accounts exhausted. Last error: HTTP 429: { "error": { "code": 429, "message": "No capacity '
                    'available for model gemini-3-pro-image on the server", "status": "RESOURCE_EXHAUSTED", "details": [ { '
                    '"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "MODEL_CAPACITY_EXHAUSTED" } ] } }'
                }
            }
        ),
        K.RATE_LIMIT,
    ),
    Body(
        "Gemini Code Assist",
        "report: su-kaka/gcli2api#416",
        429,
        goog(
            429,
            "Resource has been exhausted (e.g. check quota).",
            "RESOURCE_EXHAUSTED",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "INSUFFICIENT_G1_CREDITS_BALANCE",
                    "metadata": {"error_number": "2008"},
                }
            ],
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenAI",
        "report: Chanzhaoyu/chatgpt-web#372",
        400,
        oai(
            "This model's maximum context length is 4096 tokens. However, you requested 4118 tokens (3118 in the "
            "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            param="messages",
            code="context_length_exceeded",
        ),
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "OpenAI (through a PHP proxy)",
        "report: dirk1983/deepseek#11",
        400,
        "Server returned an error message\uff1aThis model's maximum context length is 4096 tokens. However, you "
        "requested 4222 tokens (1222 in the messages, 3000 in the completion). Please reduce the length of the "
        "messages or completion.",
        K.CONTEXT_OVERFLOW,
    ),
    Body(
        "LiteLLM proxy",
        "report: BerriAI/litellm#14144",
        400,
        j(
            {
                "error": {
                    "message": "Budget has been exceeded! Team=99c74652-6e33-4dbd-93f3-5b545da15ade",
                    "type": None,
                    "param": None,
                    "code": "400",
                }
            }
        ),
        K.QUOTA_EXHAUSTED,
    ),
    Body(
        "OpenAI-compatible gateway",
        "report: NousResearch/hermes-agent#6964",
        400,
        j({"error": {"message": "Invalid request data", "type": "invalid_request_error"}}),
        K.PROVIDER,
    ),
]
