"""Event streams: the stored log replayed after a cursor then live, with no gap and no duplicate at the
seam; text deltas live and without an id; permission requests answered through the API; every session
in one stream; a reader that stops reading is disconnected while the others get everything."""

from __future__ import annotations

import socket
import threading

import msgspec

from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from shell.config import ServeSettings
from shell.store import SessionStore
from tests._waiting import wait_until
from tests.shell.serve._server import TOKEN, ask_for, decode, running
from tests.shell.serve._sse import raw_frames, sse_events

TERMINAL = {"turn_completed", "turn_failed", "turn_cancelled"}


def slow_task(rounds: int = 3) -> Script:
    steps = [ToolStep([("shell", {"command": f"sleep 0.3; echo step {n}"})]) for n in range(rounds)]
    return Script.task([*steps, FinalAnswer("all done", chunks=8)])


def stored(tmp_path, session_id):
    with SessionStore.open(tmp_path / "store.db") as store:
        return [(e.seq, msgspec.json.decode(e.body)) for e in store.load_events(session_id)]


def test_a_live_turn_streams_typed_events_and_text_deltas_without_ids(tmp_path):
    with FakeProvider(Script.echo(chunks=6)) as provider, running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        frames = []
        for frame in listen_then_prompt(client, "/v1/sessions/s1/events", "s1", "hello"):
            frames.append(frame)
            if frame.event in TERMINAL:
                break
        # The stream was opened before the prompt: everything came live.
        assert frames[0].event == "turn_started"
        deltas = [f for f in frames if f.event == "text_delta"]
        assert deltas and all(f.id is None for f in deltas)
        assert "".join(f.data["text"] for f in deltas) == "echo: hello"
        stored_frames = [f for f in frames if f.event != "text_delta"]
        assert [f.event for f in stored_frames] == ["turn_started", "turn_completed"]
        assert [f.id for f in stored_frames] == ["1", "2"]
        ended = dict(stored_frames[1].data)
        assert ended.pop("usage")["steps"]["reported"] == 1
        assert ended == {
            "type": "turn_completed",
            "session": "s1",
            "turn": 1,
            "text": "echo: hello",
            "steps": 1,
            "finish_reason": "stop",
        }


def listen_then_prompt(client, url, session_id, text, **kwargs):
    """Open the stream, then send the prompt (from another thread, once the stream answered)."""
    started = threading.Event()

    def prompt():
        assert started.wait(10)
        client.post(f"/v1/sessions/{session_id}/prompts", json={"text": text})

    sender = threading.Thread(target=prompt, daemon=True)
    sender.start()
    try:
        yield from raw_frames(client, url, started, **kwargs)
    finally:
        started.set()


def test_replay_after_a_cursor_then_live_has_no_gap_and_no_duplicate(tmp_path):
    with FakeProvider(slow_task()) as provider, running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        client.post("/v1/sessions/s1/prompts", json={"text": "first"})
        received: list[tuple[str, dict]] = []
        # First connection: from the start, dropped right after the first tool call begins.
        for event, last_id, data in sse_events(client, "/v1/sessions/s1/events", params={"after": 0}):
            if event == "text_delta":
                continue
            received.append((last_id, data))
            if event == "tool_call_started":
                break
        cut = received[-1][0]
        assert decode(client.get("/v1/sessions/s1"))["status"] == "in_turn"  # disconnected mid-turn
        # Second connection: resumes after the last id it had.
        headers = {"Last-Event-ID": cut}
        for event, last_id, data in sse_events(client, "/v1/sessions/s1/events", headers=headers):
            if event == "text_delta":
                continue
            received.append((last_id, data))
            if event in TERMINAL:
                break
        log = stored(tmp_path, "s1")
        assert [int(i) for i, _ in received] == [seq for seq, _ in log]
        assert [d["type"] for _, d in received][-1] == "turn_completed"
        assert [d["turn"] for _, d in received] == [1] * len(log)


def test_after_replays_every_stored_event_and_a_bad_cursor_is_400(tmp_path):
    with FakeProvider(Script.echo()) as provider, running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        for count, text in ((2, "one"), (4, "two")):  # each sent once the turn before ended: none waits
            client.post("/v1/sessions/s1/prompts", json={"text": text})
            assert wait_until(lambda count=count: len(stored(tmp_path, "s1")) == count, 10)
        got = []
        for frame in raw_frames(client, "/v1/sessions/s1/events", params={"after": 1}):
            got.append((frame.id, frame.event))
            if len(got) == 3:
                break
        assert got == [("2", "turn_completed"), ("3", "turn_started"), ("4", "turn_completed")]
        bad = client.get("/v1/sessions/s1/events", params={"after": "x"})
        assert bad.status_code == 400
        assert decode(bad)["kind"] == "invalid_cursor"


