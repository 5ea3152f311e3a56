"""The HTTP API, endpoint by endpoint, against a real server, host, store and the embedded provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from sampler.fake import FakeProvider, Script
from shell.config import ServeSettings
from tests._waiting import wait_until
from tests.shell.serve._server import decode, running


@pytest.fixture
def provider():
    with FakeProvider(Script.echo()) as fake:
        yield fake


def test_healthz_needs_no_token_and_says_ok(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        answer = client.get("/healthz", headers={"Authorization": ""})
        assert answer.status_code == 200
        assert decode(answer) == {"status": "ok"}


def test_a_session_is_opened_listed_described_and_closed(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        created = client.post("/v1/sessions", json={"workspace": "proj", "id": "s1"})
        assert created.status_code == 201
        body = decode(created)
        assert body["id"] == "s1"
        assert body["status"] == "idle"
        assert body["turns"] == 0
        assert Path(body["workspace"]) == (tmp_path / "root" / "proj").resolve()
        assert Path(body["workspace"]).is_dir()

        generated = decode(client.post("/v1/sessions", json={"workspace": "other"}))
        listed = decode(client.get("/v1/sessions"))["sessions"]
        assert sorted(s["id"] for s in listed) == sorted(["s1", generated["id"]])

        assert decode(client.get("/v1/sessions/s1"))["active"] is True
        closed = client.delete("/v1/sessions/s1")
        assert closed.status_code == 200
        assert decode(closed)["status"] == "closed"
        assert decode(client.get("/v1/sessions/s1"))["status"] == "closed"


def test_a_prompt_is_accepted_with_its_turn_number_and_runs_in_the_host(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        first = client.post("/v1/sessions/s1/prompts", json={"text": "hello"})
        assert first.status_code == 202
        assert decode(first) == {"turn": 1}
        assert wait_until(lambda: decode(client.get("/v1/sessions/s1"))["status"] == "idle", 10)
        assert decode(client.post("/v1/sessions/s1/prompts", json={"text": "again"})) == {"turn": 2}
        assert wait_until(lambda: len(decode(client.get("/v1/sessions/s1/history"))["messages"]) == 4, 10)
        messages = decode(client.get("/v1/sessions/s1/history"))["messages"]
        assert [m["seq"] for m in messages] == [1, 2, 3, 4]
        assert wait_until(lambda: decode(client.get("/v1/sessions/s1"))["status"] == "idle", 10)
        usage = decode(client.get("/v1/sessions/s1"))["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0 and usage["cost"] is None
        (listed,) = decode(client.get("/v1/sessions"))["sessions"]
        assert listed["usage"] == usage
        assert messages[1]["message"]["text"] == "echo: hello"
        assert messages[3]["message"]["text"] == "echo: again"


def test_cancel_says_whether_a_turn_was_running(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        answer = client.post("/v1/sessions/s1/cancel")
        assert answer.status_code == 200
        assert decode(answer) == {"cancelled": False}


def test_unknown_sessions_are_404_with_a_json_error(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        for method, path, body in [
            ("GET", "/v1/sessions/nope", None),
            ("DELETE", "/v1/sessions/nope", None),
            ("POST", "/v1/sessions/nope/prompts", {"text": "hi"}),
            ("POST", "/v1/sessions/nope/cancel", None),
            ("POST", "/v1/sessions/nope/permissions/c1", {"decision": "deny"}),
            ("GET", "/v1/sessions/nope/history", None),
            ("GET", "/v1/sessions/nope/events", None),
        ]:
            answer = client.request(method, path, json=body)
            assert answer.status_code == 404, path
            assert decode(answer) == {"kind": "not_found", "message": "there is no session 'nope'"}


def test_a_closed_session_refuses_prompts_cancels_and_answers(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        client.delete("/v1/sessions/s1")
        for path, body in [
            ("/v1/sessions/s1/prompts", {"text": "hi"}),
            ("/v1/sessions/s1/cancel", None),
            ("/v1/sessions/s1/permissions/c1", {"decision": "deny"}),
        ]:
            answer = client.post(path, json=body)
            assert answer.status_code == 409, path
            assert decode(answer)["kind"] == "session_closed"


def test_bad_bodies_get_clear_400s(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        cases = [
            (b"{not json", "malformed_json"),
            (b'{"workspace": "w", "colour": "red"}', "invalid_body"),
            (b'{"workspace": 5}', "invalid_body"),
            (b"{}", "invalid_body"),
            (b'{"workspace": "w", "id": "../escape"}', "invalid_body"),
            (b'{"workspace": ""}', "invalid_body"),
        ]
        for raw, kind in cases:
            answer = client.post("/v1/sessions", content=raw, headers={"content-type": "application/json"})
            assert answer.status_code == 400, raw
            error = decode(answer)
            assert error["kind"] == kind, raw
            assert error["message"]
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        empty = client.post("/v1/sessions/s1/prompts", json={"text": "  "})
        assert empty.status_code == 400
        assert decode(empty)["kind"] == "invalid_body"
        unknown = decode(client.post("/v1/sessions", json={"workspace": "w", "colour": "red"}))
        assert "colour" in unknown["message"]


def test_a_body_over_the_limit_is_refused_with_413(provider, tmp_path):
    with running(provider, tmp_path, serve=ServeSettings(port=0, max_body_bytes=100)) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        answer = client.post("/v1/sessions/s1/prompts", json={"text": "x" * 500})
        assert answer.status_code == 413
        assert decode(answer)["kind"] == "body_too_large"

        def chunks():
            yield b'{"text": "'
            yield b"y" * 500
            yield b'"}'

        streamed = client.post("/v1/sessions/s1/prompts", content=chunks())  # no content-length
        assert streamed.status_code == 413
        # The body was not read to its end: the server ends the connection, and says so.
        assert streamed.headers["connection"] == "close" and answer.headers["connection"] == "close"
        assert decode(client.get("/v1/sessions/s1"))["turns"] == 0


def test_an_existing_id_is_a_409(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        again = client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        assert again.status_code == 409
        assert decode(again)["kind"] == "session_exists"


def test_unknown_routes_and_methods_answer_json(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        missing = client.get("/v2/nothing")
        assert missing.status_code == 404
        assert decode(missing)["kind"] == "not_found"
        wrong = client.put("/v1/sessions")
        assert wrong.status_code == 405
        assert decode(wrong)["kind"] == "method_not_allowed"


def test_the_openapi_document_describes_every_route_and_body(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        document = decode(client.get("/openapi.json"))
        assert document["openapi"].startswith("3.1")
        routes = {(path, method) for path, item in document["paths"].items() for method in item}
        for route in [
            ("/v1/sessions", "post"),
            ("/v1/sessions", "get"),
            ("/v1/sessions/{id}", "delete"),
            ("/v1/sessions/{id}/prompts", "post"),
            ("/v1/sessions/{id}/permissions/{request_id}", "post"),
            ("/v1/sessions/{id}/events", "get"),
            ("/v1/events", "get"),
        ]:
            assert route in routes
        create = document["components"]["schemas"]["CreateSession"]
        assert create["required"] == ["workspace"]
        assert create.get("additionalProperties") is False
        assert document["paths"]["/healthz"]["get"]["security"] == []


def test_the_supervision_view_lists_each_session_subtree(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        view = decode(client.get("/v1/supervision"))
        (subtree,) = [node for node in view["tree"] if node["name"].startswith("session/")]
        assert subtree["name"] == "session/s1"
        assert {child["name"] for child in subtree["children"]} >= {"session", "chat_state", "sampler"}
        assert all(child["restarts"] == 0 for child in subtree["children"])
        assert view["dead_letters"] >= 0
        assert (view["turns_running"], view["turns_waiting"]) == (0, 0)
        assert view["provider_gate"] == "provider gate: 0 in flight; waiting []"
        assert view["mcp_servers"] == [] and view["mcp"] == []
        idle = {"in_flight": 0, "waiting": {}, "cool_down": 0.0}
        assert view["gate"] == {**idle, "requests_remaining": None, "tokens_remaining": None}
        again = decode(client.get("/v1/supervision"))
        assert again["dead_letters"] == view["dead_letters"]  # looking leaves no dead letter


def test_a_background_session_is_opened_at_the_provider_gate_behind_interactive_ones(provider, tmp_path):
    with running(provider, tmp_path) as (server, client):
        made = client.post("/v1/sessions", json={"workspace": "w", "id": "bg", "priority": "background"})
        refused = client.post("/v1/sessions", json={"workspace": "w", "priority": "urgent"})
        assert made.status_code == 201
        assert refused.status_code == 400 and decode(refused)["kind"] == "invalid_body"
        opened = server.context.host._sessions["bg"].parts.gate  # what the host gave the session's sampler
        assert opened is not None and opened.priority == 1


def test_metrics_are_served_in_prometheus_text_when_telemetry_is_on(provider, tmp_path):
    with running(provider, tmp_path, env={"TURNKEEP_TELEMETRY__ENABLED": "true"}) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        client.post("/v1/sessions/s1/prompts", json={"text": "hello"})
        assert wait_until(lambda: "turnkeep_turns" in client.get("/metrics").text, 10)
        page = client.get("/metrics")
        assert page.headers["content-type"].startswith("text/plain")
        assert 'outcome="completed"' in page.text
        assert client.get("/metrics", headers={"Authorization": ""}).status_code == 401
    with running(provider, tmp_path) as (_server, client):
        missing = client.get("/metrics")
        assert missing.status_code == 404 and "telemetry" in decode(missing)["message"]


def test_the_console_files_are_served(provider, tmp_path):
    with running(provider, tmp_path) as (_server, client):
        page = client.get("/", headers={"Authorization": ""})
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "console.js" in page.text
        assert client.get("/console.js").headers["content-type"].startswith("text/javascript")


def test_no_cors_headers_unless_configured(provider, tmp_path):
    origin = {"Origin": "http://evil.example"}
    with running(provider, tmp_path) as (_server, client):
        assert "access-control-allow-origin" not in client.get("/v1/sessions", headers=origin).headers
    with running(provider, tmp_path, serve=ServeSettings(port=0, cors_origins=["http://ok.example"])) as (
        _server,
        client,
    ):
        allowed = client.get("/v1/sessions", headers={"Origin": "http://ok.example"})
        assert allowed.headers["access-control-allow-origin"] == "http://ok.example"
        assert "access-control-allow-origin" not in client.get("/v1/sessions", headers=origin).headers


def test_the_server_runs_on_the_hosts_own_trio_loop(provider, tmp_path):
    with running(provider, tmp_path) as (server, _client):
        names = {job.name for job in server.context.host.system.io._jobs}
        assert "turnkeep-serve" in names


def test_a_host_that_cannot_answer_is_a_503_not_a_crash(provider, tmp_path, monkeypatch):
    from actors import ActorUnavailable

    with running(provider, tmp_path) as (server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})

        def refuse(*args, **kwargs):
            raise ActorUnavailable("the session is restarting")

        monkeypatch.setattr(server.context.host, "resume", refuse)
        answer = client.post("/v1/sessions/s1/cancel")
        assert answer.status_code == 503
        assert decode(answer)["kind"] == "unavailable"
        assert "restarting" in decode(answer)["message"]
        assert decode(client.get("/healthz"))["status"] == "ok"
