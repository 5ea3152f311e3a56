"""The Anthropic messages wire: `POST /v1/messages`, plain or as named SSE events."""

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
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
_PING = b'event: ping\ndata: {"type":"ping"}\n\n'
_MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def _event(name: str, payload: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _encode(payload) + b"\n\n"


def _error(kind: str, message: str) -> Any:
    return {"type": "error", "error": {"type": kind, "message": message}}


class AnthropicWire:
    """Requests, responses, streams and errors shaped like Anthropic's."""

    name = "anthropic"
    request_id_header = b"request-id"

    def parse(self, request: Any) -> Parsed:
        if not isinstance(request, dict):
            raise BadRequest("There was an error parsing the body of your request: expected an object.")
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: at least one message is required")
        users: list[str] = []
        results: list[str] = []
        rounds = 0
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                raise BadRequest(f"messages.{index}: Input should be an object")
            role = message.get("role")
            content = message.get("content")
            if role == "user":
                blocks = content if isinstance(content, list) else []
                tool_results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
                if tool_results:
                    results.extend(text_of(block.get("content")) for block in tool_results)
                else:
                    users.append(text_of(content))
                    rounds = 0
                    results = []
            elif role == "assistant":
                if isinstance(content, list) and any(
                    isinstance(block, dict) and block.get("type") == "tool_use" for block in content
                ):
                    rounds += 1
            else:
                raise BadRequest(f"messages.{index}.role: Input should be 'user' or 'assistant'")
        system = request.get("system")
        chars, images = measure(messages)
        system_chars, _ = measure(system)
        tool_chars, _ = measure(request.get("tools"))
        model = request.get("model")
        conversation = Conversation(
            system=text_of(system),
            user_texts=tuple(users),
            tool_rounds=rounds,
            tool_results=tuple(results),
            message_count=len(messages),
        )
        return Parsed(
            conversation=conversation,
            stream=request.get("stream") is True,
            include_usage=True,
            model=model if isinstance(model, str) else None,
            prompt_tokens=estimate_tokens(chars + system_chars + tool_chars),
            images=images,
            prefixes=prompt_prefixes([system, request.get("tools")], messages),
        )

    def events(self, reply: Reply, meta: Meta) -> list[bytes]:
        events = [self._message_start(meta)]
        block = 0
        if reply.thought_pieces:
            thinking = {"type": "thinking", "thinking": "", "signature": ""}
            events.append(
                _event(
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": thinking},
                )
            )
            head = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
            head += b'{"type":"thinking_delta","thinking":'
            events.extend(head + _encode(piece) + b"}}\n\n" for piece in reply.thought_pieces)
            signature = {"type": "signature_delta", "signature": "fake-signature"}
            events.append(
                _event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": signature})
            )
            events.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
            block = 1
        if reply.text_pieces:
            events.append(
                _event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": block,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            events.append(_PING)
            head = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
                + str(block).encode()
                + b',"delta":{"type":"text_delta","text":'
            )
            events.extend(head + _encode(piece) + b"}}\n\n" for piece in reply.text_pieces)
            events.append(_event("content_block_stop", {"type": "content_block_stop", "index": block}))
            block += 1
        for call in reply.tool_calls:
            opening = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            events.append(
                _event(
                    "content_block_start",
                    {"type": "content_block_start", "index": block, "content_block": opening},
                )
            )
            head = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
                + str(block).encode()
                + b',"delta":{"type":"input_json_delta","partial_json":'
            )
            events.extend(head + _encode(piece) + b"}}\n\n" for piece in call.pieces)
            events.append(_event("content_block_stop", {"type": "content_block_stop", "index": block}))
            block += 1
        events.append(self._message_delta(_STOP_REASONS[reply.finish], reply.completion_tokens))
        events.append(_MESSAGE_STOP)
        return events

    def empty_events(self, meta: Meta) -> list[bytes]:
        return [self._message_start(meta), self._message_delta("end_turn", 0), _MESSAGE_STOP]

    def error_event(self) -> bytes:
        return _event("error", _error("overloaded_error", "Overloaded"))

    def body(self, reply: Reply, meta: Meta) -> bytes:
        content: list[dict[str, Any]] = []
        if reply.text_pieces:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            arguments = msgspec.json.decode(call.arguments)
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
        return _encode(
            {
                "id": meta.response_id,
                "type": "message",
                "role": "assistant",
                "model": meta.model,
                "content": content,
                "stop_reason": _STOP_REASONS[reply.finish],
                "stop_sequence": None,
                "usage": {**_input_usage(meta), "output_tokens": reply.completion_tokens},
            }
        )

    def fault_response(self, fault: Fault) -> Response:
        retry = retry_headers(fault)
        match fault.kind:
            case "rate_limit":
                message = "This request would exceed your organization's rate limit. Please try again later."
                headers = (*retry, (b"anthropic-ratelimit-requests-remaining", b"0"))
                return json_response(429, _error("rate_limit_error", message), headers)
            case "insufficient_quota":
                message = (
                    "Your credit balance is too low to access the Anthropic API. "
                    "Please go to Plans & Billing to upgrade or purchase credits."
                )
                return json_response(400, _error("invalid_request_error", message))
            case "bad_gateway":
                return bad_gateway_page()
            case "server_error":
                return json_response(500, _error("api_error", "Internal server error"), retry)
            case "unavailable":
                return json_response(503, _error("api_error", "Service temporarily unavailable"), retry)
            case "overloaded" | "stream_error":
                return json_response(529, _error("overloaded_error", "Overloaded"), retry)
            case "token_expired":
                return self.auth_error("expired")
            case "budget_exhausted":
                message = (
                    "You have reached your specified API usage limits. You will regain access on 2031-01-01."
                )
                return json_response(429, _error("rate_limit_error", message))
            case "request_too_large_tpm":
                return json_response(429, _error("rate_limit_error", TPM_TOO_LARGE))
            case "structure_rejected":
                return self.bad_request(structure_rejection("anthropic"))
            case "error_in_200":
                message = "upstream request failed: the model refused the request's parameters"
                return json_response(200, _error("invalid_request_error", message))
            case _:
                status = fault.http_status
                kind = "api_error" if status >= 500 else "invalid_request_error"
                return json_response(status, _error(kind, phrase(status)), retry)

    def auth_error(self, verdict: Verdict, token: str | None = None) -> Response:
        if verdict == "missing":
            return json_response(401, _error("authentication_error", "x-api-key header is required"))
        message = "OAuth token has expired. Please obtain a new token or refresh your existing token."
        return json_response(401, _error("authentication_error", message))

    def bad_request(self, message: str) -> Response:
        return json_response(400, _error("invalid_request_error", message))

    def image_rejected(self) -> Response:
        return json_response(400, _error("invalid_request_error", "Could not process image"))

    def too_large(self) -> Response:
        message = "Request exceeds the maximum allowed number of bytes."
        return json_response(413, _error("request_too_large", message))

    def _message_start(self, meta: Meta) -> bytes:
        message: dict[str, Any] = {
            "id": meta.response_id,
            "type": "message",
            "role": "assistant",
            "model": meta.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**_input_usage(meta), "output_tokens": 1},
        }
        return _event("message_start", {"type": "message_start", "message": message})

    def _message_delta(self, stop_reason: str, output_tokens: int) -> bytes:
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        payload = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": output_tokens}}
        return _event("message_delta", payload)


def _input_usage(meta: Meta) -> dict[str, int]:
    """The prompt's usage as Anthropic splits it: uncached input, and what was read from the cache."""
    return {
        "input_tokens": meta.prompt_tokens - meta.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": meta.cached_tokens,
    }
