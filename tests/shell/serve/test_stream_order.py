"""A session's stream as a function of the store and the announcements it hears (on trio; the stream
reads the store in worker threads, so these run on the real clock, each wait bounded):
replay after the cursor, then stored events in seq order with the streamed text kept between them,
nothing twice; stored events announced before they are stored still arrive; a closed session ends."""

from __future__ import annotations

import msgspec
import pytest
import trio

from shell import events as ev
from shell.serve._frames import stored_dict
from shell.serve._stream import session_events
from shell.serve._wakeup import Inbox
from shell.store import SessionStore
from shell.usage import TurnUsage

NO_USAGE = msgspec.json.decode(msgspec.json.encode(TurnUsage()))
"""How a turn end without usage (one written by the test) is streamed."""


@pytest.fixture
def store(tmp_path):
    with SessionStore.open(tmp_path / "s.db") as opened:
        opened.create_session("s1", workspace=str(tmp_path), model="m")
        yield opened


def parse(chunk: bytes) -> tuple[str, str | None, dict]:
    fields = dict(line.split(": ", 1) for line in chunk.decode().strip().split("\n"))
    return fields["event"], fields.get("id"), msgspec.json.decode(fields["data"])


async def take(frames, count):
    got = []
    with trio.fail_after(30):
        async for chunk in frames:
            if chunk.startswith(b":"):
                continue
            got.append(parse(chunk))
            if len(got) == count:
                return got
    return got


@pytest.mark.trio
async def test_replay_starts_after_the_cursor_then_live_events_follow_in_seq_order(store):
    store.append_event("s1", 1, ev.TurnStarted("s1", 1, "one"))
    store.append_event("s1", 1, ev.TurnCompleted("s1", 1, "done", 1))
    inbox = Inbox(1024)
    frames = session_events(store, "s1", 1, inbox, is_closed=lambda: False, poll=0.05)
    assert await take(frames, 1) == [
        (
            "turn_completed",
            "2",
            {
                "type": "turn_completed",
                "session": "s1",
                "turn": 1,
                "text": "done",
                "steps": 1,
                "usage": NO_USAGE,
                "finish_reason": "stop",
            },
        )
    ]
    store.append_event("s1", 2, ev.TurnStarted("s1", 2, "two"))
    inbox.buffer.stored("s1")
    inbox.buffer.delta("s1", 2, "hel")
    inbox.buffer.delta("s1", 2, "lo")
    store.append_event("s1", 2, ev.TurnCompleted("s1", 2, "hello", 1))
    inbox.buffer.stored("s1")
    got = await take(frames, 3)
    assert [(event, event_id) for event, event_id, _ in got] == [
        ("turn_started", "3"),
        ("text_delta", None),
        ("turn_completed", "4"),
    ]
    assert got[1][2]["text"] == "hello"
    await frames.aclose()


@pytest.mark.trio
async def test_an_event_announced_before_it_is_stored_arrives_by_the_periodic_read(store):
    inbox = Inbox(1024)
    frames = session_events(store, "s1", 0, inbox, is_closed=lambda: False, poll=1.0)
    inbox.buffer.stored("s1")  # announced; the write comes later

    async def write_later():
        await trio.sleep(0.5)
        store.append_event("s1", 1, ev.TurnCancelled("s1", 1, "interrupted"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_later)
        got = await take(frames, 1)
    assert got == [
        (
            "turn_cancelled",
            "1",
            {
                "type": "turn_cancelled",
                "session": "s1",
                "turn": 1,
                "reason": "interrupted",
                "usage": NO_USAGE,
            },
        )
    ]
    await frames.aclose()


@pytest.mark.trio
async def test_a_gap_names_the_last_stored_id_and_a_closed_session_ends_its_stream(store):
    store.append_event("s1", 1, ev.TurnStarted("s1", 1, "one"))
    inbox = Inbox(1024)
    closed = []
    frames = session_events(store, "s1", 0, inbox, is_closed=lambda: bool(closed), poll=0.05)
    assert [e for e, _, _ in await take(frames, 1)] == ["turn_started"]
    inbox.buffer.delta("s1", 1, "x" * 1000)
    inbox.buffer.delta("s1", 1, "y" * 100)  # over the budget: dropped
    got = await take(frames, 2)
    assert [(e, i) for e, i, _ in got] == [("text_delta", None), ("gap", None)]
    assert got[1][2] == {"type": "gap", "last_id": "1", "dropped_bytes": 100}
    closed.append(True)
    assert await take(frames, 10) == []  # the stream ended by itself


def test_stored_events_read_as_run_json_prints_them(store):
    event = ev.ToolCallFinished("s1", 1, "c1", "shell", False, "ok", "out")
    store.append_event("s1", 1, event)
    (stored,) = store.load_events("s1")
    assert stored_dict(stored) == ev.event_to_json_dict(event)
