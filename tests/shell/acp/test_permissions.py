"""The editor's answer to a permission request: only a selected allow option allows."""

from __future__ import annotations

import msgspec
import pytest

from shell.acp._permissions import decision_from_answer


@pytest.mark.parametrize(
    ("result", "decision"),
    [
        (b'{"outcome": {"outcome": "selected", "optionId": "allow_once"}}', "allow_once"),
        (b'{"outcome": {"outcome": "selected", "optionId": "allow_always"}}', "allow_always"),
        (b'{"outcome": {"outcome": "selected", "optionId": "reject"}}', "deny"),
        (b'{"outcome": {"outcome": "selected", "optionId": "something else"}}', "deny"),
        (b'{"outcome": {"outcome": "cancelled"}}', "deny"),
        (b'{"outcome": "yes"}', "deny"),
        (b"null", "deny"),
    ],
)
def test_an_answer_allows_only_when_it_selects_an_allow_option(result: bytes, decision: str) -> None:
    assert decision_from_answer("c", msgspec.Raw(result), None).decision == decision


def test_an_error_answer_is_a_denial() -> None:
    made = decision_from_answer("c", None, {"code": -32603, "message": "boom"})
    assert made.decision == "deny" and "boom" in made.reason
