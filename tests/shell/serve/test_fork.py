"""``POST /v1/sessions/{id}/fork`` and ``/rewind``: the new session's record, its parent, the archived
source, and what each refuses, against a real server, host, store and the embedded provider."""

from __future__ import annotations

import httpx
import pytest

from sampler.fake import FakeProvider, Script
from tests._waiting import wait_until
from tests.shell.serve._server import decode, running
from tests.shell.serve._sse import raw_frames


@pytest.fixture
def provider():
    with FakeProvider(Script.echo(), strict_history=True) as fake:
        yield fake


def three_turns(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"workspace": "w", "id": "src"})
    for n in range(1, 4):
        assert decode(client.post("/v1/sessions/src/prompts", json={"text": f"say {n}"})) == {"turn": n}
        assert wait_until(lambda: decode(client.get("/v1/sessions/src"))["status"] == "idle", 10)


def test_a_fork_answers_the_new_sessions_record_with_its_parent(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        three_turns(client)

        forked = client.post("/v1/sessions/src/fork", json={"at_turn": 2, "id": "f2"})

        assert forked.status_code == 201
        body = decode(forked)
        assert (body["id"], body["turns"], body["status"]) == ("f2", 2, "idle")
        assert body["forked_from"] == {"session": "src", "turn": 2}
        assert body["workspace"] == decode(client.get("/v1/sessions/src"))["workspace"]
        messages = decode(client.get("/v1/sessions/f2/history"))["messages"]
        assert [m["message"].get("text") for m in messages if m["message"]["type"] == "AssistantMessage"] == [
            "echo: say 1",
            "echo: say 2",
        ]
        assert decode(client.post("/v1/sessions/f2/prompts", json={"text": "next"})) == {"turn": 3}
        assert wait_until(lambda: decode(client.get("/v1/sessions/f2"))["status"] == "idle", 10)
        assert len(decode(client.get("/v1/sessions/f2/history"))["messages"]) == 6
        assert decode(client.get("/v1/sessions/src"))["forked_from"] is None

        frames = []
        for frame in raw_frames(client, "/v1/sessions/f2/events", params={"after": 0}):
            frames.append(frame)
            if len(frames) == 6:
                break
        assert [(f.id, f.event, f.data["turn"], f.data["session"]) for f in frames] == [
            ("1", "turn_started", 1, "f2"),
            ("2", "turn_completed", 1, "f2"),
            ("3", "turn_started", 2, "f2"),
            ("4", "turn_completed", 2, "f2"),
            ("5", "turn_started", 3, "f2"),
            ("6", "turn_completed", 3, "f2"),
        ]

        whole = decode(client.post("/v1/sessions/src/fork", json={"workspace": "other"}))
        assert whole["turns"] == 3 and whole["workspace"].endswith("/root/other")


def test_a_fork_refuses_a_bad_turn_a_taken_id_an_escaping_workspace_and_an_unknown_source(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        three_turns(client)
        late = client.post("/v1/sessions/src/fork", json={"at_turn": 4})
        taken = client.post("/v1/sessions/src/fork", json={"id": "src"})
        escaping = client.post("/v1/sessions/src/fork", json={"workspace": "../out"})
        unknown = client.post("/v1/sessions/nope/fork", json={})
        malformed = client.post("/v1/sessions/src/fork", json={"at": 1})

        assert (late.status_code, decode(late)["kind"]) == (400, "invalid_turn")
        assert "last converged turn is 3" in decode(late)["message"]
        assert (taken.status_code, decode(taken)["kind"]) == (409, "session_exists")
        assert (escaping.status_code, decode(escaping)["kind"]) == (403, "workspace_refused")
        assert (unknown.status_code, decode(unknown)["kind"]) == (404, "not_found")
        assert (malformed.status_code, decode(malformed)["kind"]) == (400, "invalid_body")
        assert [s["id"] for s in decode(client.get("/v1/sessions"))["sessions"]] == ["src"]


def test_a_rewind_archives_the_source_which_then_refuses_prompts(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        three_turns(client)

        rewound = client.post("/v1/sessions/src/rewind", json={"to_turn": 1, "id": "back"})

        assert rewound.status_code == 201
        assert decode(rewound)["forked_from"] == {"session": "src", "turn": 1}
        listed = {s["id"]: (s["status"], s["active"]) for s in decode(client.get("/v1/sessions"))["sessions"]}
        assert listed["src"] == ("archived", False)
        refused = client.post("/v1/sessions/src/prompts", json={"text": "more"})
        assert (refused.status_code, decode(refused)["kind"]) == (409, "session_archived")
        again = client.post("/v1/sessions/src/rewind", json={"to_turn": 1})
        assert (again.status_code, decode(again)["kind"]) == (409, "session_archived")
        assert decode(client.post("/v1/sessions/back/prompts", json={"text": "anew"})) == {"turn": 2}
        missing = client.post("/v1/sessions/back/rewind", json={})
        assert (missing.status_code, decode(missing)["kind"]) == (400, "invalid_body")


def test_the_openapi_document_describes_fork_and_rewind(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        document = decode(client.get("/openapi.json"))
    for route in ("/v1/sessions/{id}/fork", "/v1/sessions/{id}/rewind"):
        answers = document["paths"][route]["post"]["responses"]
        assert set(answers) >= {"201", "400", "404", "409"}
    schemas = document["components"]["schemas"]
    assert schemas["RewindBody"]["required"] == ["to_turn"]
    assert set(schemas["ForkBody"]["properties"]) == {"at_turn", "workspace", "id"}
    assert "forked_from" in schemas["SessionView"]["properties"]
