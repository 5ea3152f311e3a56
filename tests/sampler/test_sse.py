"""The SSE parser: events out of bytes, whatever the chunking."""

from __future__ import annotations

import random

import pytest

from sampler._sse import SseEvent, SseParser

SAMPLE = (
    b": a comment first\n"
    b"data: one\n"
    b"\n"
    b"event: named\r\n"
    b"data: two\r\n"
    b"data:  indented three\r\n"
    b"\r\n"
    b"id: 7\r"
    b"retry: 1500\r"
    b"data: caf\xc3\xa9 \xe2\x9c\x93\r"
    b"\r"
    b"event: only-a-name\n"
    b"\n"
    b"data\n"
    b"\n"
    b"data: [DONE]\n\n"
)
SAMPLE_EVENTS = [
    SseEvent(None, "one"),
    SseEvent("named", "two\n indented three"),
    SseEvent(None, "café ✓"),
    SseEvent(None, ""),
    SseEvent(None, "[DONE]"),
]


def parse(chunks: list[bytes]) -> list[SseEvent]:
    parser = SseParser()
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return events


def test_sample_stream_in_one_chunk_gives_every_event():
    assert parse([SAMPLE]) == SAMPLE_EVENTS


def test_every_single_split_point_gives_the_same_events():
    for cut in range(len(SAMPLE) + 1):
        assert parse([SAMPLE[:cut], SAMPLE[cut:]]) == SAMPLE_EVENTS, cut


def test_every_pair_of_split_points_gives_the_same_events():
    for first in range(0, len(SAMPLE) + 1, 3):
        for second in range(first, len(SAMPLE) + 1):
            chunks = [SAMPLE[:first], SAMPLE[first:second], SAMPLE[second:]]
            assert parse(chunks) == SAMPLE_EVENTS, (first, second)


def test_byte_by_byte_feeding_gives_the_same_events():
    assert parse([SAMPLE[i : i + 1] for i in range(len(SAMPLE))]) == SAMPLE_EVENTS


def test_random_chunkings_give_the_same_events():
    rng = random.Random(1234)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(SAMPLE)), rng.randint(1, 12)))
        chunks = [SAMPLE[a:b] for a, b in zip([0, *cuts], [*cuts, len(SAMPLE)], strict=True)]
        assert parse(chunks) == SAMPLE_EVENTS


def test_events_are_returned_as_soon_as_their_blank_line_arrives():
    parser = SseParser()
    assert parser.feed(b"data: a\n") == []
    assert parser.feed(b"\n") == [SseEvent(None, "a")]


def test_a_lone_cr_ending_a_chunk_dispatches_without_waiting_for_the_next_chunk():
    parser = SseParser()
    assert parser.feed(b"data: a\r\r") == [SseEvent(None, "a")]
    assert parser.feed(b"\ndata: b\r\n\r\n") == [SseEvent(None, "b")]


def test_id_and_retry_are_recorded_on_the_parser():
    parser = SseParser()
    parser.feed(b"id: abc\nretry: 250\ndata: x\n\n")
    assert (parser.last_event_id, parser.retry) == ("abc", 250)


def test_invalid_retry_and_id_with_nul_are_ignored():
    parser = SseParser()
    parser.feed(b"id: ok\nretry: 10\n\nid: bad\x00\nretry: 1.5\nretry: x\ndata: y\n\n")
    assert (parser.last_event_id, parser.retry) == ("ok", 10)


def test_event_name_does_not_leak_into_the_next_event():
    assert parse([b"event: a\ndata: 1\n\ndata: 2\n\n"]) == [SseEvent("a", "1"), SseEvent(None, "2")]


def test_an_empty_event_name_means_no_name():
    assert parse([b"event:\ndata: 1\n\n"]) == [SseEvent(None, "1")]


def test_unknown_fields_and_comments_are_ignored():
    assert parse([b"foo: bar\n:comment\n: another\ndata: z\nbaz\n\n"]) == [SseEvent(None, "z")]


def test_only_one_leading_space_of_a_value_is_removed():
    assert parse([b"data:x\n\ndata:   y\n\n"]) == [SseEvent(None, "x"), SseEvent(None, "  y")]


def test_a_leading_byte_order_mark_is_skipped_even_when_split():
    stream = b"\xef\xbb\xbfdata: bom\n\n"
    for cut in range(len(stream) + 1):
        assert parse([stream[:cut], stream[cut:]]) == [SseEvent(None, "bom")]


def test_invalid_utf8_is_replaced_not_raised():
    assert parse([b"data: \xff\xfeok\xc3\n\n"]) == [SseEvent(None, "\ufffd\ufffdok\ufffd")]


def test_utf8_sequence_split_across_chunks_is_decoded_whole():
    assert parse([b"data: \xe2\x9c", b"\x93\n\n"]) == [SseEvent(None, "✓")]


def test_close_dispatches_an_event_cut_before_its_blank_line():
    parser = SseParser()
    assert parser.feed(b"data: [DONE]\n") == []
    assert parser.close() == [SseEvent(None, "[DONE]")]


def test_close_dispatches_a_last_line_without_terminator():
    parser = SseParser()
    assert parser.feed(b"data: tail") == []
    assert parser.close() == [SseEvent(None, "tail")]


def test_close_without_pending_data_gives_nothing():
    parser = SseParser()
    parser.feed(b"data: a\n\nevent: x\n")
    assert parser.close() == []


@pytest.mark.parametrize(
    "garbage",
    [b"\x00\x01\x02", b"\n\n\n\r\r\r", b"::::\n", b"data" * 1000, bytes(range(256)) * 4],
)
def test_garbage_never_raises(garbage: bytes):
    parser = SseParser()
    for i in range(0, len(garbage), 7):
        for event in parser.feed(garbage[i : i + 7]):
            assert isinstance(event.data, str)
    parser.close()


def test_many_events_in_one_chunk_come_out_in_order():
    stream = b"".join(b"data: %d\n\n" % i for i in range(1000))
    assert [e.data for e in parse([stream])] == [str(i) for i in range(1000)]
