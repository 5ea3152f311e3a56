"""Authentication and token refresh, the context window, body size, images, and the stats."""

from __future__ import annotations

import re

import httpx
import pytest

from sampler.fake import DEFAULT_REFRESH_TOKEN, Fault, FaultPlan, Script, TokenExpiry

OPENAI = "/chat/completions"
ANTHROPIC = "/messages"


def body(text="hi", stream=False):
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": text}], "stream": stream}


def post(provider, path, token, payload=None):
    return httpx.post(
        provider.base_url + path, json=payload or body(), headers={"authorization": f"Bearer {token}"}
    )


def refresh(provider, refresh_token, as_json=False):
    grant = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    if as_json:
        return httpx.post(provider.token_url, json=grant)
    return httpx.post(provider.token_url, data=grant)


def test_any_token_or_none_is_accepted_by_default(start_provider):
    provider = start_provider()
    assert post(provider, OPENAI, "whatever").status_code == 200
    assert httpx.post(provider.base_url + OPENAI, json=body()).status_code == 200


def test_with_require_key_any_token_is_accepted_but_none_is_not(start_provider):
    provider = start_provider(require_key=True)
    assert post(provider, OPENAI, "whatever").status_code == 200
    assert (
        httpx.post(provider.base_url + ANTHROPIC, json=body(), headers={"x-api-key": "k"}).status_code == 200
    )
    missing = httpx.post(provider.base_url + OPENAI, json=body())
    assert missing.status_code == 401
    assert "API key" in missing.json()["error"]["message"]
    assert provider.stats.rejections == {"auth": 1}


def test_an_access_token_expires_after_n_requests_and_a_refresh_replaces_it(start_provider):
    provider = start_provider(token_expiry=TokenExpiry(requests_per_token=2, refresh_token="rt-1"))
    assert [post(provider, OPENAI, "first").status_code for _ in range(2)] == [200, 200]
    expired = post(provider, OPENAI, "first")
    assert expired.status_code == 401
    assert expired.json()["error"]["code"] == "invalid_api_key"
    assert post(provider, OPENAI, "first").status_code == 401

    grant = refresh(provider, "rt-1")
    assert grant.status_code == 200
    fields = grant.json()
    assert fields["token_type"] == "Bearer" and fields["expires_in"] > 0 and fields["refresh_token"] == "rt-1"
    token = fields["access_token"]
    assert [post(provider, ANTHROPIC, token).status_code for _ in range(3)] == [200, 200, 401]
    anthropic = post(provider, ANTHROPIC, token).json()
    assert anthropic["error"]["type"] == "authentication_error"
    assert provider.stats.token_refreshes == 1


def test_the_token_endpoint_accepts_json_and_refuses_unknown_grants(start_provider):
    provider = start_provider(token_expiry=TokenExpiry(refresh_token="rt-1"))
    assert refresh(provider, "rt-1", as_json=True).status_code == 200
    unknown = refresh(provider, "stolen")
    assert unknown.status_code == 400
    assert unknown.json()["error"] == "invalid_grant"
    wrong_grant = httpx.post(provider.token_url, data={"grant_type": "password", "refresh_token": "rt-1"})
    assert wrong_grant.json()["error"] == "unsupported_grant_type"
    assert provider.stats.token_refusals == 2


def test_a_rotating_refresh_token_works_once(start_provider):
    provider = start_provider(token_expiry=TokenExpiry(refresh_token="rt-1", rotate_refresh_token=True))
    grant = refresh(provider, "rt-1").json()
    assert grant["refresh_token"] != "rt-1"
    assert refresh(provider, "rt-1").status_code == 400
    assert refresh(provider, grant["refresh_token"]).status_code == 200


def test_a_token_expired_fault_expires_the_token_and_the_default_refresh_token_recovers(start_provider):
    provider = start_provider(faults=FaultPlan.scripted([Fault.token_expired()]))
    assert post(provider, OPENAI, "key").status_code == 401
    assert post(provider, OPENAI, "key").status_code == 401
    token = refresh(provider, DEFAULT_REFRESH_TOKEN).json()["access_token"]
    assert post(provider, OPENAI, token).status_code == 200
    assert provider.stats.faults == {"token_expired": 1}


def test_the_token_endpoint_never_consumes_a_fault(start_provider):
    provider = start_provider(faults=FaultPlan.scripted([Fault.server_error()]))
    assert refresh(provider, DEFAULT_REFRESH_TOKEN).status_code == 200
    assert post(provider, OPENAI, "k").status_code == 500


LONG = "x" * 396  # with "user": 400 characters = 100 tokens


