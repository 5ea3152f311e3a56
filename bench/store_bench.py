"""The session store under a burst of writes, with group commit against one transaction per write.

Two bursts, each started by all its threads at once (a barrier), in a fresh store:

- appends: ``--appends`` messages appended by ``--threads`` threads, each to a session of its own;
- turn starts: ``--sessions`` sessions starting a turn at the same instant, each on a thread of its own,
  with the two writes a turn start makes (``start_turn``: the turn in flight and its prompt, then the
  ``TurnStarted`` event's ``append_event``).

Each burst runs on SQLite with ``synchronous`` NORMAL (the default: a commit is not flushed to disk) and
FULL (every commit is), and with ``--postgres`` also on a throwaway PostgreSQL server on 127.0.0.1 (started
as the tests start theirs, with ``fsync`` off, so commits cost less than on a real server). Figures: writes
acknowledged per second (all writes over the burst's wall-clock time), and the median, 99th percentile
and mean of an acknowledgement's latency (from the call to its return). Without group commit, SQLite
writers queue on a lock that is not fair (a thread that just wrote often writes again at once), so the
baseline's median is low while its tail is long; the p99 and the mean compare the two fairly.
Configurations take turns within each round; a ratio is the median over the rounds of the ratio within
each round.

A third figure is the cost of one write alone: ``--single`` messages appended one after another by one
thread through ``SessionStore.append_message`` (SQLite, WAL, ``synchronous`` NORMAL, group commit on, as a
host has it), against the floor of the same write: the same row (the message encoded with msgspec) inserted
and committed with ``sqlite3`` into a table of the same shape in a database with the same settings
(``BEGIN``, ``INSERT``, ``COMMIT``). Figure: the median time of one write, ours over the raw one.

Run: ``.venv/bin/python bench/store_bench.py [--appends N] [--threads N] [--sessions N] [--single N]
[--rounds N] [--postgres] [--json]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import msgspec
from run_all import Figure, format_table

from sampler.messages import UserMessage
from shell import events as ev
from shell.store import SessionStore, open_store

_REPO = Path(__file__).resolve().parent.parent
MODES = ("group commit", "one transaction per write")
Burst = Callable[[SessionStore, int], list[Callable[[], None]]]


class Run(msgspec.Struct, frozen=True):
    """One burst in one configuration: writes made, seconds, and each acknowledgement's latency."""

    writes: int
    seconds: float
    latencies: list[float]
    commits: int | None

    @property
    def rate(self) -> float:
        return self.writes / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def appends(count: int, threads: int) -> Burst:
    """``count`` appends from ``threads`` threads, each to its own session."""

    def prepare(store: SessionStore, _: int) -> list[Callable[[], None]]:
        for n in range(threads):
            store.create_session(f"a{n}", workspace="/w", model="m")

        def work(n: int) -> Callable[[], None]:
            share = count // threads + (1 if n < count % threads else 0)
            return lambda: [
                store.append_message(f"a{n}", 1, UserMessage.of_text(f"m{k}")) for k in range(share)
            ]

        return [work(n) for n in range(threads)]

    return prepare


def turn_starts(sessions: int) -> Burst:
    """``sessions`` sessions starting a turn at once: two writes each, on a thread per session."""

    def prepare(store: SessionStore, _: int) -> list[Callable[[], None]]:
        for n in range(sessions):
            store.create_session(f"t{n}", workspace="/w", model="m")

        def work(n: int) -> Callable[[], None]:
            session_id = f"t{n}"

            def start() -> None:
                store.start_turn(session_id, 1, UserMessage.of_text("go"))
                store.append_event(session_id, 1, ev.TurnStarted(session=session_id, turn=1, prompt="go"))

            return start

        return [work(n) for n in range(sessions)]

    return prepare


WRITES = ("start_turn", "append_message", "append_event")


def burst(target: Path | str, group_commit: bool, synchronous: str, prepare: Burst) -> Run:
    """Run the burst ``prepare`` sets up, all threads released at once, in a fresh store at ``target``."""
    with open_store(target, group_commit=group_commit, synchronous=synchronous) as store:  # type: ignore[arg-type]
        latencies: list[float] = []
        lock = threading.Lock()
        originals = {name: getattr(store, name) for name in WRITES}

        def timing(method: Callable[..., object]) -> Callable[..., object]:
            def call(*args: object, **kwargs: object) -> object:
                started = time.perf_counter()
                result = method(*args, **kwargs)
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                return result

            return call

        works = prepare(store, 0)
        for name, method in originals.items():
            setattr(store, name, timing(method))
        before = store._writer.stats.commits if store._writer is not None else 0
        gate = threading.Barrier(len(works) + 1)
        failures: list[BaseException] = []

        def run(work: Callable[[], None]) -> None:
            gate.wait(timeout=120)
            try:
                work()
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=run, args=(work,)) for work in works]
        for thread in threads:
            thread.start()
        gate.wait(timeout=120)
        started = time.perf_counter()
        for thread in threads:
            thread.join(timeout=600)
        seconds = time.perf_counter() - started
        if failures:
            raise failures[0]
        commits = store._writer.stats.commits - before if store._writer is not None else None
        return Run(writes=len(latencies), seconds=seconds, latencies=latencies, commits=commits)


