"""Provider gate: many sessions sharing one rate-limited provider account, with and without the gate.

The embedded provider is limited to R requests per second (a bucket holding one second of them) and sends
Retry-After and OpenAI's and Anthropic's rate-limit headers, as hosted providers do. N sessions each run a
three-step turn (two tool rounds, then the answer) at the same instant:

- (a) turnkeep with its provider gate (the default);
- (b) turnkeep with the gate disabled (``[provider.limits] enabled = false``): each sampler meets the limit
  on its own and retries with its own back-off;
- (c) the official ``openai`` client with its default retries, one task per session on asyncio.

For each: requests sent, 429s received (and their share), the time until every turn ended against the
ideal (total requests / R), turn latency p50 / p95 / max, fairness (slowest over median session), and
turns that failed. All three run in this process against the same provider settings.

Run: ``.venv/bin/python bench/provider_gate_bench.py [--sessions N] [--rate R] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import queue
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import openai
from run_all import Figure, format_table

from sampler.fake import FakeProvider, FinalAnswer, RateLimit, Script, ToolStep
from shell import AgentHost, Subscribe, UserPrompt, load_settings
from shell.events import TERMINAL_EVENTS, TurnCompleted

_STEPS = 3


class Side(msgspec.Struct, frozen=True):
    """What one way of running the sessions achieved."""

    name: str
    sessions: int
    completed: int
    requests: int
    refused: int
    seconds: float
    latencies: list[float]

    @property
    def refused_share(self) -> float:
        return self.refused / max(self.requests, 1)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def _script() -> Script:
    listing = ToolStep([("list_dir", {"path": "."})])
    return Script.task([listing, listing, FinalAnswer("done")])


def _provider(rate: float) -> FakeProvider:
    return FakeProvider(_script(), rate_limit=RateLimit(requests_per_minute=rate * 60, burst_seconds=1.0))


def _arrived(inbox: queue.Queue[tuple[float, Any]], event: Any) -> None:
    inbox.put((time.monotonic(), event))


def run_turnkeep(sessions: int, rate: float, *, gate: bool) -> Side:
    """Every session's turn at once through one host; the gate on or off."""
    with tempfile.TemporaryDirectory(prefix="turnkeep-gate-bench-") as tmp, _provider(rate) as fake:
        settings = load_settings(
            environ={
                "TURNKEEP_PROVIDER__BASE_URL": fake.base_url,
                "TURNKEEP_PROVIDER__MODEL": "fake-model",
                "TURNKEEP_STORE__PATH": f"{tmp}/sessions.db",
                "TURNKEEP_TOOLS__ALLOW": "list_dir",
                "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": str(sessions),
                "TURNKEEP_PROVIDER__LIMITS__ENABLED": "true" if gate else "false",
            }
        )
        with AgentHost(settings) as host:
            inboxes = []
            for n in range(sessions):
                address = host.open(Path(tmp) / f"ws{n}", session_id=f"s{n}")
                inbox: queue.Queue[tuple[float, Any]] = queue.Queue()
                address.ask(Subscribe(functools.partial(_arrived, inbox)))
                inboxes.append((address, inbox))
            before = fake.stats
            started = time.monotonic()
            for address, _ in inboxes:
                address.tell(UserPrompt("list it"))
            latencies, completed, failures = [], 0, Counter[str]()
            for _, inbox in inboxes:
                at, event = inbox.get(timeout=600)
                while not isinstance(event, TERMINAL_EVENTS):
                    at, event = inbox.get(timeout=600)
                latencies.append(at - started)
                completed += isinstance(event, TurnCompleted)
                if not isinstance(event, TurnCompleted):
                    failures[f"{type(event).__name__}: {getattr(event, 'message', '')[:80]}"] += 1
            seconds = max(latencies)
            after = fake.stats
    for failure, count in failures.most_common(3):
        print(f"  {'gate' if gate else 'no gate'}: {count} x {failure}", file=sys.stderr)
    return Side(
        name="turnkeep, gate" if gate else "turnkeep, no gate",
        sessions=sessions,
        completed=completed,
        requests=after.requests - before.requests,
        refused=after.rejections.get("rate_limit", 0) - before.rejections.get("rate_limit", 0),
        seconds=seconds,
        latencies=latencies,
    )


