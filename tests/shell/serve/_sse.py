"""Reading event streams in tests: httpx-sse for events, raw frames where the absence of an id matters."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
from httpx_sse import connect_sse


class Frame(msgspec.Struct, frozen=True):
    event: str
    id: str | None
    data: dict[str, Any]


def raw_frames(
    client: httpx.Client, url: str, opened: threading.Event | None = None, **kwargs: Any
) -> Iterator[Frame]:
    """Each frame as sent: ``id`` None when the frame has no ``id:`` line (comments skipped);
    ``opened`` is set once the stream's headers came."""
    with client.stream("GET", url, **kwargs) as response:
        assert response.status_code == 200, response.read()
        if opened is not None:
            opened.set()
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if fields:
                yield Frame(fields["event"], fields.get("id"), msgspec.json.decode(fields["data"]))
            fields = {}


def sse_events(client: httpx.Client, url: str, **kwargs: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(event, last event id, data) per event, through the httpx-sse client."""
    with connect_sse(client, "GET", url, **kwargs) as source:
        assert source.response.status_code == 200
        for sse in source.iter_sse():
            yield sse.event, sse.id, msgspec.json.decode(sse.data)
