"""The provider edge's costs, each against a baseline measured in the same run.

- classifying an error body (``classify_http_error``, over the real bodies of
  ``tests/sampler/data/error_bodies.py``) against receiving one error response: a request answered with a
  400 by the embedded provider on loopback, through httpx (the least an error costs before it is
  classified);
- checking a history for repair before each request (``plan_repair`` on a healthy projection, the usual
  case) against the token estimate the chat state already makes of the same history for each request.

Run: ``.venv/bin/python bench/edge_bench.py [--rounds R] [--messages N] [--requests N]``. Prints one line
per figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sampler import AssistantMessage, Message, ToolCall, ToolMessage, ToolResult, UserMessage
from sampler.errors import classify_http_error
from sampler.fake import FakeProvider, Fault, FaultPlan, Script
from shell.session import TokenEstimator, plan_repair
from tests.sampler.data.error_bodies import TABLE

_WARM_UP = 10


def best_of(rounds: int, work: Callable[[], None]) -> float:
    """The fastest of ``rounds`` timings of ``work``, in seconds (the least disturbed by the machine)."""
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def error_round_trip(requests: int) -> float:
    """The median time of one request answered with a 400 by the embedded provider, in seconds."""
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    body = msgspec.json.encode(payload)
    faults = FaultPlan.scripted([Fault.context_overflow()] * (requests + _WARM_UP))
    timings = []
    with FakeProvider(Script.text("never"), faults=faults) as provider, httpx.Client() as client:
        url = provider.base_url + "/chat/completions"
        for n in range(requests + _WARM_UP):
            started = time.perf_counter()
            response = client.post(url, content=body, headers={"content-type": "application/json"})
            elapsed = time.perf_counter() - started
            assert response.status_code == 400, response.status_code
            if n >= _WARM_UP:
                timings.append(elapsed)
    return statistics.median(timings)


def history(messages: int) -> list[tuple[int, int, Message]]:
    """A healthy projection of ``messages`` messages: prompts, tool rounds and answers."""
    out: list[Message] = []
    n = 0
    while len(out) < messages:
        n += 1
        call = ToolCall(f"call_{n}", "read_file", f'{{"path": "src/module_{n}.py"}}')
        out += [
            UserMessage.of_text(f"look at module {n} and tell me what it does " * 3),
            AssistantMessage("reading it", (call,)),
            ToolMessage(ToolResult(call.id, "def f():\n    return 1\n" * 40)),
            AssistantMessage(f"module {n} defines f, which returns 1 " * 4),
        ]
    return [(seq, seq // 4 + 1, m) for seq, m in enumerate(out[:messages], start=1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    bodies = [(b.status, b.body.encode(), b.headers) for b in TABLE]

    def classify() -> None:
        for status, body, headers in bodies:
            classify_http_error(status, body, headers)

    ours = best_of(args.rounds, classify) / len(bodies)
    base = error_round_trip(args.requests)
    print(
        f"classify one error body ({len(bodies)} real ones): {ours * 1e6:.1f} us; one error response over "
        f"loopback: {base * 1e6:.1f} us; ratio {ours / base:.2f}"
    )

    entries = history(args.messages)
    messages = [m for _, _, m in entries]
    estimator = TokenEstimator()
    assert plan_repair(entries) is None
    check = best_of(args.rounds, lambda: plan_repair(entries))
    estimate = best_of(args.rounds, lambda: estimator.estimate(messages))
    print(
        f"repair check of a {args.messages}-message history: {check * 1e3:.3f} ms; token estimate of it: "
        f"{estimate * 1e3:.3f} ms; ratio {check / estimate:.2f}"
    )


if __name__ == "__main__":
    main()
