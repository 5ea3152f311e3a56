"""Who may use the API: the bearer token on every path but /healthz and the console's files, and where
the server may listen."""

from __future__ import annotations

import logging

import pytest

from sampler.fake import FakeProvider, Script
from shell.serve import TOKEN_ENV, ServeRefused, authorized, check_bind, is_loopback, resolve_token
from tests.shell.serve._server import TOKEN, decode, running

API = [
    ("GET", "/v1/sessions"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions/s1"),
    ("DELETE", "/v1/sessions/s1"),
    ("POST", "/v1/sessions/s1/prompts"),
    ("POST", "/v1/sessions/s1/cancel"),
    ("POST", "/v1/sessions/s1/permissions/c1"),
    ("POST", "/v1/sessions/s1/fork"),
    ("POST", "/v1/sessions/s1/rewind"),
    ("GET", "/v1/sessions/s1/history"),
    ("GET", "/v1/sessions/s1/events"),
    ("GET", "/v1/events"),
    ("GET", "/v1/supervision"),
    ("GET", "/openapi.json"),
    ("GET", "/not-a-route"),
]


def test_a_bearer_token_matches_only_exactly():
    assert authorized(f"Bearer {TOKEN}", TOKEN)
    assert authorized(f"bearer {TOKEN}", TOKEN)
    assert not authorized(None, TOKEN)
    assert not authorized(TOKEN, TOKEN)
    assert not authorized(f"Basic {TOKEN}", TOKEN)
    assert not authorized(f"Bearer {TOKEN}x", TOKEN)
    assert not authorized(f"Bearer {TOKEN[:-1]}", TOKEN)
    assert not authorized("Bearer ", TOKEN)


def test_the_token_comes_from_the_environment_or_is_generated():
    assert resolve_token({TOKEN_ENV: TOKEN}) == (TOKEN, False)
    first, generated = resolve_token({})
    second, _ = resolve_token({TOKEN_ENV: "  "})
    assert generated and len(first) >= 32 and first != second
    with pytest.raises(ServeRefused, match="too short"):
        resolve_token({TOKEN_ENV: "short"})


def test_only_loopback_is_served_without_a_token_from_the_environment():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")
    check_bind("127.0.0.1", token_from_environment=False)
    check_bind("0.0.0.0", token_from_environment=True)
    with pytest.raises(ServeRefused, match=TOKEN_ENV):
        check_bind("0.0.0.0", token_from_environment=False)


def test_every_api_path_refuses_a_missing_or_wrong_token_with_401(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeProvider(Script.echo()) as provider, running(provider, tmp_path) as (_server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
        for header in ({"Authorization": ""}, {"Authorization": "Bearer wrong-token-0123456789"}):
            for method, path in API:
                answer = client.request(method, path, headers=header)
                assert answer.status_code == 401, (method, path)
                assert answer.headers["www-authenticate"] == "Bearer"
                assert decode(answer)["kind"] == "unauthorized"
        assert decode(client.get("/v1/sessions/s1"))["status"] == "idle"
    assert TOKEN not in caplog.text
