"""The recovery bridge: which failures are recovered, how often, and what the user is told otherwise."""

from __future__ import annotations

import pytest

from sampler import FILTERED_MESSAGE, LlmError, LlmErrorKind
from shell.bridge import (
    MAX_AUTH_REFRESHES,
    QUOTA_USED_UP,
    CompactAndResubmit,
    FailTurn,
    RecoveryBridge,
    RefreshAuthAndResubmit,
    StubOldOutputs,
    SummariseInChunks,
)

AUTH = LlmError(LlmErrorKind.AUTH, status=401, message="invalid api key")
OVERFLOW = LlmError(
    LlmErrorKind.CONTEXT_OVERFLOW, status=400, message="maximum context length is 8192 tokens"
)
TOO_LARGE = LlmError(LlmErrorKind.REQUEST_TOO_LARGE, status=413, message="Request Entity Too Large")


def test_an_auth_failure_refreshes_a_bounded_number_of_times_then_fails_with_advice() -> None:
    bridge = RecoveryBridge()
    actions = [bridge.on_failed(AUTH, estimated_tokens=10, window=100) for _ in range(MAX_AUTH_REFRESHES + 1)]
    assert all(isinstance(a, RefreshAuthAndResubmit) for a in actions[:-1])
    assert [a.attempt for a in actions[:-1]] == list(range(1, MAX_AUTH_REFRESHES + 1))  # type: ignore[union-attr]
    final = actions[-1]
    assert isinstance(final, FailTurn) and final.kind == "auth"
    assert "Log in again or fix the API key" in final.message


def test_overflow_compacts_three_times_then_fails_with_the_exact_message() -> None:
    bridge = RecoveryBridge()
    actions = [bridge.on_failed(OVERFLOW, estimated_tokens=10_000, window=8192) for _ in range(4)]
    assert [type(a) for a in actions[:3]] == [CompactAndResubmit] * 3
    assert actions[0] == CompactAndResubmit(1, 8500)
    assert actions[3] == FailTurn(
        "context_overflow", "Compaction failed to bring the context under the model window after 3 attempts."
    )


def test_a_completed_step_resets_the_counters() -> None:
    bridge = RecoveryBridge()
    for _ in range(3):
        bridge.on_failed(OVERFLOW, estimated_tokens=10_000, window=8192)
    bridge.step_succeeded()
    assert isinstance(bridge.on_failed(OVERFLOW, estimated_tokens=10_000, window=8192), CompactAndResubmit)


@pytest.mark.parametrize(("estimate", "expected"), [(5000, CompactAndResubmit), (4000, FailTurn)])
def test_a_413_counts_as_overflow_only_when_the_request_is_at_least_half_the_window(
    estimate: int, expected: type
) -> None:
    action = RecoveryBridge().on_failed(TOO_LARGE, estimated_tokens=estimate, window=10_000)
    assert isinstance(action, expected)
    if isinstance(action, CompactAndResubmit):
        assert action.learned_window is None


def test_a_filtered_answer_fails_as_provider_filtered_with_the_providers_own_words() -> None:
    words = "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."
    error = LlmError(LlmErrorKind.PROVIDER, status=400, message=words, filtered=True)
    action = RecoveryBridge().on_failed(error, estimated_tokens=1, window=10)
    assert action == FailTurn("provider_filtered", words)


def test_a_filtered_stream_without_words_fails_with_the_finish_reason_named() -> None:
    error = LlmError(LlmErrorKind.PROVIDER, message=FILTERED_MESSAGE, filtered=True)
    action = RecoveryBridge().on_failed(error, estimated_tokens=1, window=10)
    assert action == FailTurn("provider_filtered", FILTERED_MESSAGE)
    assert "content_filter" in FILTERED_MESSAGE


def test_a_used_up_budget_says_so_with_the_providers_words() -> None:
    words = "Budget has been exceeded! Current cost: 10.02, Max budget: 10.0"
    error = LlmError(LlmErrorKind.QUOTA_EXHAUSTED, status=429, message=words)
    action = RecoveryBridge().on_failed(error, estimated_tokens=1, window=10)
    assert action == FailTurn("quota_exhausted", f"{QUOTA_USED_UP} The provider said: {words} (HTTP 429)")
    assert "the account's credit or budget is used up" in action.message.lower()


def test_anything_else_fails_with_the_errors_kind_and_the_providers_message() -> None:
    error = LlmError(LlmErrorKind.PROVIDER, status=404, message="The model `x` does not exist")
    action = RecoveryBridge().on_failed(error, estimated_tokens=1, window=10)
    assert action == FailTurn("provider", "The model `x` does not exist (HTTP 404)")


def test_a_failed_refresh_ends_the_turn_with_advice() -> None:
    action = RecoveryBridge().auth_refresh_failed("invalid_grant")
    assert action.kind == "auth" and "invalid_grant" in action.message


# -- a compaction's own failures ------------------------------------------------------------------------


def test_a_summary_too_large_is_made_in_chunks_then_old_outputs_are_stubbed_then_the_turn_fails() -> None:
    bridge = RecoveryBridge()
    assert bridge.on_summary_failed(OVERFLOW, chunked=False, stubbed=False, window=10_000) == (
        SummariseInChunks(4000)
    )
    assert bridge.on_summary_failed(TOO_LARGE, chunked=True, stubbed=False, window=10_000) == StubOldOutputs()
    final = bridge.on_summary_failed(OVERFLOW, chunked=True, stubbed=True, window=10_000)
    assert isinstance(final, FailTurn) and final.kind == "context_overflow"
    assert "maximum context length is 8192 tokens" in final.message
    assert final.message.endswith("Start a new session or raise the context window.")


def test_summary_chunks_are_never_smaller_than_256_tokens() -> None:
    action = RecoveryBridge().on_summary_failed(OVERFLOW, chunked=False, stubbed=False, window=100)
    assert action == SummariseInChunks(256)


def test_a_summary_refused_for_auth_refreshes_like_a_step_and_other_failures_end_the_turn() -> None:
    bridge = RecoveryBridge()
    assert isinstance(
        bridge.on_summary_failed(AUTH, chunked=False, stubbed=False, window=1000), RefreshAuthAndResubmit
    )
    server = LlmError(LlmErrorKind.STATUS, status=500, message="upstream exploded")
    failed = bridge.on_summary_failed(server, chunked=False, stubbed=False, window=1000)
    assert failed == FailTurn(
        str(LlmErrorKind.STATUS), "The compaction's summary request failed: upstream exploded (HTTP 500)"
    )


def test_with_nothing_to_compact_or_too_little_shrink_the_turn_fails_as_context_overflow() -> None:
    nothing = RecoveryBridge.nothing_to_compact()
    assert nothing.kind == "context_overflow" and "nothing left to compact" in nothing.message
    small = RecoveryBridge.compaction_too_small(9000, 8800)
    assert small.kind == "context_overflow" and "(9000 → 8800 estimated tokens)" in small.message


def test_a_structure_rejected_after_every_repair_fails_saying_which_repairs_were_tried() -> None:
    words = (
        "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1 "
        "(also rejected when re-sent as: strict_structure)"
    )
    error = LlmError(LlmErrorKind.REQUEST_STRUCTURE, status=400, message=words)
    action = RecoveryBridge().on_failed(error, estimated_tokens=1, window=10)
    assert isinstance(action, FailTurn) and action.kind == "request_structure"
    assert "every tool call paired with one result" in action.message
    assert "strictest structure" in action.message and "session stays usable" in action.message
    assert action.message.endswith(f"The provider said: {words} (HTTP 400)")