@contextmanager
def targets(postgres: bool) -> Iterator[Callable[[str], Path | str]]:
    """A function giving a fresh store target for a backend name: a new file, or a new schema."""
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = ""
        admin = None
        if postgres:
            sys.path.insert(0, str(_REPO))
            import psycopg

            from tests._postgres import postgres_server, with_options

            url = stack.enter_context(postgres_server())
            admin = stack.enter_context(psycopg.connect(url, autocommit=True))
        made = 0

        def fresh(backend: str) -> Path | str:
            nonlocal made
            made += 1
            if backend == "postgresql":
                assert admin is not None
                admin.execute(f"CREATE SCHEMA b{made}")
                return with_options(url, ("search_path", f"b{made}"))
            return directory / f"s{made}.db"

        yield fresh


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[Run]]]:
    """Runs by ``"backend, burst"``, then by mode, one per round."""
    bursts = {
        f"{args.appends} appends from {args.threads} threads": appends(args.appends, args.threads),
        f"{args.sessions} turn starts (2 writes each)": turn_starts(args.sessions),
    }
    backends = [("sqlite", "NORMAL"), ("sqlite", "FULL")] + (
        [("postgresql", "NORMAL")] if args.postgres else []
    )
    runs: dict[str, dict[str, list[Run]]] = {}
    with targets(args.postgres) as fresh:
        for round_ in range(args.rounds):
            for backend, synchronous in backends:
                for name, prepare in bursts.items():
                    key = f"{backend} {synchronous}, {name}" if backend == "sqlite" else f"{backend}, {name}"
                    order = MODES if round_ % 2 == 0 else MODES[::-1]
                    for mode in order:
                        run = burst(fresh(backend), mode == MODES[0], synchronous, prepare)
                        runs.setdefault(key, {}).setdefault(mode, []).append(run)
                        print(
                            f"round {round_ + 1} {key}, {mode}: {run.writes} writes in {run.seconds:.2f} s"
                            + (f", {run.commits} commits" if run.commits is not None else ""),
                            file=sys.stderr,
                            flush=True,
                        )
    return runs


MESSAGE = "a message of an ordinary length, stored as one row"


def single_writes_store(path: Path, count: int) -> list[float]:
    """Seconds of each of ``count`` appends made one after another through the store."""
    with open_store(path) as store:
        store.create_session("s", workspace="/w", model="m")
        message = UserMessage.of_text(MESSAGE)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            store.append_message("s", 1, message)
            times.append(time.perf_counter() - started)
        return times


def single_writes_raw(path: Path, count: int, statements: str) -> list[float]:
    """Seconds of each of ``count`` writes of the same row made with ``sqlite3`` alone, in a store file
    (its schema and settings): ``"insert"`` is a bare insert and commit; ``"statements"`` makes the
    statements a store write makes (the session's row claimed, the next seq read, the insert)."""
    with open_store(path) as store:
        store.create_session("s", workspace="/w", model="m")
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("PRAGMA foreign_keys = ON")
        message = UserMessage.of_text(MESSAGE)
        times = []
        for seq in range(1, count + 1):
            started = time.perf_counter()
            body = msgspec.json.encode(message)
            connection.execute("BEGIN IMMEDIATE")
            if statements == "statements":
                connection.execute(
                    "UPDATE sessions SET updated_at = ?"
                    " WHERE id = ? AND status NOT IN ('closed', 'archived')",
                    (time.time(), "s"),
                )
                connection.execute("SELECT max(seq) FROM messages WHERE session_id = ?", ("s",)).fetchall()
            connection.execute(
                "INSERT INTO messages (session_id, seq, turn, body, created_at, replaced_by, is_summary,"
                " position) VALUES ('s', ?, 1, ?, ?, NULL, 0, ?)",
                (seq, body, time.time(), seq),
            )
            connection.execute("COMMIT")
            times.append(time.perf_counter() - started)
        return times
    finally:
        connection.close()


