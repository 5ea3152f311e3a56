"""Many streams in one host: event latency at N concurrent streaming turns against one turn alone, the
knee (the largest N whose latency holds), and a burst of prompts to idle sessions.

**Streams.** For each N in ``--streams``, a fresh host process opens N sessions and runs, in alternation,
``--alone`` turns of one session alone and one turn of all N at once, ``--rounds`` times
(``scale_bench.measure_size`` with every session active). The model is a paced streaming server in a
process of its own (``--chunks`` chunks ``--interval`` seconds apart: 50 chunks a second by default), and
every chunk carries the time it was written to the socket; an event's latency is the time from that write
until the host hands the ``TextDelta`` to its subscriber. A size holds when the median latency at N is at
most 2x, and the 99th percentile at most 3x, the median and 99th percentile alone in the same process.
The knee is the largest N that holds.

**Burst.** ``--burst`` idle sessions (opened and warmed by one turn each, none passivated) are prompted
from one thread as fast as it can tell; the figures are the turn starts per second (the prompts over the
time from the first prompt to the last ``TurnStarted`` event) and the time from the first prompt until
every session has its first ``TextDelta``.

Run: ``.venv/bin/python bench/streams_bench.py [--streams 100,200,400,800] [--burst 1000] [--json]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from _paced_server import paced_server
from run_all import Figure, format_table
from scale_bench import SizeResult, _pct

from shell import AgentHost, Subscribe, TextDelta, UserPrompt, load_settings
from shell.events import TERMINAL_EVENTS, TurnStarted


class BurstResult(msgspec.Struct, frozen=True):
    """What one burst measured."""

    sessions: int
    tell_seconds: float
    """From the first prompt told to the last."""
    start_seconds: float
    """From the first prompt told to the last TurnStarted."""
    first_delta_seconds: float
    """From the first prompt told until every session had a TextDelta."""
    ended: int


class _Stamps:
    """A session's subscriber: the arrival of its turn's start, first delta and end."""

    def __init__(self) -> None:
        self.started = 0
        self.first_delta = 0
        self.done = threading.Event()

    def __call__(self, event: Any) -> None:
        now = time.monotonic_ns()
        if isinstance(event, TurnStarted) and not self.started:
            self.started = now
        elif isinstance(event, TextDelta) and not self.first_delta:
            self.first_delta = now
        elif isinstance(event, TERMINAL_EVENTS):
            self.done.set()


def measure_burst(sessions: int, url: str) -> BurstResult:
    """Open and warm ``sessions`` sessions, then prompt them all at once."""
    with tempfile.TemporaryDirectory(prefix="turnkeep-burst-") as tmp:
        root = Path(tmp)
        settings = load_settings(
            environ={
                "TURNKEEP_PROVIDER__BASE_URL": url,
                "TURNKEEP_PROVIDER__MODEL": "paced",
                "TURNKEEP_STORE__PATH": str(root / "sessions.db"),
                "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": str(sessions),
                "TURNKEEP_HOST__PASSIVATE_AFTER": "3600",
            }
        )
        with AgentHost(settings) as host:
            addresses, stamps = [], []
            for i in range(sessions):
                address = host.open(root / "ws" / f"b{i}", session_id=f"b{i:04d}")
                recorder = _Stamps()
                address.ask(Subscribe(recorder))
                addresses.append(address)
                stamps.append(recorder)
            for batch in range(0, sessions, 100):  # warm every session, 100 at a time
                for address in addresses[batch : batch + 100]:
                    address.tell(UserPrompt("warm up"))
                for recorder in stamps[batch : batch + 100]:
                    if not recorder.done.wait(300):
                        raise RuntimeError("a warm-up turn did not end within 300 s")
            for recorder in stamps:
                recorder.started = recorder.first_delta = 0
                recorder.done.clear()
            first = time.monotonic_ns()
            for address in addresses:
                address.tell(UserPrompt("go"))
            told = time.monotonic_ns()
            for recorder in stamps:
                if not recorder.done.wait(300):
                    raise RuntimeError("a burst turn did not end within 300 s")
            ended = sum(1 for r in stamps if r.done.is_set())
    return BurstResult(
        sessions=sessions,
        tell_seconds=(told - first) / 1e9,
        start_seconds=(max(r.started for r in stamps) - first) / 1e9,
        first_delta_seconds=(max(r.first_delta for r in stamps) - first) / 1e9,
        ended=ended,
    )


def _holds(r: SizeResult) -> tuple[float, float, bool]:
    alone, many = r.alone.delivery_ms, r.concurrent.delivery_ms
    median = _pct(many, 0.5) / _pct(alone, 0.5)
    p99 = _pct(many, 0.99) / _pct(alone, 0.99)
    return median, p99, median <= 2 and p99 <= 3 and r.concurrent.completed == r.concurrent.turns


def figures(streams: Sequence[SizeResult], burst: BurstResult | None) -> list[Figure]:
    """The rows of the table: each size's latency ratios, the knee, and the burst."""
    rows: list[Figure] = []
    knee = 0
    for r in streams:
        median, p99, holds = _holds(r)
        if holds:
            knee = max(knee, r.active)
        name = f"streams {r.active:,}"
        rows += [
            Figure(
                benchmark=name,
                figure="event latency median, all at once",
                value=f"{_pct(r.concurrent.delivery_ms, 0.5):.2f} ms",
                baseline=f"{_pct(r.alone.delivery_ms, 0.5):.2f} ms alone",
                ratio=median,
                target="<= 2",
                met=median <= 2,
            ),
            Figure(
                benchmark=name,
                figure="event latency p99, all at once",
                value=f"{_pct(r.concurrent.delivery_ms, 0.99):.2f} ms",
                baseline=f"{_pct(r.alone.delivery_ms, 0.99):.2f} ms alone",
                ratio=p99,
                target="<= 3",
                met=p99 <= 3,
            ),
            Figure(
                benchmark=name,
                figure="host CPU busy while all stream",
                value=f"{r.concurrent.cpu_seconds / max(r.concurrent.wall_seconds, 1e-9) * 100:.0f} %",
                baseline=f"{r.concurrent.completed}/{r.concurrent.turns} turns completed",
            ),
            Figure(
                benchmark=name,
                figure="host CPU per turn, all at once",
                value=f"{r.concurrent.cpu_seconds / max(r.concurrent.turns, 1) * 1000:.2f} ms",
                baseline=f"{r.alone.cpu_seconds / max(r.alone.turns, 1) * 1000:.2f} ms alone",
            ),
        ]
    if streams:
        rows.append(
            Figure(
                benchmark="streams",
                figure="knee: most streams whose latency holds",
                value=f"{knee:,}" if knee else "none measured",
                baseline=", ".join(f"{r.active:,}" for r in streams) + " measured",
                target=">= 400",
                met=knee >= 400,
            )
        )
    if burst is not None:
        rate = burst.sessions / burst.start_seconds
        rows += [
            Figure(
                benchmark=f"burst {burst.sessions:,}",
                figure="turn starts per second",
                value=f"{rate:,.0f}/s",
                baseline=f"all told in {burst.tell_seconds * 1000:.0f} ms",
                target=">= 500/s",
                met=rate >= 500,
            ),
            Figure(
                benchmark=f"burst {burst.sessions:,}",
                figure="first prompt to every first delta",
                value=f"{burst.first_delta_seconds:.2f} s",
                baseline=f"{burst.ended}/{burst.sessions} turns ended",
                target="<= 2 s",
                met=burst.first_delta_seconds <= 2.0,
            ),
        ]
    return rows


