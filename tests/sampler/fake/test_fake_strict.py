"""A strict embedded provider refuses malformed histories, in each provider's words, and accepts the rest."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sampler.fake import FakeProvider, Fault, FaultPlan, Script


def openai(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages)}


def anthropic(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": list(messages)}


CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
USER = {"role": "user", "content": "hi"}
TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]}
TOOL_RESULT = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
}
EMPTY_PNG = {"type": "base64", "media_type": "image/png", "data": ""}

REFUSED = [
    ("/chat/completions", openai(USER, CALL, USER), "did not have response messages: call_1"),
    ("/chat/completions", openai(USER, RESULT), "must be a response to a preceeding message"),
    (
        "/chat/completions",
        openai(
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}],
            }
        ),
        "but got an empty value",
    ),
    ("/messages", anthropic(USER, TOOL_USE, USER), "`tool_use` ids were found without `tool_result` blocks"),
    ("/messages", anthropic(TOOL_RESULT), "unexpected `tool_use_id` found in `tool_result` blocks"),
    (
        "/messages",
        anthropic({"role": "user", "content": [{"type": "image", "source": EMPTY_PNG}]}),
        "image.source.base64: image cannot be empty",
    ),
]


@pytest.mark.parametrize(("path", "payload", "words"), REFUSED)
def test_a_strict_provider_refuses_a_malformed_history_in_its_words(
    path: str, payload: Any, words: str
) -> None:
    with FakeProvider(Script.text("x"), strict_history=True) as provider:
        response = httpx.post(provider.base_url + path, json=payload)
        stats = provider.stats
    assert response.status_code == 400
    assert words in response.text
    assert stats.rejections == {"bad_request": 1}


@pytest.mark.parametrize(("path", "payload", "words"), REFUSED)
def test_a_lenient_provider_answers_the_same_history(path: str, payload: Any, words: str) -> None:
    with FakeProvider(Script.text("x")) as provider:
        assert httpx.post(provider.base_url + path, json=payload).status_code == 200


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/chat/completions", openai(USER, CALL, RESULT, {"role": "assistant", "content": "done"}, USER)),
        ("/messages", anthropic(USER, TOOL_USE, TOOL_RESULT)),
    ],
)
def test_a_strict_provider_answers_a_well_formed_history(path: str, payload: Any) -> None:
    with FakeProvider(Script.text("x"), strict_history=True) as provider:
        assert httpx.post(provider.base_url + path, json=payload).status_code == 200


def test_alternate_roles_refuses_successive_user_messages_in_deepseeks_words() -> None:
    with FakeProvider(Script.text("x"), alternate_roles=True) as provider:
        refused = httpx.post(provider.base_url + "/chat/completions", json=openai(USER, USER))
        accepted = httpx.post(provider.base_url + "/chat/completions", json=openai(USER))
    assert refused.status_code == 400
    assert (
        "does not support successive user or assistant messages (messages[0] and messages[1]" in refused.text
    )
    assert accepted.status_code == 200


@pytest.mark.parametrize("path", ["/chat/completions", "/messages"])
def test_an_injected_structure_refusal_uses_the_wires_words(path: str) -> None:
    faults = FaultPlan.scripted([Fault.structure_rejected()])
    with FakeProvider(Script.text("x"), faults=faults) as provider:
        response = httpx.post(provider.base_url + path, json=anthropic(USER))
    assert response.status_code == 400
    assert "tool_call" in response.text or "tool_use" in response.text
