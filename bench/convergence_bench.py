"""Convergence under faults: the share of turns that complete when the provider misbehaves.

The same fault plan (``FaultPlan.profile("heavy", seed=...)``: about 40 % of model calls get a transient
fault, at most 3 per request body) is served by a fresh embedded provider to each side, one turn after
another, so both draw the same sequence of decisions:

* turnkeep: one session of a ``Host``, a turn counted complete when it ends ``TurnCompleted``;
* the official ``openai`` client with its default retries, ``chat.completions.create(stream=True)``, a
  turn counted complete when the stream finishes without an exception.

Both answers are also checked against the script's answer, since a stream can finish without an
exception and still be empty. Every fault the profile draws is transient and within turnkeep's retry
budget (10 attempts per step), so the target is 100 % for turnkeep.
Run: ``.venv/bin/python bench/convergence_bench.py [--turns N] [--seed S] [--json]``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import msgspec
import openai
from run_all import Figure, format_table

from sampler.fake import FakeProvider, FaultPlan, Script
from shell import Host, Retrying, TurnCompleted, load_settings


class Side(msgspec.Struct, frozen=True):
    """What one client made of the turns."""

    turns: int
    completed: int
    correct: int
    failures: dict[str, int]
    retries: int
    requests: int
    faults: int
    seconds: float
    backoff_seconds: float = 0.0


def _expected(turn: int) -> str:
    return f"echo: turn {turn} of the convergence run"


def _prompt(turn: int) -> str:
    return f"turn {turn} of the convergence run"


def run_turnkeep(turns: int, plan: FaultPlan) -> Side:
    """``turns`` turns, one after another, in one turnkeep session."""
    started = time.monotonic()
    completed = correct = retries = 0
    backoff = 0.0
    failures: Counter[str] = Counter()
    with (
        tempfile.TemporaryDirectory(prefix="turnkeep-convergence-") as tmp,
        FakeProvider(Script.echo(), faults=plan) as fake,
    ):
        settings = load_settings(
            environ={
                "TURNKEEP_PROVIDER__BASE_URL": fake.base_url,
                "TURNKEEP_PROVIDER__MODEL": "fake-model",
                "TURNKEEP_STORE__PATH": f"{tmp}/sessions.db",
            }
        )
        with Host(settings) as host:
            session = host.open(Path(tmp) / "workspace")
            for turn in range(turns):
                events = list(session.prompt(_prompt(turn), event_timeout=300))
                waits = [e.delay for e in events if isinstance(e, Retrying)]
                retries += len(waits)
                backoff += sum(waits)
                end = events[-1]
                if isinstance(end, TurnCompleted):
                    completed += 1
                    correct += end.text == _expected(turn)
                else:
                    failures[f"{type(end).__name__}:{getattr(end, 'kind', getattr(end, 'reason', ''))}"] += 1
        stats = fake.stats
    return Side(
        turns=turns,
        completed=completed,
        correct=correct,
        failures=dict(failures),
        retries=retries,
        requests=stats.requests,
        faults=stats.total_faults,
        seconds=time.monotonic() - started,
        backoff_seconds=backoff,
    )


def run_openai(turns: int, plan: FaultPlan) -> Side:
    """``turns`` streamed completions, one after another, with the official client's default retries."""
    started = time.monotonic()
    completed = correct = 0
    failures: Counter[str] = Counter()
    with FakeProvider(Script.echo(), faults=plan) as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="bench")
        for turn in range(turns):
            try:
                stream = client.chat.completions.create(
                    model="fake-model", messages=[{"role": "user", "content": _prompt(turn)}], stream=True
                )
                text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            except Exception as exc:
                failures[type(exc).__name__] += 1
                continue
            completed += 1
            correct += text == _expected(turn)
        client.close()
        stats = fake.stats
    return Side(
        turns=turns,
        completed=completed,
        correct=correct,
        failures=dict(failures),
        retries=stats.requests - turns,
        requests=stats.requests,
        faults=stats.total_faults,
        seconds=time.monotonic() - started,
    )


def figures(ours: Side, theirs: Side, seed: int) -> list[Figure]:
    """The figures of one run, as rows of the benchmark table."""

    def share(side: Side, count: int) -> float:
        return count / side.turns

    rows = [
        Figure(
            benchmark="convergence",
            figure=f"turns completed, heavy faults (seed {seed})",
            value=f"{share(ours, ours.completed):.0%} ({ours.completed}/{ours.turns})",
            baseline=f"{share(theirs, theirs.completed):.0%} (openai client)",
            ratio=share(ours, ours.completed) / max(share(theirs, theirs.completed), 1e-9),
            target="100 %",
            met=ours.completed == ours.turns,
        ),
        Figure(
            benchmark="convergence",
            figure="  of those, with the full answer",
            value=f"{share(ours, ours.correct):.0%} ({ours.correct}/{ours.turns})",
            baseline=f"{share(theirs, theirs.correct):.0%} (openai client)",
            ratio=share(ours, ours.correct) / max(share(theirs, theirs.correct), 1e-9),
            target="100 %",
            met=ours.correct == ours.turns,
        ),
        Figure(
            benchmark="convergence",
            figure="  faults injected / model calls",
            value=f"{ours.faults}/{ours.requests}",
            baseline=f"{theirs.faults}/{theirs.requests} (openai client)",
        ),
        Figure(
            benchmark="convergence",
            figure="  seconds for all turns",
            value=f"{ours.seconds:.1f} s",
            baseline=f"{theirs.seconds:.1f} s (openai client)",
            ratio=ours.seconds / theirs.seconds,
        ),
    ]
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Run both sides and print the table (or, with ``--json``, the figures as JSON)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    logging.getLogger("openai").setLevel(logging.ERROR)
    plan = FaultPlan.profile("heavy", seed=args.seed)
    ours = run_turnkeep(args.turns, plan)
    theirs = run_openai(args.turns, plan)
    rows = figures(ours, theirs, args.seed)
    if args.json:
        print(msgspec.json.encode(rows).decode())
        return
    print(format_table(rows))
    print(
        f"turnkeep: {ours.retries} retries absorbed ({ours.backoff_seconds:.1f} s of back-off); "
        f"did not complete: {ours.failures or 'none'}"
    )
    print(f"openai client: did not complete: {theirs.failures or 'none'}")


if __name__ == "__main__":
    main()
