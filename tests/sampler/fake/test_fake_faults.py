"""Faults as a client sees them, the order of a scripted plan, and the determinism of profiles."""

from __future__ import annotations

import itertools
import time

import httpx
import msgspec
import openai
import pytest

from sampler.fake import FAULT_KINDS, TRANSIENT_KINDS, Fault, FaultPlan, Script

OPENAI = "/chat/completions"
ANTHROPIC = "/messages"


def body(text="hello there, fake model", stream=True):
    return {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": text}], "stream": stream}


def once(start_provider, fault, **kwargs):
    return start_provider(
        Script.text("a reply long enough for several chunks"), faults=FaultPlan.scripted([fault]), **kwargs
    )


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.rate_limit(retry_after=1, retry_after_ms=1500), 429, "rate_limit_exceeded"),
        (Fault.insufficient_quota(), 429, "insufficient_quota"),
        (Fault.server_error(), 500, None),
        (Fault.unavailable(retry_after=2), 503, None),
        (Fault.overloaded(), 529, None),
        (Fault.status(408), 408, None),
    ],
)
def test_status_faults_carry_openai_bodies(start_provider, http, fault, status, code):
    provider = once(start_provider, fault)
    reply = http.post(provider.base_url + OPENAI, json=body())
    assert reply.status_code == status
    error = reply.json()["error"]
    assert error["message"] and error["code"] == code
    assert provider.stats.faults == {fault.kind: 1}


def test_retry_headers_are_sent_exactly_as_given(start_provider, http):
    provider = once(start_provider, Fault.rate_limit(retry_after=1, retry_after_ms=1500))
    reply = http.post(provider.base_url + OPENAI, json=body())
    assert (reply.headers["retry-after"], reply.headers["retry-after-ms"]) == ("1", "1500")
    provider = once(start_provider, Fault.rate_limit(retry_after_ms=20))
    reply = http.post(provider.base_url + OPENAI, json=body())
    assert reply.headers["retry-after-ms"] == "20" and "retry-after" not in reply.headers


@pytest.mark.parametrize(
    ("fault", "status", "kind"),
    [
        (Fault.rate_limit(retry_after=3), 429, "rate_limit_error"),
        (Fault.insufficient_quota(), 400, "invalid_request_error"),
        (Fault.server_error(), 500, "api_error"),
        (Fault.overloaded(retry_after=1), 529, "overloaded_error"),
    ],
)
def test_status_faults_carry_anthropic_bodies(start_provider, http, fault, status, kind):
    provider = once(start_provider, fault)
    reply = http.post(provider.base_url + ANTHROPIC, json=body())
    assert reply.status_code == status
    assert reply.json() == {
        "type": "error",
        "error": {"type": kind, "message": reply.json()["error"]["message"]},
    }
    if fault.retry_after is not None:
        assert reply.headers["retry-after"] == str(fault.retry_after)


def test_a_bad_gateway_is_an_html_proxy_page(start_provider, http):
    provider = once(start_provider, Fault.bad_gateway())
    reply = http.post(provider.base_url + OPENAI, json=body())
    assert reply.status_code == 502
    assert reply.headers["content-type"] == "text/html"
    assert "<h1>502 Bad Gateway</h1>" in reply.text


def test_the_official_client_classifies_status_faults(start_provider):
    provider = start_provider(faults=FaultPlan.scripted([Fault.rate_limit(), Fault.server_error()]))
    client = openai.OpenAI(base_url=provider.base_url, api_key="k", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC])
def test_a_reset_drops_the_connection_mid_stream(start_provider, http, path):
    provider = once(start_provider, Fault.reset(after_chunks=3))
    received = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        http.stream("POST", provider.base_url + path, json=body()) as r,
    ):
        assert r.status_code == 200
        received.extend(line for line in r.iter_lines() if line.startswith("data:"))
    assert len(received) == 3
    assert provider.stats.faults == {"reset": 1}
    assert provider.stats.completed == 0


