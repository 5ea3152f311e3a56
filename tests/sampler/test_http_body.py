"""HTTP/1.1 body framing: chunked and Content-Length bodies decoded from pieces split anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampler._http_body import BodyFramingError, ChunkedBody, LengthBody, framing_of


def _chunked(payloads: list[bytes], trailers: bytes = b"") -> bytes:
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads if p)
    return framed + b"0\r\n" + trailers + b"\r\n"


def _feed_split(body: ChunkedBody | LengthBody, data: bytes, cuts: list[int]) -> bytes:
    out = []
    start = 0
    for cut in [*sorted({c % (len(data) + 1) for c in cuts}), len(data)]:
        out.append(body.feed(data[start:cut]))
        start = cut
    return b"".join(out)


@given(
    payloads=st.lists(st.binary(max_size=40), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    trailers=st.sampled_from([b"", b"X-Checksum: 1\r\n"]),
)
def test_a_chunked_body_split_anywhere_gives_its_payload_once_and_ends(
    payloads: list[bytes], cuts: list[int], trailers: bytes
) -> None:
    data = _chunked(payloads, trailers)
    body = ChunkedBody()
    assert _feed_split(body, data, cuts) == b"".join(payloads)
    assert body.done
    assert body.leftover == b""


def test_chunk_extensions_and_uppercase_sizes_are_accepted() -> None:
    body = ChunkedBody()
    assert body.feed(b"A;name=value\r\n0123456789\r\n0\r\n\r\n") == b"0123456789"
    assert body.done


def test_what_follows_the_last_chunk_is_kept_as_leftover() -> None:
    body = ChunkedBody()
    assert body.feed(b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200") == b"ok"
    assert body.done
    assert body.leftover == b"HTTP/1.1 200"


def test_a_body_is_not_done_until_the_final_blank_line() -> None:
    body = ChunkedBody()
    body.feed(b"2\r\nok\r\n0\r\n")
    assert not body.done
    body.feed(b"\r\n")
    assert body.done


@pytest.mark.parametrize(
    "data",
    [b"zz\r\n", b"0x5\r\nhello\r\n", b"-5\r\n", b"+5\r\n", b"5_0\r\n", b"\r\n", b"2\r\nokXX", b"1" * 5000],
    ids=[
        "not-hex",
        "0x-prefix",
        "negative",
        "plus",
        "underscore",
        "empty",
        "no-crlf-after-data",
        "line-too-long",
    ],
)
def test_malformed_framing_is_a_body_framing_error(data: bytes) -> None:
    with pytest.raises(BodyFramingError):
        ChunkedBody().feed(data)


@given(length=st.integers(min_value=0, max_value=200), cuts=st.lists(st.integers(0, 1000), max_size=6))
def test_a_length_body_gives_exactly_its_length_and_keeps_the_rest(length: int, cuts: list[int]) -> None:
    data = bytes(range(256))[:length] + b"REST"
    body = LengthBody(length)
    assert _feed_split(body, data, cuts) == data[:length]
    assert body.done
    assert body.leftover == b"REST"
    assert body.remaining == 0


def test_a_negative_content_length_is_refused() -> None:
    with pytest.raises(BodyFramingError):
        LengthBody(-1)


@pytest.mark.parametrize(
    ("method", "status", "version", "headers", "expected"),
    [
        ("GET", 200, b"1.1", [(b"transfer-encoding", b"chunked")], (ChunkedBody, True)),
        ("GET", 200, b"1.1", [(b"content-length", b"5")], (LengthBody, True)),
        (
            "GET",
            200,
            b"1.1",
            [(b"content-length", b"5"), (b"transfer-encoding", b"chunked")],
            (ChunkedBody, True),
        ),
        ("GET", 200, b"1.1", [(b"content-length", b"5"), (b"connection", b"Close")], (LengthBody, False)),
        ("GET", 200, b"1.0", [(b"content-length", b"5")], (LengthBody, False)),
        ("GET", 200, b"1.0", [], None),
        ("HEAD", 200, b"1.1", [(b"content-length", b"5")], None),
        ("GET", 204, b"1.1", [], None),
        ("GET", 304, b"1.1", [(b"content-length", b"5")], None),
    ],
    ids=[
        "chunked",
        "length",
        "chunked-wins",
        "connection-close",
        "http-1.0",
        "until-close",
        "head",
        "204",
        "304",
    ],
)
def test_a_response_head_says_how_its_body_is_framed_and_whether_the_connection_lives_on(
    method: str,
    status: int,
    version: bytes,
    headers: list[tuple[bytes, bytes]],
    expected: tuple[type, bool] | None,
) -> None:
    framing = framing_of(method, status, version, headers)
    if expected is None:
        assert framing is None
    else:
        assert framing is not None
        assert (type(framing.body), framing.keep_alive) == expected