@pytest.mark.parametrize(
    ("style", "path", "pattern"),
    [
        (
            None,
            OPENAI,
            r"This model's maximum context length is 50 tokens\. However, your messages resulted in "
            r"100 tokens\. Please reduce the length of the messages\.",
        ),
        (None, ANTHROPIC, r"prompt is too long: 100 tokens > 50 maximum"),
        (
            "gemini",
            OPENAI,
            r"The input token count \(100\) exceeds the maximum number of tokens allowed \(50\)\.",
        ),
        ("llamacpp", OPENAI, r"request \(100 tokens\) exceeds the available context size \(50 tokens\)"),
        ("anthropic", OPENAI, r"prompt is too long: 100 tokens > 50 maximum"),
    ],
)
def test_a_prompt_above_the_window_gets_the_chosen_providers_overflow_error(
    start_provider, style, path, pattern
):
    provider = start_provider(context_window=50, overflow_style=style)
    reply = post(provider, path, "k", body(LONG))
    assert reply.status_code == 400
    assert re.match(pattern, reply.json()["error"]["message"])
    assert provider.stats.rejections == {"context_overflow": 1}


def test_overflow_bodies_keep_each_providers_codes(start_provider):
    openai_style = start_provider(context_window=50)
    assert post(openai_style, OPENAI, "k", body(LONG)).json()["error"]["code"] == "context_length_exceeded"
    llama = start_provider(context_window=50, overflow_style="llamacpp")
    error = post(llama, OPENAI, "k", body(LONG)).json()["error"]
    assert (error["type"], error["n_prompt_tokens"], error["n_ctx"]) == ("exceed_context_size_error", 100, 50)
    assert post(openai_style, OPENAI, "k", body("x" * 196)).status_code == 200


def test_a_body_above_the_limit_gets_413_as_a_proxy_page_or_json(start_provider):
    html = start_provider(max_body_bytes=1_000)
    big = body("y" * 2_000)
    page = post(html, OPENAI, "k", big)
    assert page.status_code == 413
    assert page.headers["content-type"] == "text/html"
    assert "413 Request Entity Too Large" in page.text
    assert post(html, OPENAI, "k", body("small")).status_code == 200
    as_json = start_provider(max_body_bytes=1_000, too_large_style="json")
    assert post(as_json, ANTHROPIC, "k", big).json()["error"]["type"] == "request_too_large"
    assert post(as_json, OPENAI, "k", big).json()["error"]["code"] == "request_too_large"
    assert html.stats.rejections == {"too_large": 1}


def image_request(count):
    parts = [{"type": "text", "text": "look"}]
    parts += [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5_000}}] * count
    return {"messages": [{"role": "user", "content": parts}]}


def test_images_above_the_limit_are_rejected_as_invalid(start_provider):
    provider = start_provider(max_images=1)
    assert post(provider, OPENAI, "k", image_request(1)).status_code == 200
    rejected = post(provider, OPENAI, "k", image_request(2))
    assert rejected.status_code == 400
    assert rejected.json()["error"]["code"] == "invalid_image"
    anthropic = {
        "max_tokens": 5,
        "messages": [{"role": "user", "content": [{"type": "image", "source": {}}] * 2}],
    }
    assert post(provider, ANTHROPIC, "k", anthropic).json()["error"]["message"] == "Could not process image"
    assert provider.stats.rejections == {"image": 2}


def test_an_image_counts_a_fixed_number_of_tokens_whatever_its_size(start_provider):
    provider = start_provider()
    small, large = image_request(1), image_request(1)
    large["messages"][0]["content"][1] = {"type": "image_url", "image_url": {"url": "A" * 400_000}}
    usages = [
        post(provider, OPENAI, "k", request).json()["usage"]["prompt_tokens"] for request in (small, large)
    ]
    assert usages[0] == usages[1]


def test_stats_count_requests_outcomes_and_faults_by_kind(start_provider):
    plan = FaultPlan.scripted([Fault.rate_limit(), Fault.reset(), None])
    provider = start_provider(Script.text("ok"), faults=plan, max_body_bytes=10_000)
    outcomes = []
    for payload in (body(), body(), body(), body("z" * 20_000)):
        try:
            outcomes.append(post(provider, OPENAI, "k", payload).status_code)
        except httpx.RemoteProtocolError:
            outcomes.append("reset")
    post(provider, ANTHROPIC, "k")
    assert outcomes == [429, "reset", 200, 413]
    stats = provider.stats
    assert stats.requests == 5
    assert stats.by_wire == {"openai": 4, "anthropic": 1}
    assert stats.completed == 2
    assert stats.faults == {"rate_limit": 1, "reset": 1}
    assert stats.total_faults == 2
    assert stats.rejections == {"too_large": 1}


def test_token_expiry_rejects_a_zero_budget():
    with pytest.raises(ValueError):
        TokenExpiry(requests_per_token=0)
