"""Named scenarios: a scripted model, its faults and its provider knobs, and what the host needs for it.

Each scenario answers any prompt, so a newcomer can type anything and watch one behaviour of the runtime:

- ``coding``: a coding task through the file tools and ``shell`` (list, write, run, read), then an answer;
  one of its model calls meets a 429 and is retried;
- ``flaky``: a 429 with ``Retry-After``, a 500 and a connection reset mid-stream in every turn, all retried;
- ``expiring``: access tokens that wear out every two requests, refreshed at the OAuth-style endpoint;
- ``compacting``: long answers in a small context window, so the second or third prompt compacts;
- ``looping``: a model that repeats the same tool call until the doom-loop detection stops the turn.

A scenario states what the host must do for it in `HostNeeds` (tools to allow without asking, the context
window, an OAuth refresh token, short retry delays); the command line turns those into settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from ._auth import DEFAULT_REFRESH_TOKEN, TokenExpiry
from ._server import FakeProvider
from .faults import Fault, FaultPlan
from .script import Conversation, FinalAnswer, Script, ToolStep

__all__ = ["SCENARIOS", "HostNeeds", "Scenario", "UnknownScenario", "scenario"]

_NOTES = "# Notes\n\n- list the workspace\n- write this file\n- run a command\n- read the result\n- answer\n"


class UnknownScenario(ValueError):
    """No scenario has the name asked for; the message lists the names there are."""


class HostNeeds(msgspec.Struct, frozen=True, kw_only=True):
    """What a host must be told to play a scenario, in the host's own terms.

    `allow_tools` run without asking. `context_window` and `max_output_tokens` (tokens), when set, replace
    the host's window; `keep_recent_turns` the turns a compaction keeps verbatim. `refresh_token`, when
    set, means the host authenticates with an access token it refreshes at the provider's `token_url`
    using this refresh token. `retry_base_delay` and `retry_max_delay` (seconds), when set, replace the
    host's back-off (a `Retry-After` the provider sends is honoured regardless).
    """

    allow_tools: tuple[str, ...] = ()
    context_window: int | None = None
    max_output_tokens: int | None = None
    keep_recent_turns: int | None = None
    refresh_token: str | None = None
    retry_base_delay: float | None = None
    retry_max_delay: float | None = None

    def describe(self, token_url: str) -> str:
        """What a host must be told, in words, for a provider whose refresh endpoint is `token_url`;
        "nothing" when it needs nothing."""
        parts = []
        if self.allow_tools:
            parts.append(f"allow {', '.join(self.allow_tools)} without asking")
        if self.context_window is not None:
            output = "" if self.max_output_tokens is None else f" ({self.max_output_tokens} for the answer)"
            parts.append(f"a {self.context_window}-token context window{output}")
        if self.keep_recent_turns is not None:
            parts.append(f"keep {self.keep_recent_turns} recent turn(s) verbatim when compacting")
        if self.refresh_token is not None:
            parts.append(f"refresh access tokens at {token_url} with the refresh token {self.refresh_token}")
        if self.retry_base_delay is not None or self.retry_max_delay is not None:
            parts.append(
                f"back off from {self.retry_base_delay} s to {self.retry_max_delay} s between retries"
            )
        return "; ".join(parts) or "nothing"


@dataclass(frozen=True)
class Scenario:
    """One named scenario: what it shows (`description`), the provider that plays it, the host's needs.

    `faults` is the scenario's own fault queue; `provider()` combines it with a named fault profile.
    """

    name: str
    description: str
    script: Script
    needs: HostNeeds
    faults: tuple[Fault | None, ...] = ()
    token_expiry: TokenExpiry | None = None
    context_window: int | None = None

    def fault_plan(self, profile: str = "none", seed: int = 0) -> FaultPlan:
        """The scenario's fault queue first, then the faults the named profile draws with `seed`.

        Raises ValueError for an unknown profile."""
        return msgspec.structs.replace(FaultPlan.profile(profile, seed=seed), queue=self.faults)

    def provider(
        self, *, profile: str = "none", seed: int = 0, host: str = "127.0.0.1", port: int = 0
    ) -> FakeProvider:
        """A provider (not started) that plays this scenario, with the faults of `fault_plan`."""
        return FakeProvider(
            self.script,
            faults=self.fault_plan(profile, seed),
            host=host,
            port=port,
            token_expiry=self.token_expiry,
            context_window=self.context_window,
        )


_CODING_STEPS = (
    ToolStep([("list_dir", {"path": "."})], text="Let me look at the workspace first."),
    ToolStep(
        [("write_file", {"path": "notes.md", "content": _NOTES})], text="It is empty; I will write notes."
    ),
    ToolStep([("shell", {"command": "wc -l notes.md && cat notes.md"})], text="Now let me check the file."),
    ToolStep([("read_file", {"path": "notes.md", "start_line": 3, "end_line": 4})]),
    FinalAnswer(
        "I listed the workspace, wrote notes.md with five items, counted its lines with `wc` and read two "
        "of them back. The workspace now holds notes.md."
    ),
)
_CODING_TOOLS = ("list_dir", "write_file", "read_file", "shell")
_CODING_ROUND: tuple[Fault | None, ...] = (None, Fault.rate_limit(retry_after=1), None, None, None, None)
"""One turn of `coding`: its second model call meets a 429 with Retry-After and is sent again."""

_FLAKY_ROUND: tuple[Fault | None, ...] = (
    Fault.rate_limit(retry_after=1),
    None,
    Fault.server_error(),
    Fault.reset(after_chunks=6),
    None,
)
"""One turn of `flaky`: a 429 on the first step, then a 500 and a reset on the answer; both retried."""

_LONG_ANSWER = " ".join(
    f"Point {n}: the history keeps every message, "
    "and a summary replaces the oldest turns when the window fills."
    for n in range(1, 9)
)


def _looping(_conversation: Conversation) -> ToolStep:
    return ToolStep([("list_dir", {"path": "."})], text="Let me look again.")


SCENARIOS: Mapping[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "coding",
            "a coding task: lists the workspace, writes a file, runs a command, reads it back, answers; "
            "one model call meets a 429 and is retried",
            Script.task(_CODING_STEPS),
            HostNeeds(allow_tools=_CODING_TOOLS),
            faults=_CODING_ROUND * 100,
        ),
        Scenario(
            "flaky",
            "every turn meets a 429 with Retry-After, a 500 and a reset mid-stream; the turn still completes",
            Script.task(
                [
                    ToolStep([("list_dir", {"path": "."})], text="Looking around."),
                    FinalAnswer(
                        "Every failure on the way was retried, and this answer arrived in one piece."
                    ),
                ]
            ),
            HostNeeds(allow_tools=("list_dir",), retry_base_delay=0.3, retry_max_delay=1.0),
            faults=_FLAKY_ROUND * 100,
        ),
        Scenario(
            "expiring",
            "access tokens expire every 2 requests and are refreshed at the OAuth-style endpoint",
            Script.task(_CODING_STEPS),
            HostNeeds(allow_tools=_CODING_TOOLS, refresh_token=DEFAULT_REFRESH_TOKEN),
            token_expiry=TokenExpiry(requests_per_token=2),
        ),
        Scenario(
            "compacting",
            "long answers in a 1000-token window: the second or third prompt compacts the history",
            Script.text(_LONG_ANSWER),
            HostNeeds(context_window=1000, max_output_tokens=200, keep_recent_turns=1),
        ),
        Scenario(
            "looping",
            "the model repeats the same tool call until the doom-loop detection fails the turn",
            Script(_looping, name="looping"),
            HostNeeds(allow_tools=("list_dir",)),
        ),
    )
}
"""Every scenario, by name, in the order `turnkeep fake-provider --list` shows them."""


def scenario(name: str) -> Scenario:
    """The scenario called `name`. Raises `UnknownScenario`, naming every scenario, for any other name."""
    found = SCENARIOS.get(name)
    if found is None:
        raise UnknownScenario(f"unknown scenario {name!r}; expected one of {', '.join(SCENARIOS)}")
    return found