def run_openai(sessions: int, rate: float) -> Side:
    """One asyncio task per session, each driving its three steps with the official client's default
    retries (it honours Retry-After)."""

    async def one(client: openai.AsyncOpenAI, started: float) -> tuple[bool, float]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "list it"}]
        tools = [{"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object"}}}]
        try:
            for _ in range(_STEPS):
                answer = await client.chat.completions.create(
                    model="fake-model",
                    messages=messages,
                    tools=tools,  # type: ignore[arg-type]
                )
                message = answer.choices[0].message
                if not message.tool_calls:
                    return True, time.monotonic() - started
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": "a b c"})
        except openai.OpenAIError:
            return False, time.monotonic() - started
        return False, time.monotonic() - started

    async def main(fake: FakeProvider) -> list[tuple[bool, float]]:
        async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="bench") as client:
            started = time.monotonic()
            return await asyncio.gather(*(one(client, started) for _ in range(sessions)))

    with _provider(rate) as fake:
        started = time.monotonic()
        results = asyncio.run(main(fake))
        seconds = time.monotonic() - started
        stats = fake.stats
    return Side(
        name="openai client",
        sessions=sessions,
        completed=sum(ok for ok, _ in results),
        requests=stats.requests,
        refused=stats.rejections.get("rate_limit", 0),
        seconds=seconds,
        latencies=[latency for _, latency in results],
    )


def figures(sides: list[Side], rate: float) -> list[Figure]:
    """The table: each side against the ideal, and (a) against (b) and (c)."""
    ideal = sides[0].sessions * _STEPS / rate
    rows: list[Figure] = []
    gated = sides[0]
    for side in sides:
        is_gate = side is gated
        fairness = side.percentile(1.0) / max(statistics.median(side.latencies), 1e-9)
        rows += [
            Figure(
                benchmark="provider gate",
                figure=f"{side.name}: 429s / requests",
                value=f"{side.refused} / {side.requests}",
                baseline=f"{side.sessions * _STEPS} needed",
                ratio=side.refused_share,
                target="<= 0.02" if is_gate else "",
                met=side.refused_share <= 0.02 if is_gate else None,
            ),
            Figure(
                benchmark="provider gate",
                figure=f"{side.name}: all turns ended",
                value=f"{side.seconds:.1f} s ({side.completed}/{side.sessions} completed)",
                baseline=f"ideal {ideal:.1f} s",
                ratio=side.seconds / ideal,
                target="<= 1.15" if is_gate else "",
                met=side.seconds / ideal <= 1.15 and side.completed == side.sessions if is_gate else None,
            ),
            Figure(
                benchmark="provider gate",
                figure=f"{side.name}: turn latency p50 / p95 / max",
                value=f"{statistics.median(side.latencies):.1f} / {side.percentile(0.95):.1f} / "
                f"{side.percentile(1.0):.1f} s",
                baseline="slowest / median",
                ratio=fairness,
                target="<= 3" if is_gate else "",
                met=fairness <= 3 if is_gate else None,
            ),
        ]
    for other in sides[1:]:
        rows.append(
            Figure(
                benchmark="provider gate",
                figure=f"gate vs {other.name}: wasted requests",
                value=f"{gated.refused}",
                baseline=f"{other.refused}",
                ratio=gated.refused / max(other.refused, 1),
                target="< 1",
                met=gated.refused < other.refused or other.refused == 0 == gated.refused,
            )
        )
        both = gated.completed == gated.sessions and other.completed == other.sessions
        rows.append(
            Figure(
                benchmark="provider gate",
                figure=f"gate vs {other.name}: time until every turn completed",
                value=f"{gated.seconds:.1f} s" if gated.completed == gated.sessions else "never",
                baseline=f"{other.seconds:.1f} s"
                if other.completed == other.sessions
                else f"never ({other.sessions - other.completed} turns failed)",
                ratio=gated.seconds / other.seconds if both else None,
                target="< 1",
                met=gated.completed == gated.sessions and (not both or gated.seconds < other.seconds),
            )
        )
    return rows


def main() -> None:
    """Run the three sides and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second the provider allows")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    sides = [
        run_turnkeep(args.sessions, args.rate, gate=True),
        run_turnkeep(args.sessions, args.rate, gate=False),
        run_openai(args.sessions, args.rate),
    ]
    table = figures(sides, args.rate)
    print(msgspec.json.encode(table).decode() if args.json else format_table(table))


if __name__ == "__main__":
    main()
