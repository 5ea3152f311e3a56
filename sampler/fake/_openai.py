"""The OpenAI chat completions wire: `POST /v1/chat/completions`, plain or as SSE chunks."""

from __future__ import annotations

from typing import Any

import msgspec

from ._auth import Verdict
from ._cache import prompt_prefixes
from ._reply import Reply, estimate_tokens
from ._strict import structure_rejection
from ._wire import (
    TPM_TOO_LARGE,
    BadRequest,
    Meta,
    Parsed,
    Response,
    bad_gateway_page,
    json_response,
    measure,
    phrase,
    retry_headers,
    text_of,
)
from .faults import Fault
from .script import Conversation

_encode = msgspec.json.encode
_DONE = b"data: [DONE]\n\n"
_SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"


def _error(message: str, kind: str, code: str | None = None, param: str | None = None) -> Any:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _mask(token: str | None) -> str:
    if not token:
        return ""
    return token[:3] + "*" * max(0, len(token) - 7) + token[-4:] if len(token) > 8 else "***"


class OpenAIWire:
    """Requests, responses, streams and errors shaped like OpenAI's."""

    name = "openai"
    request_id_header = b"x-request-id"

    def parse(self, request: Any) -> Parsed:
        if not isinstance(request, dict):
            raise BadRequest("We could not parse the JSON body of your request: expected an object.")
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("Invalid 'messages': expected a non-empty array of messages.")
        system: list[str] = []
        users: list[str] = []
        results: list[str] = []
        rounds = 0
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                raise BadRequest(f"Invalid type for 'messages[{index}]': expected an object.")
            role = message.get("role")
            content = message.get("content")
            if role in ("system", "developer"):
                system.append(text_of(content))
            elif role == "user":
                users.append(text_of(content))
                rounds = 0
                results = []
            elif role == "assistant":
                if message.get("tool_calls"):
                    rounds += 1
            elif role == "tool":
                results.append(text_of(content))
            else:
                raise BadRequest(f"Invalid value for 'messages[{index}].role': {role!r} is not supported.")
        chars, images = measure(messages)
        tool_chars, _ = measure(request.get("tools"))
        options = request.get("stream_options")
        model = request.get("model")
        conversation = Conversation(
            system="\n".join(system),
            user_texts=tuple(users),
            tool_rounds=rounds,
            tool_results=tuple(results),
            message_count=len(messages),
        )
        return Parsed(
            conversation=conversation,
            stream=request.get("stream") is True,
            include_usage=isinstance(options, dict) and options.get("include_usage") is True,
            model=model if isinstance(model, str) else None,
            prompt_tokens=estimate_tokens(chars + tool_chars),
            images=images,
            prefixes=prompt_prefixes([request.get("tools")], messages),
        )

    def events(self, reply: Reply, meta: Meta) -> list[bytes]:
        head = (
            b'data: {"id":"'
            + meta.response_id.encode()
            + b'","object":"chat.completion.chunk","created":'
            + str(meta.created).encode()
            + b',"model":'
            + _encode(meta.model)
            + b',"choices":[{"index":0,"delta":'
        )
        going = b',"logprobs":null,"finish_reason":null}]}\n\n'
        role = b'{"role":"assistant","content":""}' if reply.text_pieces or not reply.tool_calls else None
        events = [head + (role or b'{"role":"assistant","content":null}') + going]
        content = head + b'{"content":'
        tail = b"}" + going
        reasoning = head + b'{"reasoning_content":'
        events.extend(reasoning + _encode(piece) + tail for piece in reply.thought_pieces)
        events.extend(content + _encode(piece) + tail for piece in reply.text_pieces)
        for index, call in enumerate(reply.tool_calls):
            opening = {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
            events.append(head + _encode(opening) + going)
            piece_head = (
                head + b'{"tool_calls":[{"index":' + str(index).encode() + b',"function":{"arguments":'
            )
            events.extend(piece_head + _encode(piece) + b"}}]}" + going for piece in call.pieces)
        events.append(head + b'{},"logprobs":null,"finish_reason":"' + reply.finish.encode() + b'"}]}\n\n')
        if meta.include_usage:
            usage = {
                "id": meta.response_id,
                "object": "chat.completion.chunk",
                "created": meta.created,
                "model": meta.model,
                "choices": [],
                "usage": _usage(meta, reply.completion_tokens),
            }
            events.append(b"data: " + _encode(usage) + b"\n\n")
        events.append(_DONE)
        return events

    def empty_events(self, meta: Meta) -> list[bytes]:
        return [_DONE]

    def error_event(self) -> bytes:
        return b"data: " + _encode(_error(_SERVER_ERROR, "server_error")) + b"\n\n"

    def body(self, reply: Reply, meta: Meta) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in reply.tool_calls
            ]
        return _encode(
            {
                "id": meta.response_id,
                "object": "chat.completion",
                "created": meta.created,
                "model": meta.model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish}
                ],
                "usage": _usage(meta, reply.completion_tokens),
            }
        )

    def fault_response(self, fault: Fault) -> Response:
        retry = retry_headers(fault)
        match fault.kind:
            case "rate_limit":
                message = "Rate limit reached for requests per min (RPM): Limit 500. Please try again later."
                headers = (*retry, (b"x-ratelimit-remaining-requests", b"0"))
                return json_response(429, _error(message, "requests", "rate_limit_exceeded"), headers)
            case "insufficient_quota":
                message = "You exceeded your current quota, please check your plan and billing details."
                return json_response(429, _error(message, "insufficient_quota", "insufficient_quota"))
            case "bad_gateway":
                return bad_gateway_page()
            case "unavailable":
                message = "The server is overloaded or not ready yet."
                return json_response(503, _error(message, "server_error"), retry)
            case "overloaded":
                return json_response(529, _error("Overloaded", "overloaded_error"), retry)
            case "server_error" | "stream_error":
                return json_response(500, _error(_SERVER_ERROR, "server_error"), retry)
            case "token_expired":
                return self.auth_error("expired", None)
            case "budget_exhausted":
                message = "Budget has been exceeded! Current cost: 10.02, Max budget: 10.0"
                return json_response(429, _error(message, "budget_exceeded", "429"))
            case "request_too_large_tpm":
                return json_response(429, _error(TPM_TOO_LARGE, "tokens", "rate_limit_exceeded"))
            case "structure_rejected":
                return self.bad_request(structure_rejection("openai"))
            case "error_in_200":
                message = "upstream request failed: the model refused the request's parameters"
                return json_response(200, _error(message, "invalid_request_error"))
            case _:
                status = fault.http_status
                kind = "server_error" if status >= 500 else "invalid_request_error"
                return json_response(status, _error(phrase(status), kind), retry)

    def auth_error(self, verdict: Verdict, token: str | None = None) -> Response:
        if verdict == "missing":
            message = (
                "You didn't provide an API key. You need to provide your API key in an Authorization header "
                "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
            return json_response(401, _error(message, "invalid_request_error"))
        message = f"Incorrect API key provided: {_mask(token)}. The key is invalid or has expired."
        return json_response(401, _error(message, "invalid_request_error", "invalid_api_key"))

    def bad_request(self, message: str) -> Response:
        return json_response(400, _error(message, "invalid_request_error"))

    def image_rejected(self) -> Response:
        message = "Invalid image: the image could not be processed. Send a valid PNG, JPEG, GIF or WEBP."
        return json_response(400, _error(message, "invalid_request_error", "invalid_image", "messages"))

    def too_large(self) -> Response:
        message = "Request too large: the request body exceeds the maximum size allowed."
        return json_response(413, _error(message, "invalid_request_error", "request_too_large"))


def _usage(meta: Meta, completion: int) -> dict[str, Any]:
    prompt = meta.prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": meta.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
