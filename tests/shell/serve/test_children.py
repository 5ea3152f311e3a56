"""The HTTP service and subagents: a session's view names its children and a child's names the call that
ran it; a child's event stream is read like any session's."""

from __future__ import annotations

from pathlib import Path

from sampler.fake import FakeProvider
from tests._waiting import wait_until
from tests.shell.subagents._family import Requests

from ._server import decode, running
from ._sse import sse_events

TERMINAL = {"turn_completed", "turn_failed", "turn_cancelled"}


def test_a_parent_lists_its_children_and_each_child_its_parent_and_stream(tmp_path: Path) -> None:
    with FakeProvider(Requests().script) as provider, running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "p"})
        client.post("/v1/sessions/p/prompts", json={"text": "fan general:a general:b"})
        assert wait_until(lambda: _ended(decode(client.get("/v1/sessions/p"))), 30)
        parent = decode(client.get("/v1/sessions/p"))
        children = parent["children"]
        listed = {view["id"]: view for view in decode(client.get("/v1/sessions"))["sessions"]}
        child = decode(client.get(f"/v1/sessions/{children[0]}"))
        stream = []
        for event, _last_id, data in sse_events(
            client, f"/v1/sessions/{children[0]}/events", params={"after": 0}
        ):
            stream.append((event, data))
            if event in TERMINAL:
                break
    assert len(children) == 2 and parent["parent"] is None
    assert listed["p"]["children"] == children
    assert child["parent"]["session"] == "p" and child["parent"]["turn"] == 1
    assert child["parent"]["profile"] == "general" and child["status"] == "closed"
    assert [event for event, _ in stream] == ["turn_started", "turn_completed"]
    assert stream[-1][1]["text"] in ("a done", "b done")


def _ended(view: dict) -> bool:
    return view["turns"] == 1 and view["status"] == "idle"
