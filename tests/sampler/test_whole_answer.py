"""decode_whole: a complete non-streamed answer, in either dialect, read as a finished stream."""

from __future__ import annotations

import msgspec
import pytest

from sampler.messages import FinishReason, Usage
from sampler.providers import decode_whole


def test_a_whole_answer_with_tool_calls_is_read_in_either_dialect() -> None:
    openai_body = (
        b'{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,'
        b'"tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\\"d\\":1}"}}]},'
        b'"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}'
    )
    anthropic_body = (
        b'{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"let me look"},'
        b'{"type":"tool_use","id":"toolu_1","name":"ls","input":{"d":1}}],"stop_reason":"tool_use",'
        b'"usage":{"input_tokens":5,"output_tokens":2}}'
    )
    for body, text, call_id in ((openai_body, "", "call_1"), (anthropic_body, "let me look", "toolu_1")):
        result = decode_whole(body)
        assert result is not None and result.complete
        assert result.message.text == text
        assert [(c.id, c.name, msgspec.json.decode(c.arguments)) for c in result.message.tool_calls] == [
            (call_id, "ls", {"d": 1})
        ]
        assert result.finish_reason is FinishReason.TOOL_CALLS
        assert result.usage == Usage(5, 2)


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"error": {"message": "no"}}', b'{"choices": []}', b'{"type": "message"}'],
)
def test_what_is_not_a_whole_answer_is_not_taken_for_one(body: bytes) -> None:
    assert decode_whole(body) is None