def test_a_closed_sessions_stream_replays_and_ends(tmp_path):
    with FakeProvider(Script.echo()) as provider, running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        client.post("/v1/sessions/s1/prompts", json={"text": "one"})
        assert wait_until(lambda: len(stored(tmp_path, "s1")) == 2, 10)
        client.delete("/v1/sessions/s1")
        frames = list(raw_frames(client, "/v1/sessions/s1/events", params={"after": 0}))
        assert [f.event for f in frames] == ["turn_started", "turn_completed"]


def test_a_permission_request_is_streamed_answered_once_and_then_stale(tmp_path):
    script = Script.task([ToolStep([("shell", {"command": "echo allowed"})]), FinalAnswer("ran it")])
    with (
        FakeProvider(script) as provider,
        running(provider, tmp_path, permissions=ask_for("shell")) as (_server, client),
    ):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        seen = []
        for frame in listen_then_prompt(client, "/v1/sessions/s1/events", "s1", "run it"):
            seen.append(frame)
            if frame.event == "permission_requested":
                assert frame.id is None
                request_id = frame.data["request_id"]
                pending = decode(client.get("/v1/sessions/s1"))["pending_permissions"]
                assert [p["request_id"] for p in pending] == [request_id]
                answer = client.post(
                    f"/v1/sessions/s1/permissions/{request_id}", json={"decision": "allow_once"}
                )
                assert answer.status_code == 200
                assert decode(answer) == {"request_id": request_id, "decision": "allow_once"}
            if frame.event in TERMINAL:
                break
        assert seen[-1].event == "turn_completed"
        finished = next(f for f in seen if f.event == "tool_call_finished")
        assert finished.data["is_error"] is False and "allowed" in finished.data["preview"]
        again = client.post(f"/v1/sessions/s1/permissions/{request_id}", json={"decision": "deny"})
        assert again.status_code == 409
        assert decode(again)["kind"] == "stale_permission"
        bad = client.post(f"/v1/sessions/s1/permissions/{request_id}", json={"decision": "maybe"})
        assert bad.status_code == 400


def test_every_sessions_stream_resumes_exactly_after_its_cursor(tmp_path):
    with FakeProvider(slow_task(rounds=2)) as provider, running(provider, tmp_path) as (_server, client):
        for sid in ("a", "b"):
            client.post("/v1/sessions", json={"workspace": sid, "id": sid})
        first: list[tuple[str, str]] = []
        ended: set[str] = set()
        for frame in listen_then_prompt(client, "/v1/events", "a", "go"):
            if frame.event == "text_delta":
                continue
            if not first:
                client.post("/v1/sessions/b/prompts", json={"text": "go"})
            first.append((frame.id, frame.event))
            if len(first) == 4:
                break
        second: list[tuple[str, str]] = []
        for frame in raw_frames(client, "/v1/events", headers={"Last-Event-ID": first[-1][0]}):
            if frame.event == "text_delta":
                continue
            second.append((frame.id, frame.event))
            if frame.event in TERMINAL:
                ended.add(frame.data["session"])
            if ended == {"a", "b"}:
                break
        ids = [i for i, _ in first + second]
        assert len(ids) == len(set(ids))
        expected = {f"{sid}/{seq}" for sid in ("a", "b") for seq, _ in stored(tmp_path, sid)}
        assert set(ids) == expected
        for sid in ("a", "b"):
            mine = [int(i.split("/")[1]) for i in ids if i.startswith(f"{sid}/")]
            assert mine == sorted(mine)
        bad = client.get("/v1/events", headers={"Last-Event-ID": "a/999"})
        assert bad.status_code == 400
        assert decode(bad)["kind"] == "invalid_cursor"


def test_a_reader_that_stops_reading_is_disconnected_and_the_others_get_every_end(tmp_path):
    long_answer = FinalAnswer("abcdefgh" * 40_000)
    settings = ServeSettings(port=0, write_timeout=1.0, stream_buffer_bytes=4096)
    with (
        FakeProvider(Script(lambda _: long_answer), chunk_chars=2000) as provider,
        running(provider, tmp_path, serve=settings) as (server, client),
    ):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", server.port))
        request = f"GET /v1/sessions/s1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        stalled.sendall(request.encode())
        taps = server.context.taps
        assert wait_until(lambda: taps.reader_count() == 1, 5)
        ends = 0
        for frame in listen_then_prompt(client, "/v1/sessions/s1/events", "s1", "long"):
            if frame.event in TERMINAL:
                ends += 1
                if ends == 4:
                    break
                client.post("/v1/sessions/s1/prompts", json={"text": "again"})
        assert ends == 4
        assert wait_until(lambda: taps.reader_count() == 0, 15)  # the stalled reader was cut off
        stalled.settimeout(5)
        received = b""
        try:
            while chunk := stalled.recv(65536):
                received += chunk
        except OSError:
            pass  # reset by the server: also a disconnection
        stalled.close()
        assert received.startswith(b"HTTP/1.1 200")
        assert len(received) < 8 * 40_000 * 4  # far less than was streamed
