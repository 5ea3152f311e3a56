"""HTTP/1.1 message heads: a request head built and checked once, a response head parsed strictly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampler._http_head import (
    MAX_HEAD,
    HeadError,
    RequestHead,
    ResponseHead,
    head_end,
    header_line,
    parse_response_head,
)

_TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _head(*lines: bytes) -> bytes:
    """A response head of ``lines`` (status line first), with its blank line."""
    return b"".join(line + b"\r\n" for line in lines) + b"\r\n"


# ---------------------------------------------------------------------------------------------------------
# Request heads


@pytest.mark.parametrize(
    ("url", "origin", "prefix"),
    [
        (
            "http://api.example.com/v1/chat",
            ("http", "api.example.com", 80),
            b"POST /v1/chat HTTP/1.1\r\nHost: api.example.com\r\n",
        ),
        (
            "https://api.example.com/v1/chat",
            ("https", "api.example.com", 443),
            b"POST /v1/chat HTTP/1.1\r\nHost: api.example.com\r\n",
        ),
        (
            "http://127.0.0.1:8080/v1/chat",
            ("http", "127.0.0.1", 8080),
            b"POST /v1/chat HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n",
        ),
        (
            "https://api.example.com:8443/v1",
            ("https", "api.example.com", 8443),
            b"POST /v1 HTTP/1.1\r\nHost: api.example.com:8443\r\n",
        ),
        ("http://[::1]:8080/v1", ("http", "::1", 8080), b"POST /v1 HTTP/1.1\r\nHost: [::1]:8080\r\n"),
        (
            "http://api.example.com",
            ("http", "api.example.com", 80),
            b"POST / HTTP/1.1\r\nHost: api.example.com\r\n",
        ),
        (
            "https://api.example.com:443/v1",
            ("https", "api.example.com", 443),
            b"POST /v1 HTTP/1.1\r\nHost: api.example.com\r\n",
        ),
    ],
    ids=[
        "http-default-port",
        "https-default-port",
        "http-own-port",
        "https-own-port",
        "ipv6",
        "no-path",
        "default-port-spelled-out",
    ],
)
def test_the_request_line_and_host_name_the_url_with_its_port_only_when_it_is_not_the_default(
    url: str, origin: tuple[str, str, int], prefix: bytes
) -> None:
    head = RequestHead.build("POST", url, [])
    assert head.origin == origin
    assert head.method == "POST"
    assert head.prefix == prefix


def test_the_query_string_is_kept_and_the_fragment_dropped() -> None:
    head = RequestHead.build("GET", "http://h.example/v1/models?limit=5&order=asc#top", [])
    assert head.prefix.startswith(b"GET /v1/models?limit=5&order=asc HTTP/1.1\r\n")
    assert RequestHead.build("GET", "http://h.example?q=1", []).prefix.startswith(b"GET /?q=1 HTTP/1.1\r\n")


def test_the_origin_host_is_lower_case_and_user_info_is_never_sent() -> None:
    head = RequestHead.build("POST", "http://user:secret@API.Example.com:8000/", [])
    assert head.origin == ("http", "api.example.com", 8000)
    assert b"secret" not in head.prefix
    assert head.prefix == b"POST / HTTP/1.1\r\nHost: api.example.com:8000\r\n"


def test_an_internationalised_host_is_sent_and_connected_to_in_its_ascii_form() -> None:
    head = RequestHead.build("POST", "https://bücher.example/v1", [])
    assert head.origin == ("https", "xn--bcher-kva.example", 443)
    assert head.prefix == b"POST /v1 HTTP/1.1\r\nHost: xn--bcher-kva.example\r\n"


def test_headers_follow_host_in_the_order_given_with_names_and_values_as_given() -> None:
    headers = [("Content-Type", "application/json"), ("authorization", "Bearer k"), ("X-Empty", "")]
    head = RequestHead.build("POST", "http://h.example/", headers)
    assert head.prefix == (
        b"POST / HTTP/1.1\r\nHost: h.example\r\n"
        b"Content-Type: application/json\r\nauthorization: Bearer k\r\nX-Empty: \r\n"
    )


def test_encode_ends_the_head_with_the_extra_headers_then_content_length_and_a_blank_line() -> None:
    head = RequestHead.build("POST", "http://h.example/v1", [("Content-Type", "application/json")])
    assert head.encode(12, [("traceparent", "00-abc-def-01")]) == (
        b"POST /v1 HTTP/1.1\r\nHost: h.example\r\nContent-Type: application/json\r\n"
        b"traceparent: 00-abc-def-01\r\nContent-Length: 12\r\n\r\n"
    )
    assert head.encode(0).endswith(b"application/json\r\nContent-Length: 0\r\n\r\n")


def test_encode_leaves_the_built_head_unchanged_for_the_next_request() -> None:
    head = RequestHead.build("POST", "http://h.example/", [("X-A", "1")])
    first = head.encode(5, [("X-Trace", "one")])
    second = head.encode(7)
    assert head.prefix == b"POST / HTTP/1.1\r\nHost: h.example\r\nX-A: 1\r\n"
    assert first.count(b"X-Trace") == 1 and b"X-Trace" not in second
    assert second.endswith(b"X-A: 1\r\nContent-Length: 7\r\n\r\n")


@pytest.mark.parametrize(
    "name", ["", "X Header", "X-Header:", "X\tY", "Ünicode", "(comment)", "a/b", "X\r\nY", 'quo"te']
)
def test_a_header_name_that_is_not_a_token_is_refused(name: str) -> None:
    with pytest.raises(HeadError, match="not a valid header name"):
        header_line(name, "value")
    with pytest.raises(HeadError):
        RequestHead.build("POST", "http://h.example/", [(name, "value")])


@pytest.mark.parametrize(
    "value",
    ["a\r\nX-Injected: 1", "a\rb", "a\nb", "a\x00b", "a\x1fb", "a\x7fb", "\x00", " leading", "trailing\t"],
    ids=["crlf", "cr", "lf", "nul", "unit-separator", "del", "only-nul", "leading-space", "trailing-tab"],
)
def test_a_header_value_with_a_control_character_or_edge_whitespace_is_refused(value: str) -> None:
    with pytest.raises(HeadError, match="control character"):
        header_line("X-Value", value)


@pytest.mark.parametrize("value", ["café", "naïve", "\u2713", "\x80"])
def test_a_header_value_that_is_not_ascii_is_refused(value: str) -> None:
    with pytest.raises(HeadError, match="not ASCII"):
        header_line("X-Value", value)


@pytest.mark.parametrize(
    "name", ["Host", "host", "Content-Length", "content-LENGTH", "Transfer-Encoding", "CONNECTION"]
)
def test_the_headers_the_framing_owns_may_not_be_given(name: str) -> None:
    with pytest.raises(HeadError, match="set by the transport"):
        RequestHead.build("POST", "http://h.example/", [(name, "x")])
    head = RequestHead.build("POST", "http://h.example/", [])
    with pytest.raises(HeadError, match="set by the transport"):
        head.encode(1, [(name, "x")])


def test_a_bad_extra_header_is_refused_by_encode() -> None:
    head = RequestHead.build("POST", "http://h.example/", [])
    with pytest.raises(HeadError):
        head.encode(1, [("X-Trace", "a\r\nb")])
    with pytest.raises(HeadError):
        head.encode(1, [("Bad Name", "x")])


def test_inner_whitespace_and_visible_ascii_in_a_value_are_sent_as_they_are() -> None:
    assert header_line("X-A", "a \t b") == b"X-A: a \t b\r\n"
    visible = "".join(chr(c) for c in range(0x21, 0x7F))
    assert header_line("X-B", visible) == b"X-B: " + visible.encode() + b"\r\n"


@given(
    name=st.text(alphabet=_TOKEN_CHARS, min_size=1, max_size=20).filter(
        lambda n: n.lower() not in {"host", "content-length", "transfer-encoding", "connection"}
    ),
    value=st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip),
)
def test_any_token_name_and_printable_ascii_value_is_sent_and_reads_back_the_same(
    name: str, value: str
) -> None:
    line = header_line(name, value)
    assert line == f"{name}: {value}\r\n".encode()
    parsed = parse_response_head(b"HTTP/1.1 200 OK\r\n" + line + b"\r\n")
    assert parsed.headers == [(name.encode(), value.encode())]


@pytest.mark.parametrize(
    "url",
    [
        "ftp://h.example/file",
        "ws://h.example/socket",
        "file:///etc/passwd",
        "/v1/chat",
        "h.example/v1",
        "mailto:someone@h.example",
    ],
)
def test_a_url_that_is_not_absolute_http_or_https_is_refused(url: str) -> None:
    with pytest.raises(HeadError, match="only http and https"):
        RequestHead.build("POST", url, [])


@pytest.mark.parametrize(
    "url",
    [
        "http:///v1",
        "http://h.example:port/",
        "http://h.example:99999/",
        "http://h.example/with space",
        "http://h.example/caf\u00e9",
        "http://h.example/a\x7fb",
    ],
    ids=[
        "no-host",
        "port-not-a-number",
        "port-out-of-range",
        "space-in-path",
        "non-ascii-path",
        "del-in-path",
    ],
)
def test_a_url_with_no_host_a_malformed_port_or_a_target_that_cannot_be_sent_is_refused(url: str) -> None:
    with pytest.raises(HeadError):
        RequestHead.build("POST", url, [])


@pytest.mark.parametrize(
    "url", ["http://a..example/", "http://" + "a" * 64 + ".example/"], ids=["empty-label", "label-too-long"]
)
def test_a_host_that_is_not_a_valid_name_is_a_head_error_like_every_unusable_url(url: str) -> None:
    with pytest.raises(HeadError):
        RequestHead.build("POST", url, [])


@pytest.mark.parametrize("method", ["", "P OST", "PÖST", "GET\r\n", "(POST)"])
def test_a_method_that_is_not_a_token_is_refused(method: str) -> None:
    with pytest.raises(HeadError, match="not an HTTP method"):
        RequestHead.build(method, "http://h.example/", [])


def test_a_head_error_is_a_value_error() -> None:
    assert issubclass(HeadError, ValueError)


# ---------------------------------------------------------------------------------------------------------
# Response heads


def test_the_status_reason_version_and_headers_are_read_with_names_as_sent_in_order() -> None:
    answer = parse_response_head(
        _head(b"HTTP/1.1 201 Created Fine", b"Content-Type: text/plain", b"X-Request-ID: abc", b"x-lower: 1")
    )
    assert answer == ResponseHead(
        b"1.1",
        201,
        b"Created Fine",
        [(b"Content-Type", b"text/plain"), (b"X-Request-ID", b"abc"), (b"x-lower", b"1")],
    )
    assert answer.lowered() == [
        (b"content-type", b"text/plain"),
        (b"x-request-id", b"abc"),
        (b"x-lower", b"1"),
    ]


def test_an_http_1_0_status_line_is_read() -> None:
    answer = parse_response_head(_head(b"HTTP/1.0 404 Not Found"))
    assert (answer.http_version, answer.status_code, answer.reason, answer.headers) == (
        b"1.0",
        404,
        b"Not Found",
        [],
    )


@pytest.mark.parametrize("line", [b"HTTP/1.1 200", b"HTTP/1.1 200 "], ids=["no-space", "empty-reason"])
def test_a_status_line_without_a_reason_has_an_empty_one(line: bytes) -> None:
    answer = parse_response_head(_head(line))
    assert (answer.status_code, answer.reason) == (200, b"")


def test_a_reason_may_hold_tabs_spaces_and_bytes_past_ascii() -> None:
    assert parse_response_head(_head(b"HTTP/1.1 200 \tquite\xe9 ok ")).reason == b"\tquite\xe9 ok "


@pytest.mark.parametrize("version", [b"2.0", b"0.9", b"1.2", b"3.0"])
def test_a_response_in_an_http_version_other_than_1_0_or_1_1_is_refused(version: bytes) -> None:
    with pytest.raises(HeadError, match=r"not HTTP/1\.x"):
        parse_response_head(_head(b"HTTP/" + version + b" 200 OK"))


@pytest.mark.parametrize(
    "line",
    [
        b"SPDY/9 nonsense",
        b"HTTP/2 200 OK",
        b"HTTP/1.1 20 OK",
        b"HTTP/1.1 2000 OK",
        b"HTTP/1.1 abc OK",
        b"http/1.1 200 OK",
        b"HTTP/1.1  200 OK",
        b" HTTP/1.1 200 OK",
        b"HTTP/1.1 200 O\x00K",
        b"HTTP/1.1 200 O\x7fK",
        b"",
    ],
    ids=[
        "not-http",
        "no-minor-version",
        "two-digits",
        "four-digits",
        "not-a-number",
        "lower-case-name",
        "double-space",
        "leading-space",
        "nul-in-reason",
        "del-in-reason",
        "empty",
    ],
)
def test_a_malformed_status_line_is_refused(line: bytes) -> None:
    with pytest.raises(HeadError, match="malformed status line"):
        parse_response_head(_head(line))


@pytest.mark.parametrize("code", [b"000", b"099"])
def test_a_status_code_below_100_is_refused(code: bytes) -> None:
    with pytest.raises(HeadError):
        parse_response_head(_head(b"HTTP/1.1 " + code + b" Odd"))


@pytest.mark.parametrize("fold", [b" continued", b"\tcontinued"], ids=["space", "tab"])
def test_a_folded_header_line_is_refused(fold: bytes) -> None:
    with pytest.raises(HeadError, match="folded"):
        parse_response_head(_head(b"HTTP/1.1 200 OK", b"X-Long: first", fold))


@pytest.mark.parametrize(
    "line",
    [b"No-Colon-Here", b"X-Name : value", b": no name", b"X Name: value", b"X-\xe9: value"],
    ids=["colon-less", "space-before-colon", "empty-name", "space-in-name", "non-ascii-name"],
)
def test_a_header_line_without_a_colon_or_with_a_name_that_is_not_a_token_is_refused(line: bytes) -> None:
    with pytest.raises(HeadError, match="malformed header line"):
        parse_response_head(_head(b"HTTP/1.1 200 OK", line))


@pytest.mark.parametrize(
    "value",
    [b"a\x00b", b"a\x1bb", b"a\x7fb", b"a\nb", b"a\rb"],
    ids=["nul", "escape", "del", "bare-lf", "bare-cr"],
)
def test_a_control_character_in_a_header_value_is_refused(value: bytes) -> None:
    with pytest.raises(HeadError):
        parse_response_head(_head(b"HTTP/1.1 200 OK", b"X-Value: " + value))


def test_whitespace_around_a_value_is_stripped_and_inside_it_kept() -> None:
    answer = parse_response_head(
        _head(b"HTTP/1.1 200 OK", b"X-A:   spaced  out \t", b"X-B:\tv", b"X-C:", b"X-D: \xe9t\xe9")
    )
    assert answer.headers == [(b"X-A", b"spaced  out"), (b"X-B", b"v"), (b"X-C", b""), (b"X-D", b"\xe9t\xe9")]


@pytest.mark.parametrize(
    "lines",
    [
        [b"Content-Length: 5", b"Content-Length: 5"],
        [b"Content-Length: 5, 5"],
        [b"Content-Length: 5,5", b"content-length:  5 "],
    ],
    ids=["two-headers", "a-list", "both"],
)
def test_equal_content_lengths_collapse_to_one_header(lines: list[bytes]) -> None:
    answer = parse_response_head(_head(b"HTTP/1.1 200 OK", b"X-Before: 1", *lines, b"X-After: 2"))
    assert answer.headers == [(b"X-Before", b"1"), (b"Content-Length", b"5"), (b"X-After", b"2")]


@pytest.mark.parametrize(
    "lines",
    [
        [b"Content-Length: 5", b"Content-Length: 6"],
        [b"Content-Length: 5, 6"],
        [b"Content-Length: 5", b"Content-Length: 5, 7"],
    ],
    ids=["two-headers", "a-list", "a-list-after-a-header"],
)
def test_content_lengths_that_disagree_are_refused(lines: list[bytes]) -> None:
    with pytest.raises(HeadError, match="disagree"):
        parse_response_head(_head(b"HTTP/1.1 200 OK", *lines))


@pytest.mark.parametrize(
    "value",
    [b"abc", b"-1", b"+5", b"5.0", b"0x10", b"", b"1" * 19, b"\xd9\xa5"],
    ids=["letters", "negative", "plus", "decimal", "hex", "empty", "too-long", "non-ascii-digit"],
)
def test_a_content_length_that_is_not_a_plain_number_is_refused(value: bytes) -> None:
    with pytest.raises(HeadError, match="malformed Content-Length"):
        parse_response_head(_head(b"HTTP/1.1 200 OK", b"Content-Length: " + value))


def test_chunked_is_the_one_transfer_coding_accepted_in_any_case() -> None:
    for value in (b"chunked", b"Chunked", b"CHUNKED"):
        answer = parse_response_head(_head(b"HTTP/1.1 200 OK", b"Transfer-Encoding: " + value))
        assert answer.lowered() == [(b"transfer-encoding", value)]


@pytest.mark.parametrize("value", [b"gzip", b"gzip, chunked", b"identity", b"chunked, chunked", b"compress"])
def test_a_transfer_coding_other_than_chunked_is_refused(value: bytes) -> None:
    with pytest.raises(HeadError, match="transfer coding other than chunked"):
        parse_response_head(_head(b"HTTP/1.1 200 OK", b"Transfer-Encoding: " + value))


def test_informational_heads_are_parsed_like_final_ones() -> None:
    assert parse_response_head(_head(b"HTTP/1.1 100 Continue")).status_code == 100
    early = parse_response_head(_head(b"HTTP/1.1 103 Early Hints", b"Link: </s.css>; rel=preload"))
    assert (early.status_code, early.headers) == (103, [(b"Link", b"</s.css>; rel=preload")])


# ---------------------------------------------------------------------------------------------------------
# Where a head ends


def test_head_end_is_just_past_the_blank_line_and_ignores_what_follows() -> None:
    head = _head(b"HTTP/1.1 200 OK", b"Content-Length: 4")
    assert head_end(head) == len(head)
    assert head_end(head + b"body") == len(head)
    assert head_end(bytearray(head + b"HTTP/1.1 200 OK\r\n\r\n")) == len(head)


@pytest.mark.parametrize(
    "partial",
    [
        b"",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\n\r",
        b"HTTP/1.1 200 OK\r\nX: 1\r\n",
    ],
)
def test_head_end_is_minus_one_while_the_head_is_incomplete(partial: bytes) -> None:
    assert head_end(partial) == -1


def test_the_first_blank_line_ends_the_head() -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"
    end = head_end(data)
    assert parse_response_head(data[:end]).status_code == 100
    assert head_end(data[end:]) == len(data) - end


def test_a_head_may_be_as_long_as_64_kib_and_no_longer() -> None:
    assert MAX_HEAD == 64 * 1024
    status = b"HTTP/1.1 200 OK\r\nX-Pad: "
    longest = status + b"a" * (MAX_HEAD - len(status) - 4) + b"\r\n\r\n"
    assert head_end(longest) == MAX_HEAD
    assert parse_response_head(longest).headers[0][0] == b"X-Pad"
    too_long = status + b"a" * (MAX_HEAD - len(status) - 3) + b"\r\n\r\n"
    with pytest.raises(HeadError, match="longer than 64 KiB"):
        head_end(too_long)


def test_an_incomplete_head_past_64_kib_is_refused_without_waiting_for_its_end() -> None:
    assert head_end(b"x" * MAX_HEAD) == -1
    with pytest.raises(HeadError, match="longer than 64 KiB"):
        head_end(b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * MAX_HEAD)