def test_a_reset_never_lets_the_stream_finish(start_provider, http):
    provider = once(start_provider, Fault.reset(after_chunks=10_000))
    lines = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        http.stream("POST", provider.base_url + OPENAI, json=body()) as r,
    ):
        lines.extend(r.iter_lines())
    assert lines and "data: [DONE]" not in lines


def test_a_reset_cuts_a_plain_response_short(start_provider, http):
    provider = once(start_provider, Fault.reset())
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(provider.base_url + OPENAI, json=body(stream=False))


def test_a_stall_pauses_the_stream_then_it_goes_on(start_provider, http, sse):
    provider = once(start_provider, Fault.stall(seconds=0.2, after_chunks=2))
    arrivals = []
    with http.stream("POST", provider.base_url + OPENAI, json=body()) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                arrivals.append((time.monotonic(), line))
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(arrivals)]
    assert gaps[1] >= 0.15  # the pause sits after the second event
    assert arrivals[-1][1] == "data: [DONE]"
    assert provider.stats.completed == 1


def test_a_hang_lasts_until_the_client_gives_up(start_provider, wait_until):
    provider = once(start_provider, Fault.stall(after_chunks=1, hang=True))
    timeout = httpx.Timeout(5.0, read=0.2)
    with (
        httpx.Client(headers={"x-api-key": "k"}, timeout=timeout) as client,
        pytest.raises(httpx.ReadTimeout),
        client.stream("POST", provider.base_url + OPENAI, json=body()) as r,
    ):
        for _ in r.iter_lines():
            pass
    wait_until(lambda: provider.stats.disconnects == 1)
    assert provider.stats.completed == 0


def test_an_empty_stream_is_only_done_or_nothing(start_provider, http, sse):
    provider = start_provider(faults=FaultPlan.scripted([Fault.empty(), Fault.empty(with_done=False)] * 2))
    assert sse(http.post(provider.base_url + OPENAI, json=body()).text) == [(None, "[DONE]")]
    nothing = http.post(provider.base_url + OPENAI, json=body())
    assert nothing.status_code == 200 and nothing.content == b""
    names = [name for name, _ in sse(http.post(provider.base_url + ANTHROPIC, json=body()).text)]
    assert names == ["message_start", "message_delta", "message_stop"]
    assert http.post(provider.base_url + ANTHROPIC, json=body()).content == b""
    assert provider.stats.faults == {"empty": 4}


def test_a_content_filter_ends_the_answer_early(start_provider, http, sse_json):
    provider = start_provider(
        Script.text("a long and unfortunate answer"),
        faults=FaultPlan.scripted([Fault.content_filter(after_chunks=2)] * 2),
    )
    chunks = sse_json(http.post(provider.base_url + OPENAI, json=body()).text)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "a long a"
    assert chunks[-1]["choices"][0]["finish_reason"] == "content_filter"
    events = sse_json(http.post(provider.base_url + ANTHROPIC, json=body()).text)
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["refusal"]


def test_an_in_stream_error_event_ends_an_openai_stream(start_provider, http, sse):
    provider = once(start_provider, Fault.stream_error(after_chunks=2))
    events = sse(http.post(provider.base_url + OPENAI, json=body()).text)
    assert len(events) == 3
    assert msgspec.json.decode(events[-1][1])["error"]["type"] == "server_error"


def test_an_in_stream_error_event_ends_an_anthropic_stream(start_provider, http, sse):
    provider = once(start_provider, Fault.stream_error(after_chunks=1))
    events = sse(http.post(provider.base_url + ANTHROPIC, json=body()).text)
    assert [name for name, _ in events] == ["message_start", "error"]
    assert msgspec.json.decode(events[-1][1])["error"]["type"] == "overloaded_error"