def _child(argv: list[str]) -> str:
    child = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, check=False)
    if child.returncode != 0:
        raise SystemExit(f"the run {argv} failed:\n{child.stderr}")
    return child.stdout.splitlines()[-1]


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the table (or, with ``--json``, the figures as JSON)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", default="100,200,400,800", help="comma-separated numbers of streams")
    parser.add_argument("--burst", type=int, default=1000, help="sessions prompted at once (0: no burst)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of turns at once per size")
    parser.add_argument("--alone", type=int, default=3, help="turns alone before each round")
    parser.add_argument("--chunks", type=int, default=50, help="chunks per model answer")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between chunks")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--one", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--one-burst", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        from scale_bench import measure_size

        result = measure_size(args.one, args.one, args.url, args.rounds, args.alone)
        print(msgspec.json.encode(result).decode())
        return
    if args.one_burst:
        print(msgspec.json.encode(measure_burst(args.one_burst, args.url)).decode())
        return
    streams: list[SizeResult] = []
    burst: BurstResult | None = None
    sizes = [int(s) for s in args.streams.split(",") if s]
    with paced_server(args.chunks, args.interval) as url:
        for size in sizes:
            line = _child(
                ["--one", str(size), "--rounds", str(args.rounds), "--alone", str(args.alone), "--url", url]
            )
            streams.append(msgspec.json.decode(line, type=SizeResult))
            print(f"# {size:,} streams: {streams[-1].seconds:.0f} s", file=sys.stderr)
    if args.burst:
        with paced_server(5, args.interval) as url:
            burst = msgspec.json.decode(
                _child(["--one-burst", str(args.burst), "--url", url]), type=BurstResult
            )
    rows = figures(streams, burst)
    print(msgspec.json.encode(rows).decode() if args.json else format_table(rows))


if __name__ == "__main__":
    main()
