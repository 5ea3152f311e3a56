"""Events through a host pool on Ray against a local host, in one run: events/s of many short turns,
streamed text of long answers, and one turn's latency.

Both run the same sessions against the same embedded provider on 127.0.0.1 (in this process); the pool
has two replicas on a local Ray cluster that listens on loopback only. ``--sessions`` sessions run
``--turns`` short turns each, all at once (each turn: started, text, completed); then each streams one
answer of ``--chars`` characters (text deltas are coalesced every 50 ms by the sampler, so this counts
characters). Figures are the pool's divided by the local host's, measured alternately ``--rounds`` times.
Run: ``.venv/bin/python bench/pool_bench.py [--sessions S] [--turns T] [--chars N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only; read when Ray is imported

import ray

from sampler.fake import FakeProvider, FinalAnswer, Script
from shell import Host, load_settings
from shell import events as ev
from shell.cluster import ClusterSettings, PoolHost


def settings_for(provider: FakeProvider, directory: Path) -> Any:
    return load_settings(
        environ={
            "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
            "TURNKEEP_STORE__PATH": str(directory / "store.db"),
            "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": "64",
        }
    )


def stream(host: Any, workspace: Path, sessions: int, turns: int, text: str) -> tuple[int, int, float]:
    """Events and characters received, and seconds taken, for ``sessions`` sessions of ``turns`` turns
    (each prompted with ``text``), all at once."""
    opened = [host.open(workspace / f"s{i}") for i in range(sessions)]
    counts = [0] * sessions
    chars = [0] * sessions
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            for _ in range(turns):
                for event in opened[index].prompt(text, event_timeout=120):
                    counts[index] += 1
                    if isinstance(event, ev.TextDelta):
                        chars[index] += len(event.text)
                    if isinstance(event, ev.TERMINAL_EVENTS) and not isinstance(event, ev.TurnCompleted):
                        raise RuntimeError(f"turn ended {event!r}")
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(sessions)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return sum(counts), sum(chars), elapsed


def latency(host: Any, workspace: Path, turns: int = 20) -> float:
    """Median seconds from prompt to the end of a one-chunk turn."""
    session = host.open(workspace / "latency")
    times = []
    for n in range(turns):
        started = time.perf_counter()
        session.run(f"ping {n}")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    long = Script(lambda _: FinalAnswer("x", chunks=args.chars), name="long")  # one character a chunk
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    cluster = ClusterSettings(backend="ray", replicas=2, replica_cpus=0.5)
    figures: dict[str, dict[str, list[float]]] = {
        name: {"events/s (short turns)": [], "chars/s (long answers)": [], "one turn (ms)": []}
        for name in ("local", "pool")
    }
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            FakeProvider(Script.text("pong"), scripts={"long": long}) as provider,
        ):
            settings = settings_for(provider, Path(tmp))
            with Host(settings) as local, PoolHost(settings, cluster=cluster) as pool:
                for round_ in range(args.rounds):
                    for name, host in (("local", local), ("pool", pool)):
                        workspace = Path(tmp) / f"{name}-{round_}"
                        events, _, seconds = stream(
                            host, workspace / "short", args.sessions, args.turns, "go"
                        )
                        _, chars, long_seconds = stream(
                            host, workspace / "long", args.sessions, 1, "[[script:long]]"
                        )
                        row = figures[name]
                        row["events/s (short turns)"].append(events / seconds)
                        row["chars/s (long answers)"].append(chars / long_seconds)
                        row["one turn (ms)"].append(latency(host, workspace) * 1e3)
                        print(
                            f"round {round_ + 1} {name:5}: {events} events in {seconds:.2f} s,"
                            f" {chars} chars in {long_seconds:.2f} s",
                            flush=True,
                        )
    finally:
        ray.shutdown()

    print()
    print(
        f"{args.sessions} sessions at once: {args.turns} short turns each,"
        f" then one answer of {args.chars} chars each"
    )
    print(f"{'medians of ' + str(args.rounds) + ' rounds':26} {'local':>11} {'pool':>11} {'pool/local':>11}")
    for figure in figures["local"]:
        here, there = (statistics.median(figures[name][figure]) for name in ("local", "pool"))
        print(f"{figure:26} {here:11.1f} {there:11.1f} {there / here:11.2f}")


if __name__ == "__main__":
    main()
