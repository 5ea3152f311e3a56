"""A reader's bounded buffer: text coalesced, then dropped behind a gap; stored events and tool notices
never dropped; entries in order; a wake when it stops being empty."""

from __future__ import annotations

from shell.serve._buffer import BufferedText, Gap, Notice, Stored, StreamBuffer


def make(limit=100):
    wakes = []
    return StreamBuffer(limit, lambda: wakes.append(1)), wakes


def test_adjacent_text_of_one_turn_is_coalesced():
    buffer, _ = make()
    for piece in ["a", "b", "c"]:
        buffer.delta("s", 1, piece)
    buffer.delta("s", 2, "d")
    buffer.delta("t", 2, "e")
    assert buffer.take() == [
        BufferedText("s", 1, "abc"),
        BufferedText("s", 2, "d"),
        BufferedText("t", 2, "e"),
    ]


def test_text_past_the_budget_is_dropped_behind_one_gap_and_stored_events_stay():
    buffer, _ = make(limit=10)
    buffer.delta("s", 1, "12345678")
    buffer.stored("s")
    buffer.delta("s", 1, "too much")
    buffer.notice("s", "permission")
    buffer.delta("s", 1, "more")
    buffer.stored("s")
    buffer.stored("s")
    assert buffer.text_bytes == 8
    assert buffer.take() == [
        BufferedText("s", 1, "12345678"),
        Stored("s", 1),
        Gap(12),
        Notice("s", "permission"),
        Stored("s", 2),
    ]
    assert buffer.dropped_bytes == 12
    buffer.delta("s", 1, "fits again")
    assert buffer.take() == [BufferedText("s", 1, "fits again")]


def test_the_text_held_never_exceeds_the_budget_whatever_comes():
    buffer, _ = make(limit=1000)
    for index in range(10_000):
        buffer.delta("s", index % 3, "é" * (index % 7))
        if index % 50 == 0:
            buffer.stored("s")
        assert buffer.text_bytes <= 1000
    entries = buffer.take()
    assert sum(e.count for e in entries if isinstance(e, Stored)) == 200
    assert sum(1 for e in entries if isinstance(e, Gap)) == 1


def test_wake_is_called_once_until_taken():
    buffer, wakes = make()
    buffer.delta("s", 1, "a")
    buffer.stored("s")
    assert wakes == [1]
    buffer.take()
    buffer.stored("s")
    assert wakes == [1, 1]
    assert buffer.take() == [Stored("s", 1)]
    assert buffer.take() == []
