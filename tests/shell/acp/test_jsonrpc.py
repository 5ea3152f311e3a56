"""Framing: lines of at most the maximum size, each read as exactly one JSON-RPC 2.0 message or answered
with its error; what the agent writes is one line per message."""

from __future__ import annotations

import json

import msgspec
import pytest

from shell.acp._jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    Invalid,
    LineSplitter,
    Notification,
    Oversized,
    Request,
    Response,
    RpcError,
    decode_params,
    encode_error,
    encode_notification,
    encode_result,
    parse_message,
)
from shell.acp._schema import NewSessionRequest


def test_lines_are_split_on_newlines_across_reads_without_their_cr_and_blank_ones_skipped() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b'{"a":1}\r\n\n  \n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\n{") == [b'{"b":2}']
    assert splitter.finish() == [b"{"]


def test_a_line_over_the_maximum_is_dropped_as_it_comes_and_reported_once_at_its_newline() -> None:
    splitter = LineSplitter(8)
    assert splitter.feed(b"x" * 5) == []
    assert splitter.feed(b"x" * 50) == []
    assert splitter._buffer == bytearray()  # nothing of it is held
    assert splitter.feed(b"x\nok\n") == [Oversized(56), b"ok"]
    assert splitter.feed(b"123456789\n12345678\n") == [Oversized(9), b"12345678"]


def test_a_maximum_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        LineSplitter(0)


def test_each_line_is_a_request_a_notification_an_answer_or_an_error() -> None:
    request = parse_message(b'{"jsonrpc":"2.0","id":"r1","method":"session/new","params":{"cwd":"/"}}')
    assert isinstance(request, Request) and request.id == "r1" and request.method == "session/new"
    notification = parse_message(b'{"jsonrpc":"2.0","method":"session/cancel"}')
    assert isinstance(notification, Notification) and bytes(notification.params) == b"null"
    answer = parse_message(b'{"jsonrpc":"2.0","id":3,"result":{"x":1}}')
    assert isinstance(answer, Response) and answer.error is None
    failed = parse_message(b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}')
    assert isinstance(failed, Response) and failed.error == {"code": -1, "message": "no"}


@pytest.mark.parametrize(
    ("line", "code", "reply_id"),
    [
        (b"{nope", PARSE_ERROR, None),
        (b'"just a string"', INVALID_REQUEST, None),
        (b"[]", INVALID_REQUEST, None),
        (b'{"id": 4, "method": "x"}', INVALID_REQUEST, 4),
        (b'{"jsonrpc": "2.0", "id": 4.5, "method": "x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": true, "method": "x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 5, "method": 12}', INVALID_REQUEST, 5),
        (b'{"jsonrpc": "2.0", "id": 6}', INVALID_REQUEST, 6),
    ],
)
def test_what_is_not_a_message_is_answered_with_its_error(line: bytes, code: int, reply_id: object) -> None:
    parsed = parse_message(line)
    assert isinstance(parsed, Invalid)
    reply = json.loads(parsed.reply)
    assert reply["error"]["code"] == code
    assert reply["id"] == reply_id


def test_params_of_the_wrong_shape_are_invalid_params() -> None:
    with pytest.raises(RpcError) as caught:
        decode_params(msgspec.Raw(b'{"cwd": 1, "mcpServers": []}'), NewSessionRequest)
    assert caught.value.code == -32602


def test_each_written_message_is_one_line_of_json() -> None:
    for line in (
        encode_result(1, {"a": "b\nc"}),
        encode_error("x", -32603, "bad\nthing", {"kind": "k"}),
        encode_notification("session/update", {"text": "\n\n"}),
    ):
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert "data" not in json.loads(encode_error(1, -32600, "no data"))["error"]