def test_an_in_stream_error_on_a_plain_call_is_an_error_status(start_provider, http):
    provider = start_provider(faults=FaultPlan.scripted([Fault.stream_error()] * 2))
    assert http.post(provider.base_url + OPENAI, json=body(stream=False)).status_code == 500
    assert http.post(provider.base_url + ANTHROPIC, json=body(stream=False)).status_code == 529


def test_a_scripted_plan_is_consumed_one_per_call_in_order(start_provider, http):
    plan = FaultPlan.scripted([Fault.rate_limit(), None, Fault.server_error(), Fault.status(409)])
    provider = start_provider(faults=plan)
    statuses = [http.post(provider.base_url + OPENAI, json=body(stream=False)).status_code for _ in range(6)]
    assert statuses == [429, 200, 500, 409, 200, 200]
    assert provider.stats.faults == {"rate_limit": 1, "server_error": 1, "http_error": 1}
    assert provider.stats.requests == 6 and provider.stats.completed == 3


def outcomes(provider, count):
    seen = []
    with httpx.Client(headers={"x-api-key": "k"}, timeout=httpx.Timeout(5.0, read=0.5)) as client:
        for index in range(count):
            try:
                reply = client.post(provider.base_url + OPENAI, json=body(f"request {index}", stream=False))
                seen.append(f"{reply.status_code}:{len(reply.content)}")
            except httpx.HTTPError as exc:
                seen.append(type(exc).__name__)
    return seen


def test_a_profile_decides_the_same_faults_for_the_same_seed(start_provider):
    def run(seed):
        plan = FaultPlan.profile("heavy", seed=seed, stall_seconds=0.01)
        provider = start_provider(faults=plan)
        return outcomes(provider, 40), provider.stats.faults

    first, second, other = run(7), run(7), run(8)
    assert first == second
    assert first != other
    assert sum(first[1].values()) > 0
    assert set(first[1]) <= TRANSIENT_KINDS


def test_a_retried_request_is_faulted_at_most_max_consecutive_times(start_provider, http):
    provider = start_provider(faults=FaultPlan(server_error=1.0, max_consecutive=3))
    same = [http.post(provider.base_url + OPENAI, json=body("same")).status_code for _ in range(5)]
    assert same == [500, 500, 500, 200, 200]
    other = [http.post(provider.base_url + OPENAI, json=body("other")).status_code for _ in range(4)]
    assert other == [500, 500, 500, 200]


def attempts_until_clean(client, url, payload, budget=10):
    for attempt in range(1, budget + 1):
        try:
            reply = client.post(url, json=payload)
            if reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]:
                return attempt
        except (httpx.HTTPError, ValueError):
            pass
    return None


def test_ten_attempts_always_get_through_a_plan_of_nothing_but_transient_faults(start_provider):
    every = {kind: 1.0 / 9 for kind in TRANSIENT_KINDS}
    plan = FaultPlan(seed=3, stall_seconds=0.01, stall_hangs=True, retry_after_ms=None, **every)
    provider = start_provider(faults=plan)
    with httpx.Client(headers={"x-api-key": "k"}, timeout=httpx.Timeout(5.0, read=0.25)) as client:
        needed = [
            attempts_until_clean(client, provider.base_url + OPENAI, body(f"session {n}", stream=False))
            for n in range(15)
        ]
    assert needed == [4] * 15
    assert provider.stats.total_faults == 45


def test_plans_and_faults_reject_impossible_values():
    with pytest.raises(ValueError):
        FaultPlan(rate_limit=1.5)
    with pytest.raises(ValueError):
        FaultPlan(rate_limit=0.6, reset=0.6)
    with pytest.raises(ValueError):
        FaultPlan.profile("apocalyptic")
    with pytest.raises(ValueError):
        Fault.status(200)
    with pytest.raises(ValueError):
        Fault.reset(after_chunks=-1)


def test_every_kind_has_a_name_the_stats_use():
    assert len(FAULT_KINDS) == len(set(FAULT_KINDS)) == 19
    assert set(FaultPlan.profile("light").rates()) <= TRANSIENT_KINDS
