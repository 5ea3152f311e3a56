"""Scale: thousands of sessions in one host, most passivated, 100 of them streaming turns at once.

Measured per size, in a fresh process each (so one size's heap does not flatter the next): resident
memory per passivated session (VmRSS before and after opening them, divided by their number), the
threads they cost, and the event latency of the active sessions' turns at 100 concurrent against one
turn alone in the same host.

The model is a paced streaming server in a process of its own, so its work does not compete with the
host for the GIL. Every chunk carries the monotonic time at which it was written to the socket; an
event's latency is the time from that write until the host hands the ``TextDelta`` to its subscriber
(CLOCK_MONOTONIC is shared by all processes of the machine).

Run: ``.venv/bin/python bench/scale_bench.py [--sessions 1000,10000] [--active 100] [--json]``.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from _paced_server import paced_server
from run_all import Figure, format_table

from actors import Address
from shell import AgentHost, Subscribe, TextDelta, UserPrompt, load_settings
from shell.events import TERMINAL_EVENTS, TurnCompleted

# -- one size, in a process of its own ------------------------------------------------------------------

_WARM_SESSIONS = 20


class Phase(msgspec.Struct):
    """The figures of one kind of turn (alone, or all active sessions at once), over every round."""

    delivery_ms: list[float] = []
    pipeline_ms: list[float] = []
    first_delta_ms: list[float] = []
    completed: int = 0
    turns: int = 0
    cpu_seconds: float = 0.0
    """Process CPU time (user + system) while these turns ran."""
    cpu_by_thread: dict[str, float] = {}
    """CPU seconds on each kind of thread while these turns ran (the kernel's per-thread schedstat)."""
    wall_seconds: float = 0.0


class SizeResult(msgspec.Struct, frozen=True):
    """What one size measured."""

    sessions: int
    passivated: int
    active: int
    rss_per_session_kib: float
    rss_growth_kib: int
    rss_per_active_kib: float
    """VmRSS after the active sessions ran their first turn, less VmRSS before they were opened, each."""
    threads_before: int
    threads_passivated: int
    threads_active: int
    threads_after_passivating_all: int
    open_ms: float
    """Median time to open a new session (its record and address; no actor starts until it is used)."""
    opens_s: float
    """All the opens of the passivated sessions, together."""
    alone: Phase
    concurrent: Phase
    dead_letters: int
    passivations: int
    seconds: float


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


class _Recorder:
    """A session's subscriber: stamps each event on arrival, nothing more (it runs on an actor's worker)."""

    def __init__(self) -> None:
        self.events: list[tuple[int, Any]] = []
        self.done = threading.Event()
        self.sent_ns = 0

    def __call__(self, event: Any) -> None:
        self.events.append((time.monotonic_ns(), event))
        if isinstance(event, TERMINAL_EVENTS):
            self.done.set()

    def reset(self) -> None:
        self.events = []
        self.done.clear()

    def add_to(self, phase: Phase) -> None:
        """Add the turn this recorder saw to ``phase``.

        ``delivery``: for every chunk, the time from its write by the server to its delivery to the
        subscriber. A ``TextDelta`` may carry several chunks: the sampler coalesces them and flushes on a
        deadline, so a chunk may wait for it. The first chunk of a step is forwarded as soon as it
        arrives, so ``pipeline`` (the first delta's latency, one per turn) is the host's own path from
        socket to subscriber, without any wait for coalescing.
        """
        first = True
        for arrived, event in self.events:
            if isinstance(event, TextDelta):
                stamps = [int(s[1:]) for s in event.text.split(";") if s.startswith("t")]
                late = [(arrived / 1000 - stamp) / 1000 for stamp in stamps]
                phase.delivery_ms.extend(late)
                if first:
                    phase.first_delta_ms.append((arrived - self.sent_ns) / 1e6)
                    phase.pipeline_ms.extend(late[:1])
                    first = False
            elif isinstance(event, TurnCompleted):
                phase.completed += 1
        phase.turns += 1


def _run_turns(addresses: Sequence[Address], recorders: Sequence[_Recorder], turn: int, phase: Phase) -> None:
    """One turn on each of ``addresses`` at once; returns when all have ended."""
    for recorder in recorders:
        recorder.reset()
    threads_cpu = _thread_cpu()
    cpu, wall = _cpu_seconds(), time.monotonic()
    for address, recorder in zip(addresses, recorders, strict=True):
        recorder.sent_ns = time.monotonic_ns()
        address.tell(UserPrompt(f"turn {turn}: go on"))
    for recorder in recorders:
        if not recorder.done.wait(300):
            raise RuntimeError("a turn did not end within 300 s")
    phase.cpu_seconds += _cpu_seconds() - cpu
    for tid, (kind, seconds) in _thread_cpu().items():
        spent = seconds - threads_cpu.get(tid, (kind, 0.0))[1]
        phase.cpu_by_thread[kind] = phase.cpu_by_thread.get(kind, 0.0) + spent
    phase.wall_seconds += time.monotonic() - wall
    for recorder in recorders:
        recorder.add_to(phase)


_THREAD_KINDS = (
    ("turnkeep-io", "the trio I/O loop (model streams, timers)"),
    ("turnkeep-worker", "the actors (the strand pool's workers)"),
    ("store writer", "the store's writer"),
)


def _thread_kind(name: str) -> str:
    for marker, kind in _THREAD_KINDS:
        if marker in name:
            return kind
    return "other threads (the bench's, the provider gate's)"


def _thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds used so far by each live thread, by its native id, with its kind."""
    spent: dict[int, tuple[str, float]] = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/schedstat") as stat:
                spent[thread.native_id or 0] = (_thread_kind(thread.name), int(stat.read().split()[0]) / 1e9)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or not Linux
    return spent


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _settle(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def measure_size(sessions: int, active: int, url: str, rounds: int, alone_turns: int) -> SizeResult:
    """Open ``sessions`` sessions in one host (all but ``active`` of them passivated) and measure."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="turnkeep-scale-") as tmp:
        root = Path(tmp)
        settings = load_settings(
            environ={
                "TURNKEEP_PROVIDER__BASE_URL": url,
                "TURNKEEP_PROVIDER__MODEL": "paced",
                "TURNKEEP_STORE__PATH": str(root / "sessions.db"),
                "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": str(max(active, 1)),
            }
        )
        with AgentHost(settings) as host:
            # Warm up: run every code path once, outside the measurement.
            warm = _Recorder()
            address = host.open(root / "ws" / "warm", session_id="warm")
            address.ask(Subscribe(warm))
            _run_turns([address], [warm], 1, Phase())
            host.passivate("warm")
            for i in range(_WARM_SESSIONS):
                host.open(root / "ws" / f"w{i}", session_id=f"w{i}")
                host.passivate(f"w{i}")
            gc.collect()
            time.sleep(0.2)  # let the stopped subtrees' threads end
            rss_before, threads_before = _rss_kib(), threading.active_count()

            passivated = sessions - active
            opens: list[float] = []
            for i in range(passivated):
                sid = f"p{i:05d}"
                t0 = time.perf_counter()
                host.open(root / "ws" / sid, session_id=sid)
                opens.append(time.perf_counter() - t0)
            started_early = [sid for sid in host.active() if sid.startswith("p")]
            if started_early:
                raise RuntimeError(f"{len(started_early)} sessions started actors before they were used")
            gc.collect()
            _settle(lambda: threading.active_count() <= threads_before)
            rss_after, threads_passivated = _rss_kib(), threading.active_count()

            rss_before_active = _rss_kib()
            addresses, recorders = [], []
            for i in range(active):
                sid = f"a{i:03d}"
                address = host.open(root / "ws" / sid, session_id=sid)
                recorder = _Recorder()
                address.ask(Subscribe(recorder))
                addresses.append(address)
                recorders.append(recorder)
            threads_active = threading.active_count()

            # One unmeasured turn everywhere first: connections made, first-turn paths taken.
            _run_turns(addresses, recorders, 1, Phase())
            gc.collect()
            rss_active = _rss_kib()
            alone, concurrent = Phase(), Phase()
            turn = 2
            # Alone and concurrent turns alternate, so drift over the run affects both alike.
            for _ in range(rounds):
                for _ in range(alone_turns):
                    _run_turns(addresses[:1], recorders[:1], turn, alone)
                    turn += 1
                _run_turns(addresses, recorders, turn, concurrent)
                turn += 1
            for i in range(active):
                host.passivate(f"a{i:03d}")
            _settle(lambda: threading.active_count() <= threads_passivated)
            threads_after = threading.active_count()
            dead_letters = host.system.dead_letters.total
            passivations = 1 + _WARM_SESSIONS + passivated + active
    return SizeResult(
        sessions=sessions,
        passivated=passivated,
        active=active,
        rss_per_session_kib=(rss_after - rss_before) / max(passivated, 1),
        rss_growth_kib=rss_after - rss_before,
        rss_per_active_kib=(rss_active - rss_before_active) / max(active, 1),
        threads_before=threads_before,
        threads_passivated=threads_passivated,
        threads_active=threads_active,
        threads_after_passivating_all=threads_after,
        open_ms=statistics.median(opens) * 1000 if opens else 0.0,
        opens_s=sum(opens),
        alone=alone,
        concurrent=concurrent,
        dead_letters=dead_letters,
        passivations=passivations,
        seconds=time.monotonic() - started,
    )


# -- the report -----------------------------------------------------------------------------------------


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _passivated_rows(r: SizeResult, name: str) -> list[Figure]:
    """What the passivated sessions of one size cost: memory, threads, and the time to open one."""
    extra = r.threads_passivated - r.threads_before
    return [
        Figure(
            benchmark=name,
            figure="resident memory per passivated session",
            value=f"{r.rss_per_session_kib:.1f} KiB",
            baseline=f"VmRSS before {r.passivated:,} opened",
            target="<= 12 KiB",
            met=r.rss_per_session_kib <= 12,
        ),
        Figure(
            benchmark=name,
            figure="threads of passivated sessions",
            value=f"{r.threads_passivated} ({extra:+d})",
            baseline=f"{r.threads_before} before",
            target="+0",
            met=extra == 0,
        ),
        Figure(
            benchmark=name,
            figure="open one session (median)",
            value=f"{r.open_ms:.2f} ms",
            baseline=f"{r.passivated:,} opened in {r.opens_s:.2f} s",
            target="<= 0.3 ms" + ("; all <= 5 s" if r.passivated >= 9_000 else ""),
            met=r.open_ms <= 0.3 and (r.passivated < 9_000 or r.opens_s <= 5.0),
        ),
    ]


def figures(results: Sequence[SizeResult]) -> list[Figure]:
    """The figures of the measured sizes, as rows of the benchmark table."""
    rows: list[Figure] = []
    for r in results:
        name = f"scale {r.sessions:,}" + (" all active" if r.active == r.sessions else "")
        if r.passivated:
            rows.extend(_passivated_rows(r, name))
        rows.append(
            Figure(
                benchmark=name,
                figure="resident memory per active session",
                value=f"{r.rss_per_active_kib:.0f} KiB",
                baseline=f"VmRSS before {r.active:,} opened and ran a turn",
                target="<= 1 MiB",
                met=r.rss_per_active_kib <= 1024,
            )
        )
        per_active = (r.threads_active - r.threads_passivated) / max(r.active, 1)
        back = r.threads_after_passivating_all - r.threads_passivated
        rows.append(
            Figure(
                benchmark=name,
                figure="threads per active session",
                value=f"{per_active:.1f}",
                baseline=f"{back:+d} once passivated",
            )
        )
        conc, alone = r.concurrent, r.alone
        at_once = f"{r.active} turns at once"
        for label, ours_all, alone_all, q, target in (
            (f"event latency median, {at_once}", conc.delivery_ms, alone.delivery_ms, 0.5, 2.0),
            (f"event latency p99, {at_once}", conc.delivery_ms, alone.delivery_ms, 0.99, 3.0),
            ("  host path only (first delta), median", conc.pipeline_ms, alone.pipeline_ms, 0.5, None),
            ("  host path only (first delta), p99", conc.pipeline_ms, alone.pipeline_ms, 0.99, None),
        ):
            ours, base = _pct(ours_all, q), _pct(alone_all, q)
            rows.append(
                Figure(
                    benchmark=name,
                    figure=label,
                    value=f"{ours:.2f} ms",
                    baseline=f"{base:.2f} ms alone",
                    ratio=ours / base,
                    target="" if target is None else f"<= {target:g}",
                    met=None if target is None else ours / base <= target,
                )
            )
        ours_cpu = conc.cpu_seconds / len(conc.delivery_ms) * 1e6
        alone_cpu = alone.cpu_seconds / len(alone.delivery_ms) * 1e6
        rows.append(
            Figure(
                benchmark=name,
                figure="host CPU per streamed chunk",
                value=f"{ours_cpu:.0f} us ({conc.cpu_seconds / conc.wall_seconds:.0%} busy)",
                baseline=f"{alone_cpu:.0f} us alone ({alone.cpu_seconds / alone.wall_seconds:.0%})",
                ratio=ours_cpu / alone_cpu,
                target="<= 25 us",
                met=ours_cpu <= 25,
            )
        )
        turns_at_once = max(conc.turns, 1)
        for kind, seconds in sorted(conc.cpu_by_thread.items(), key=lambda item: -item[1]):
            if seconds * 1000 / turns_at_once >= 0.01:
                rows.append(
                    Figure(
                        benchmark=name,
                        figure=f"  host CPU per turn: {kind}",
                        value=f"{seconds * 1000 / turns_at_once:.2f} ms",
                        baseline=f"{seconds / max(conc.cpu_seconds, 1e-9):.0%} of the process",
                    )
                )
        alone_first = statistics.median(alone.first_delta_ms)
        for label, q, limit in (("median", 0.5, 100.0), ("p99", 0.99, 500.0)):
            ours_first = _pct(conc.first_delta_ms, q)
            rows.append(
                Figure(
                    benchmark=name,
                    figure=f"prompt to first delta, {r.active:,} prompts at once, {label}",
                    value=f"{ours_first:.1f} ms",
                    baseline=f"{alone_first:.1f} ms alone (median)",
                    ratio=ours_first / alone_first,
                    target=f"<= {limit:g} ms",
                    met=ours_first <= limit,
                )
            )
        rows.append(
            Figure(
                benchmark=name,
                figure="dead letters per passivation",
                value=f"{r.dead_letters / r.passivations:.2f}",
                baseline=f"{r.dead_letters:,} in {r.passivations:,} passivations",
            )
        )
        completed, turns = conc.completed + alone.completed, conc.turns + alone.turns
        rows.append(
            Figure(
                benchmark=name,
                figure="measured turns completed",
                value=f"{completed}/{turns}",
                target="all",
                met=completed == turns,
            )
        )
    sized = [r for r in results if r.passivated]
    if len(sized) > 1:
        small, large = min(sized, key=lambda r: r.passivated), max(sized, key=lambda r: r.passivated)
        if large.passivated > small.passivated:
            marginal = (large.rss_growth_kib - small.rss_growth_kib) / (large.passivated - small.passivated)
            rows.append(
                Figure(
                    benchmark="scale",
                    figure=f"memory per passivated session, {small.sessions:,} to {large.sessions:,}",
                    value=f"{marginal:.1f} KiB",
                    baseline="VmRSS growth of both sizes",
                    target="< 50 KB",
                    met=marginal * 1024 < 50_000,
                )
            )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Measure every size given and print the table (or, with ``--json``, the figures as JSON)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="1000,10000", help="comma-separated host sizes")
    parser.add_argument("--active", type=int, default=100, help="sessions streaming turns at once")
    parser.add_argument(
        "--all-active",
        type=int,
        default=1000,
        help="also run a host of this many sessions all streaming at once (0: no)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of turns at once")
    parser.add_argument("--alone", type=int, default=3, help="turns alone before each round")
    parser.add_argument("--chunks", type=int, default=40, help="chunks per model answer")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between chunks")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--one", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        result = measure_size(args.one, args.active, args.url, args.rounds, args.alone)
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
        return
    runs = [(int(s), args.active, args.rounds) for s in args.sessions.split(",") if s]
    if args.all_active:
        runs.append((args.all_active, args.all_active, 1))
    results = []
    with paced_server(args.chunks, args.interval) as url:
        for size, active, rounds in runs:
            if size < active:
                raise SystemExit(f"--sessions {size} is smaller than --active {active}")
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    str(size),
                    "--active",
                    str(active),
                    "--rounds",
                    str(rounds),
                    "--alone",
                    str(args.alone),
                    "--url",
                    url,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if child.returncode != 0:
                raise SystemExit(f"the run with {size} sessions failed:\n{child.stderr}")
            results.append(msgspec.json.decode(child.stdout.splitlines()[-1], type=SizeResult))
            if not args.json:
                r = results[-1]
                print(
                    f"# {size:,} sessions: {r.seconds:.0f} s, {len(r.concurrent.delivery_ms):,} latency "
                    f"samples at once and {len(r.alone.delivery_ms):,} alone, "
                    f"{r.dead_letters:,} dead letters",
                    file=sys.stderr,
                )
    rows = figures(results)
    if args.json:
        print(msgspec.json.encode(rows).decode())
    else:
        print(format_table(rows))


if __name__ == "__main__":
    main()
