"""turnkeep's own notices: what a turn goes through that ACP has no update for, for a client that asks."""

from __future__ import annotations

from typing import Any

import pytest

from shell import events as ev
from shell.acp._notices import notice_of, wants_notices


@pytest.mark.parametrize(
    ("meta", "wanted"),
    [
        (None, False),
        ({}, False),
        ({"turnkeep/notices": False}, False),
        ({"turnkeep/notices": "yes"}, False),
        ({"turnkeep/notices": True}, True),
    ],
)
def test_only_a_client_that_says_so_gets_notices(meta: dict[str, Any] | None, wanted: bool) -> None:
    assert wants_notices(meta) is wanted


@pytest.mark.parametrize(
    ("event", "kind", "says"),
    [
        (
            ev.Retrying("s1", 2, 2, 5, 0.5, "status", 503, "the provider is unavailable", True),
            "retrying",
            "attempt 2 of 5",
        ),
        (ev.Queued("s1", 2, 3, "concurrency", None), "queued", "place 3 in line"),
        (ev.Queued("s1", 2, 0, "cool_down", 1.5), "queued", "about 1.5 s"),
        (ev.CompactionStarted("s1", 2, "overflow", 9000, 8000), "compaction_started", "9000 of 8000 tokens"),
        (
            ev.CompactionFinished("s1", 2, True, 12, 9000, 3000),
            "compaction_finished",
            "12 messages: 9000 -> 3000",
        ),
        (
            ev.CompactionFinished("s1", 2, False, 0, 9000, 8900, "too little"),
            "compaction_finished",
            "too little",
        ),
        (ev.DoomLoopWarning("s1", 2, "same call three times"), "doom_loop_warning", "repeats itself"),
        (
            ev.McpServerStatus("s1", "files", "unavailable", 3, "gave up"),
            "mcp_status",
            "files: unavailable: gave up",
        ),
    ],
)
def test_each_notice_says_what_happened_and_carries_the_event(event: Any, kind: str, says: str) -> None:
    notice = notice_of("s1", event)
    assert notice is not None
    assert (notice["sessionId"], notice["kind"]) == ("s1", kind)
    assert says in notice["message"]
    assert notice["event"] == ev.event_to_json_dict(event)


@pytest.mark.parametrize(
    "event",
    [ev.TextDelta("s1", 1, "hi"), ev.TurnStarted("s1", 1, "go"), ev.TurnCompleted("s1", 1, "done", 1)],
)
def test_what_acp_has_an_update_for_makes_no_notice(event: Any) -> None:
    assert notice_of("s1", event) is None


def test_a_long_message_is_clipped() -> None:
    notice = notice_of("s1", ev.McpServerStatus("s1", "files", "unavailable", 3, "x" * 10_000))
    assert notice is not None and len(notice["message"]) == 2000