def single_write_figures(count: int, rounds: int) -> list[Figure]:
    """One write through the store over one raw insert-and-commit of the same row, and the raw floor of
    the statements a store write makes over the same: the median over rounds of the ratio of their median
    times in each round (the three take turns)."""
    sides: dict[str, Callable[[Path, int], list[float]]] = {
        "store": single_writes_store,
        "insert": lambda path, n: single_writes_raw(path, n, "insert"),
        "statements": lambda path, n: single_writes_raw(path, n, "statements"),
    }
    medians: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as directory:
        for round_ in range(rounds):
            order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
            for name in order:
                times = sides[name](Path(directory) / f"{len(order)}-{round_}-{name}.db", count)
                medians[name].append(statistics.median(times))
            print(
                f"round {round_ + 1} single writes (us): "
                + ", ".join(f"{name} {medians[name][-1] * 1e6:.0f}" for name in sides),
                file=sys.stderr,
            )
    ratio = statistics.median(a / b for a, b in zip(medians["store"], medians["insert"], strict=True))
    floor = statistics.median(a / b for a, b in zip(medians["statements"], medians["insert"], strict=True))
    us = {name: statistics.median(values) * 1e6 for name, values in medians.items()}
    return [
        Figure(
            benchmark="store",
            figure="sqlite NORMAL, one append alone through the store (group commit on)",
            value=f"{us['store']:.0f} us",
            baseline=f"{us['insert']:.0f} us (sqlite3: insert and commit of the same row)",
            ratio=ratio,
            target="<= 2",
            met=ratio <= 2,
        ),
        Figure(
            benchmark="store",
            figure="  its statements alone (row claimed, next seq read, insert), in sqlite3",
            value=f"{us['statements']:.0f} us",
            baseline=f"{us['insert']:.0f} us",
            ratio=floor,
        ),
    ]


def paired(ours: list[Run], base: list[Run], figure: Callable[[Run], float]) -> float:
    """The median over the rounds of ``figure(ours) / figure(base)`` within each round."""
    return statistics.median(figure(a) / figure(b) for a, b in zip(ours, base, strict=True))


def figures(runs: dict[str, dict[str, list[Run]]]) -> list[Figure]:
    """Per backend and burst: writes/s, median and p99 acknowledgement latency, group commit over the
    baseline."""
    rows = []
    for key, by_mode in runs.items():
        ours, base = by_mode[MODES[0]], by_mode[MODES[1]]
        rate = paired(ours, base, lambda r: r.rate)
        median = paired(ours, base, lambda r: r.quantile(0.5))
        p99 = paired(ours, base, lambda r: r.quantile(0.99))
        mean = paired(ours, base, lambda r: statistics.fmean(r.latencies))
        writes = statistics.median(r.writes / r.commits for r in ours if r.commits)
        floor = 2.0 if "FULL" in key else 0.8
        rows += [
            Figure(
                benchmark="store",
                figure=f"{key}: writes acknowledged/s",
                value=f"{statistics.median(r.rate for r in ours):.0f}/s",
                baseline=f"{statistics.median(r.rate for r in base):.0f}/s (one transaction per write)",
                ratio=rate,
                target=f">= {floor:g}",
                met=rate >= floor,
            ),
            Figure(
                benchmark="store",
                figure="  median acknowledgement latency (baseline: an unfair lock)",
                value=f"{statistics.median(r.quantile(0.5) for r in ours) * 1e3:.1f} ms",
                baseline=f"{statistics.median(r.quantile(0.5) for r in base) * 1e3:.1f} ms",
                ratio=median,
            ),
            Figure(
                benchmark="store",
                figure="  p99 acknowledgement latency",
                value=f"{statistics.median(r.quantile(0.99) for r in ours) * 1e3:.1f} ms",
                baseline=f"{statistics.median(r.quantile(0.99) for r in base) * 1e3:.1f} ms",
                ratio=p99,
                target="<= 1",
                met=p99 <= 1,
            ),
            Figure(
                benchmark="store",
                figure="  mean acknowledgement latency",
                value=f"{statistics.median(statistics.fmean(r.latencies) for r in ours) * 1e3:.1f} ms",
                baseline=f"{statistics.median(statistics.fmean(r.latencies) for r in base) * 1e3:.1f} ms",
                ratio=mean,
            ),
            Figure(
                benchmark="store", figure="  writes per transaction (group commit)", value=f"{writes:.1f}"
            ),
        ]
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the table (or, with ``--json``, the figures as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--appends", type=int, default=1000, help="appends in the append burst")
    parser.add_argument("--threads", type=int, default=200, help="threads of the append burst")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions starting a turn at once")
    parser.add_argument("--single", type=int, default=2000, help="appends of the single-write figure")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs every configuration)")
    parser.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL server")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    rows = [*single_write_figures(args.single, max(args.rounds, 3)), *figures(measure(args))]
    print(msgspec.json.encode(rows).decode() if args.json else format_table(rows))


if __name__ == "__main__":
    main()
