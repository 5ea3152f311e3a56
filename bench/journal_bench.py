"""The journal's cost: the host's CPU per turn with every message and event stored as it comes, against
the same turns with the session's writes to the store made no-ops.

A turn here is three model steps, two of which call a tool (``read_file``, then ``write_file``), then an
answer: what a resumed turn reads back is its prompt, three answers, two tool results and its events,
each written as it comes. The provider runs in a process of its own (bench/_services.py), so the figure
is the CPU of the host's process alone (``time.process_time``): ``--sessions`` sessions, each in a thread
of its own, run ``--turns`` turns one after the other. Each round runs both configurations in a host of
its own (the order rotates); a ratio is the median over the rounds of the ratio within a round.

- journaled: the default host on a SQLite store (WAL, ``synchronous = NORMAL``, group commit);
- not journaled: the same host, with the store object's message and event writes (``write_turn``, which
  every write of a turn's messages and events goes through, and ``begin_turn``, ``end_turn``) answering at
  once without touching the database.
  The chat state still keeps the history in memory, so the turns run alike; nothing of them survives the
  process.

Run: ``.venv/bin/python bench/journal_bench.py [--sessions N] [--turns N] [--rounds N] [--json]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from _services import outside_services
from run_all import Figure, format_table

from shell import Host, TurnCompleted, load_settings
from shell.store import TurnWrite

CONFIGS = ("journaled", "not journaled")


class JournalCost(msgspec.Struct, frozen=True):
    """CPU-microseconds per turn of each round, by configuration."""

    rounds: dict[str, list[float]]
    turns_per_round: int
    writes_per_turn: float
    """The session writes a turn makes (counted where the not-journaled store answers them)."""


def _unjournaled(store: Any, counted: list[int]) -> None:
    """Make ``store``'s message and event writes answer at once, writing nothing; count them."""
    seqs = itertools.count(1)

    def write_turn(
        _session: str, _turn: int, *, messages: Sequence[Any] = (), events: Sequence[Any] = (), **_: Any
    ) -> TurnWrite:
        counted[0] += 1
        return TurnWrite(tuple(next(seqs) for _ in messages), tuple(next(seqs) for _ in events))

    def mark(*_: Any) -> None:
        counted[0] += 1

    store.write_turn = write_turn
    store.begin_turn = store.end_turn = mark


def _one_round(
    config: str, base: dict[str, str], tmp: Path, sessions: int, turns: int, counted: list[int]
) -> float:
    env = dict(base, TURNKEEP_STORE__PATH=str(tmp / f"{config.replace(' ', '-')}-{time.monotonic_ns()}.db"))
    with Host(load_settings(environ=env)) as host:
        opened = [host.open(tmp / f"ws{i}") for i in range(sessions)]
        for i, session in enumerate(opened):
            (tmp / f"ws{i}" / "notes.txt").write_text("notes\n")
            session.run("warm up")
        if config == "not journaled":
            _unjournaled(host.agent_host.store, counted)
        failures: list[object] = []

        def work(session: Any) -> None:
            for n in range(turns):
                end = session.run(f"turn {n}")
                if not isinstance(end, TurnCompleted) or end.steps != 3:
                    failures.append(end)

        threads = [threading.Thread(target=work, args=(s,)) for s in opened]
        cpu = time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300.0)
        cpu = time.process_time() - cpu
        if failures or any(thread.is_alive() for thread in threads):
            raise RuntimeError(f"{config}: turns did not complete: {failures[:3]}")
    return cpu / (sessions * turns) * 1e6


def measure(*, sessions: int, turns: int, rounds: int) -> JournalCost:
    """Both configurations, ``rounds`` times, each round in hosts of their own."""
    per_round: dict[str, list[float]] = {config: [] for config in CONFIGS}
    counted = [0]
    with outside_services(tools=True) as services, tempfile.TemporaryDirectory() as scratch:
        base = {
            "TURNKEEP_PROVIDER__BASE_URL": services.provider_url,
            "TURNKEEP_TOOLS__ALLOW": "write_file",
        }
        for index in range(rounds):
            order = CONFIGS if index % 2 == 0 else tuple(reversed(CONFIGS))
            for config in order:
                per_round[config].append(_one_round(config, base, Path(scratch), sessions, turns, counted))
    return JournalCost(per_round, sessions * turns, counted[0] / (sessions * turns * rounds))


def figures(cost: JournalCost) -> list[Figure]:
    """The per-turn CPU of each configuration and the journal's share, for the results table."""
    journaled = statistics.median(cost.rounds["journaled"])
    bare = statistics.median(cost.rounds["not journaled"])
    ratio = statistics.median(
        j / b for j, b in zip(cost.rounds["journaled"], cost.rounds["not journaled"], strict=True)
    )
    return [
        Figure(
            benchmark="journal",
            figure="host CPU per 3-step tool turn, journaled",
            value=f"{journaled:,.0f} us",
            baseline=f"{bare:,.0f} us (not journaled)",
            ratio=ratio,
            target="<= 1.10",
            met=ratio <= 1.10,
        ),
        Figure(
            benchmark="journal",
            figure="the journal's CPU per turn",
            value=f"{journaled - bare:,.0f} us",
            baseline=f"{cost.writes_per_turn:.0f} writes a turn",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cost = measure(sessions=args.sessions, turns=args.turns, rounds=args.rounds)
    if args.json:
        print(msgspec.json.encode(figures(cost)).decode())
        return
    print(format_table(figures(cost)))
    for config, values in cost.rounds.items():
        print(f"{config}: " + ", ".join(f"{v:,.0f}" for v in values) + " us per turn")


if __name__ == "__main__":
    main()
