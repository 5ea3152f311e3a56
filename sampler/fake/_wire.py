"""What both wire formats share: the parsed request, the response parts, and the proxies' pages."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Protocol

import msgspec

from ._auth import Verdict
from ._reply import Reply
from .faults import Fault
from .script import Conversation

Header = tuple[bytes, bytes]

IMAGE_TOKENS = 1_000
"""What one image part counts for in the prompt estimate, whatever its size."""

_IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})
_TEXT_TYPES = frozenset({"text", "input_text"})


TPM_TOO_LARGE = (
    "Request too large for the model in organization org-fake on tokens per min (TPM): Limit 30000, "
    "Requested 45000. The input or output tokens must be reduced in order to run successfully."
)
"""OpenAI's wording for a request that alone exceeds the per-minute token limit (a proxy passes it on)."""


class BadRequest(Exception):
    """The request body is not a request this wire understands; the message says why."""


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    """One model call, decoded: the conversation and the options that shape the response."""

    conversation: Conversation
    stream: bool
    include_usage: bool
    model: str | None
    prompt_tokens: int
    images: int
    prefixes: tuple[tuple[bytes, int], ...] = ()
    """The prompt's prefixes (fingerprint, tokens), the whole prompt last, for the prompt cache."""


class Meta(msgspec.Struct, frozen=True, kw_only=True):
    """The identity of one response: ids, model, and the prompt's usage."""

    response_id: str
    model: str
    created: int
    prompt_tokens: int
    include_usage: bool
    cached_tokens: int = 0
    """The part of ``prompt_tokens`` served from the prompt cache."""
    headers: tuple[Header, ...] = ()
    """Sent with the response besides its own (the rate-limit headers, when the provider is limited)."""


class Response(msgspec.Struct, frozen=True):
    """A whole (non-streamed) HTTP response."""

    status: int
    body: bytes
    content_type: bytes = b"application/json"
    headers: tuple[Header, ...] = ()


class Wire(Protocol):
    """One provider's wire format: how requests read and responses, errors and streams look."""

    name: str
    request_id_header: bytes

    def parse(self, request: Any) -> Parsed:
        """The decoded request body as a call; raises BadRequest for what the provider would refuse."""
        ...

    def events(self, reply: Reply, meta: Meta) -> list[bytes]:
        """Every SSE event of the streamed reply, in order, each a complete event."""
        ...

    def empty_events(self, meta: Meta) -> list[bytes]:
        """The events of a stream that ends without any content."""
        ...

    def error_event(self) -> bytes:
        """The provider's in-stream error event."""
        ...

    def body(self, reply: Reply, meta: Meta) -> bytes:
        """The non-streamed JSON response for the reply."""
        ...

    def fault_response(self, fault: Fault) -> Response:
        """The error response the provider sends for a status fault."""
        ...

    def auth_error(self, verdict: Verdict, token: str | None = None) -> Response:
        """The 401 for a missing or expired credential."""
        ...

    def bad_request(self, message: str) -> Response:
        """A 400 invalid-request error carrying `message`."""
        ...

    def image_rejected(self) -> Response:
        """The 400 for an image the provider will not process."""
        ...

    def too_large(self) -> Response:
        """The provider's own JSON 413."""
        ...


def measure(value: Any) -> tuple[int, int]:
    """(characters, images) in a decoded JSON value: every string value counts, keys do not, and each
    image part counts `IMAGE_TOKENS` tokens however large its data is."""
    if isinstance(value, str):
        return len(value), 0
    chars = images = 0
    if isinstance(value, dict):
        if value.get("type") in _IMAGE_TYPES:
            return IMAGE_TOKENS * 4, 1
        for item in value.values():
            more, found = measure(item)
            chars += more
            images += found
    elif isinstance(value, list):
        for item in value:
            more, found = measure(item)
            chars += more
            images += found
    return chars, images


def retry_headers(fault: Fault) -> tuple[Header, ...]:
    """The retry headers `fault` asks for, exactly as given."""
    headers: list[Header] = []
    if fault.retry_after is not None:
        headers.append((b"retry-after", str(fault.retry_after).encode()))
    if fault.retry_after_ms is not None:
        headers.append((b"retry-after-ms", str(fault.retry_after_ms).encode()))
    return tuple(headers)


def phrase(status: int) -> str:
    """The reason phrase of an HTTP status, or "Error" for codes outside the standard."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def json_response(status: int, payload: Any, headers: tuple[Header, ...] = ()) -> Response:
    return Response(status, msgspec.json.encode(payload), b"application/json", headers)


def html_response(status: int, reason: str, server: str) -> Response:
    """The bare HTML error page a reverse proxy answers with."""
    page = (
        f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
        f"<center><h1>{status} {reason}</h1></center>\r\n<hr><center>{server}</center>\r\n"
        "</body>\r\n</html>\r\n"
    )
    return Response(status, page.encode(), b"text/html")


def bad_gateway_page() -> Response:
    return html_response(502, "Bad Gateway", "cloudflare")


def too_large_page() -> Response:
    return html_response(413, "Request Entity Too Large", "nginx")


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in _TEXT_TYPES
            and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""
