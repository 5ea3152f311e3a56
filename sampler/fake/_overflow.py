"""Context-window overflow errors, worded the way each provider words them."""

from __future__ import annotations

from typing import Literal

from ._wire import Response, json_response

OverflowStyle = Literal["openai", "anthropic", "gemini", "llamacpp"]
"""Whose wording a context overflow uses; by default the wire the request came in on."""


def overflow_response(style: OverflowStyle, tokens: int, window: int) -> Response:
    """The 400 a prompt of `tokens` tokens gets from a model with a `window`-token context."""
    match style:
        case "openai":
            message = (
                f"This model's maximum context length is {window} tokens. However, your messages resulted in "
                f"{tokens} tokens. Please reduce the length of the messages."
            )
            body = {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return json_response(400, {"error": body})
        case "anthropic":
            message = f"prompt is too long: {tokens} tokens > {window} maximum"
            return json_response(
                400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
            )
        case "gemini":
            message = (
                f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({window})."
            )
            return json_response(
                400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
            )
        case "llamacpp":
            message = (
                f"request ({tokens} tokens) exceeds the available context size ({window} tokens), "
                "try increasing it"
            )
            error: dict[str, object] = {
                "code": 400,
                "message": message,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": window,
            }
            return json_response(400, {"error": error})
