"""FakeProvider as a server: lifecycle, threads, addresses, routes."""

from __future__ import annotations

import socket
import threading
import time

import h11
import httpx
import pytest

from sampler.fake import FakeProvider, FakeProviderError, Fault, FaultPlan, Script, serve_forever

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def test_start_listens_on_a_free_port_and_stop_leaves_no_thread():
    before = set(threading.enumerate())
    provider = FakeProvider().start()
    try:
        assert provider.running
        assert provider.port > 0
        assert provider.base_url == f"http://127.0.0.1:{provider.port}/v1"
        with socket.create_connection(("127.0.0.1", provider.port), timeout=1):
            pass
    finally:
        provider.stop()
    assert not provider.running
    assert set(threading.enumerate()) == before


def test_context_manager_starts_and_stops():
    with FakeProvider() as provider:
        response = httpx.post(provider.base_url + "/chat/completions", json=CHAT, headers={"x-api-key": "k"})
        assert response.status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.post(provider.base_url + "/chat/completions", json=CHAT, headers={"x-api-key": "k"})


def test_stop_is_idempotent_and_a_stopped_provider_cannot_start_again():
    provider = FakeProvider().start()
    provider.stop()
    provider.stop()
    with pytest.raises(FakeProviderError):
        provider.start()


def test_port_is_unknown_before_start():
    with pytest.raises(FakeProviderError):
        _ = FakeProvider().port


def test_a_port_in_use_fails_to_start():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            FakeProvider(port=taken.getsockname()[1]).start()


def test_stop_ends_a_hanging_response_promptly():
    plan = FaultPlan.scripted([Fault.stall(after_chunks=1, hang=True)])
    provider = FakeProvider(faults=plan).start()
    outcome: list[BaseException | None] = []
    first_event = threading.Event()

    def read() -> None:
        try:
            with (
                httpx.Client(headers={"x-api-key": "k"}, timeout=10) as client,
                client.stream(
                    "POST", provider.base_url + "/chat/completions", json={**CHAT, "stream": True}
                ) as r,
            ):
                for _ in r.iter_bytes():
                    first_event.set()
            outcome.append(None)
        except httpx.HTTPError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert first_event.wait(2)
    began = time.monotonic()
    provider.stop()
    assert time.monotonic() - began < 2
    reader.join(2)
    assert len(outcome) == 1
    assert isinstance(outcome[0], httpx.RemoteProtocolError)


def test_unknown_routes_and_methods_get_json_errors(start_provider, http):
    provider = start_provider()
    missing = http.post(provider.root_url + "/v1/completions", json={})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_url"
    wrong_method = http.get(provider.base_url + "/chat/completions")
    assert wrong_method.status_code == 405


def test_a_connection_stays_open_after_an_unknown_route_whose_body_came_late(start_provider):
    provider = start_provider()
    client = h11.Connection(h11.CLIENT)
    with socket.create_connection(("127.0.0.1", provider.port), timeout=5) as conn:
        headers = [("host", "x"), ("content-length", "2"), ("expect", "100-continue")]
        conn.sendall(client.send(h11.Request(method="POST", target="/v1/completions", headers=headers)))
        first = _next_event(client, conn)
        assert isinstance(first, h11.InformationalResponse) and first.status_code == 100
        conn.sendall(client.send(h11.Data(data=b"{}")) + client.send(h11.EndOfMessage()))
        assert _status_of_whole_response(client, conn) == 404
        client.start_next_cycle()
        conn.sendall(client.send(h11.Request(method="GET", target="/v1/models", headers=[("host", "x")])))
        conn.sendall(client.send(h11.EndOfMessage()))
        assert _status_of_whole_response(client, conn) == 200


def _next_event(client: h11.Connection, conn: socket.socket) -> h11.Event:
    """The next event the server sends on `conn`; fails if it closes the connection instead."""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(conn.recv(65536))
            continue
        assert not isinstance(event, h11.ConnectionClosed), "the server closed the connection"
        assert isinstance(event, h11.Event)
        return event


def _status_of_whole_response(client: h11.Connection, conn: socket.socket) -> int:
    status = 0
    while not isinstance(event := _next_event(client, conn), h11.EndOfMessage):
        if isinstance(event, h11.Response):
            status = event.status_code
    return status


def test_models_endpoint_lists_the_configured_model(start_provider, http):
    provider = start_provider(model="tiny-1")
    assert http.get(provider.base_url + "/models").json()["data"][0]["id"] == "tiny-1"


def test_many_threads_share_one_provider_with_different_scripts(start_provider):
    provider = start_provider(scripts={f"s{n}": Script.text(f"answer {n}") for n in range(8)})
    answers: dict[int, str] = {}

    def ask(n: int) -> None:
        with httpx.Client(headers={"x-api-key": "k"}, timeout=5) as client:
            body = {"messages": [{"role": "user", "content": f"[[script:s{n}]] go"}]}
            reply = client.post(provider.base_url + "/chat/completions", json=body).json()
            answers[n] = reply["choices"][0]["message"]["content"]

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert answers == {n: f"answer {n}" for n in range(8)}
    assert provider.stats.requests == 8


def test_serve_forever_serves_until_interrupted_then_stops_cleanly():
    before = set(threading.enumerate())
    seen: list[int] = []

    def on_ready(provider: FakeProvider) -> None:
        reply = httpx.post(provider.base_url + "/chat/completions", json=CHAT, headers={"x-api-key": "k"})
        seen.append(reply.status_code)
        raise KeyboardInterrupt

    stats = serve_forever(0, "none", on_ready=on_ready)
    assert seen == [200]
    assert stats.requests == stats.completed == 1
    assert set(threading.enumerate()) == before


def test_serve_forever_rejects_an_unknown_profile():
    with pytest.raises(ValueError):
        serve_forever(0, "apocalyptic")
