"""Subagents: what a host keeps of the children its sessions ran, and how families share a rate-limited
provider.

The embedded provider runs in a process of its own, started by this script (``--serve``), so that the
threads and memory measured are the host process's alone. Its scripted model answers a parent's prompt
``fan TAG K STEPS`` with one step of K ``agent`` calls (K children at once), then joins their answers; a
child's prompt ``task NAME S`` is answered in S model steps (``list_dir``, then the answer ``NAME ok``).
Every parent turn is checked: it completed, with each child's answer in its text and each child's
``subagent_finished`` completed; anything else raises.

1. Children leave nothing behind. One host, ``--parents`` sessions (each in a thread of its own) whose
   turns each fan out to 4 one-step children, in rounds until ``--children`` children have run. The
   process's threads (``threading.active_count()`` and the OS's, ``Threads:`` of ``/proc/self/status``)
   and resident memory (``VmRSS``) are read after a warm-up round (the baseline), after the first round
   that reaches 50 children and at the end. Each reading waits, within a deadline, until the host runs
   no child (``subagents.running == 0``), no thread that closes a child is alive and the OS count has not
   changed for ``--quiet`` seconds (longer than the 10 s an idle worker of trio's thread cache lives).

2. Fairness under a rate-limited provider. ``--families`` parents prompted at the same instant, each
   fanning out to 4 children (two of one model step, two of two), against a provider limited to ``--rate``
   requests per second (a bucket holding one second of them, with rate-limit headers), the host's gate
   configured to the same rate (``provider.limits.requests_per_minute``) and ``host.max_concurrent_turns``
   set to ``--slots``. A family's time runs from its prompt to its parent's turn end. Gate waits are
   measured by wrapping ``sampler.gate.GateClient.acquire`` in this process: for every request let
   through, its client's ``session`` (the family), ``rank`` (the depth: 0 a parent, 1 a child) and the
   seconds from the call to the grant.

``--trace`` also lists the Python allocations that grew most per child from the second reading to the
end (``tracemalloc``, which slows the turns and adds to the memory: its figures are not the ones to quote).

Run: ``.venv/bin/python bench/subagents_bench.py [--children N] [--parents N] [--families N] [--rate R]
[--slots N] [--only leaks|fairness] [--trace] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import gc
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio
from run_all import Figure, format_table

from sampler.fake import Conversation, FakeProvider, FinalAnswer, RateLimit, Script, Step, ToolStep
from sampler.gate import GateClient
from shell import Host, load_settings
from shell import events as ev
from shell.messages import UserPrompt

_FAN_OUT = 4
_ROOT = Path(__file__).resolve().parent.parent
_SETTLE_DEADLINE = 120.0


# -- the provider, in a process of its own ---------------------------------------------------------------


def _respond(conversation: Conversation) -> Step:
    """``fan TAG K STEPS``: K agent calls, then their answers joined; ``task NAME S``: ``NAME ok`` in S
    steps (``STEPS`` is each child's S, or ``mixed``: 1, 2, 1, 2, …)."""
    words = conversation.last_user_text.split()
    if words and words[0] == "fan":
        tag, count, steps = words[1], int(words[2]), words[3]
        if conversation.tool_rounds == 0:
            calls = []
            for k in range(count):
                own = steps if steps != "mixed" else str(1 + k % 2)
                task = {"description": f"task {k}", "prompt": f"task {tag}.{k} {own}"}
                calls.append(("agent", task))
            return ToolStep(calls)
        return FinalAnswer("results: " + " | ".join(conversation.tool_results))
    if words and words[0] == "task":
        if conversation.tool_rounds + 1 < int(words[2]):
            return ToolStep([("list_dir", {"path": "."})])
        return FinalAnswer(f"{words[1]} ok")
    return FinalAnswer("ready")


def _expected(tag: str, count: int) -> str:
    return "results: " + " | ".join(f"{tag}.{k} ok" for k in range(count))


def _serve(rate: float | None) -> None:
    """Serve the scripted provider until standard input closes, then print its counts as one JSON line."""
    limit = None if rate is None else RateLimit(requests_per_minute=rate * 60, burst_seconds=1.0)
    with FakeProvider(Script(_respond, name="subagents"), rate_limit=limit) as provider:
        print(provider.base_url, flush=True)
        sys.stdin.read()
        stats = provider.stats
    print(json.dumps({"requests": stats.requests, "refused": stats.rejections.get("rate_limit", 0)}))


@contextlib.contextmanager
def _provider(rate: float | None = None) -> Iterator[tuple[str, dict[str, int]]]:
    """The provider's base URL, and its counts (filled in once it has stopped)."""
    command = [sys.executable, __file__, "--serve"] + ([] if rate is None else ["--rate", str(rate)])
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    counts: dict[str, int] = {}
    try:
        url = child.stdout.readline().strip()
        if not url:
            raise RuntimeError("the provider's process did not start")
        yield url, counts
    finally:
        child.stdin.close()
        try:
            child.wait(15)
            counts.update(json.loads(child.stdout.readline() or "{}"))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


# -- 1. children leave nothing behind --------------------------------------------------------------------


def _status(key: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


class Reading(msgspec.Struct, frozen=True):
    """The process at one point: threads (Python's, the OS's), VmRSS and SQLite's own heap in KiB, the
    addresses the actor system holds (and how many of them are of stopped actors), and the seconds it
    took to settle."""

    point: str
    children: int
    python_threads: int
    os_threads: int
    rss_kib: int
    sqlite_kib: int
    addresses: int
    stopped_addresses: int
    settle_seconds: float
    thread_names: list[str]

    @property
    def pool_threads(self) -> int:
        """Idle workers of trio's thread cache (they end 10 s after their last job)."""
        return sum(name.startswith("Trio thread") for name in self.thread_names)


def _settle(host: Host, quiet: float) -> float:
    """Wait until no child runs, no child is being closed and the OS thread count has held for ``quiet``
    seconds; the seconds it took. Raises after the deadline."""
    agent_host = host.agent_host
    started = time.monotonic()
    count, since = _status("Threads"), started
    while True:
        now = time.monotonic()
        if now - started > _SETTLE_DEADLINE:
            raise RuntimeError(
                f"not settled after {_SETTLE_DEADLINE:g} s: {agent_host.subagents.running} children "
                f"running, {_status('Threads')} threads"
            )
        current = _status("Threads")
        if current != count:
            count, since = current, now
        closing = any(t.name.startswith("turnkeep-close-") for t in threading.enumerate())
        if agent_host.subagents.running == 0 and not closing and now - since >= quiet:
            return now - started
        time.sleep(0.1)


def _sqlite_kib() -> int:
    """The heap of the SQLite library this process loaded (its page caches among it); 0 if unknown."""
    try:
        library = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        return 0
    library.sqlite3_memory_used.restype = ctypes.c_int64
    return int(library.sqlite3_memory_used()) // 1024


def _read(host: Host, point: str, children: int, quiet: float) -> Reading:
    took = _settle(host, quiet)
    gc.collect()
    names = sorted(t.name for t in threading.enumerate())
    addresses = host.agent_host.system._debug_state()
    return Reading(
        point=point,
        children=children,
        python_threads=threading.active_count(),
        os_threads=_status("Threads"),
        rss_kib=_status("VmRSS"),
        sqlite_kib=_sqlite_kib(),
        addresses=len(addresses),
        stopped_addresses=sum(status == "stopped" for status in addresses.values()),
        settle_seconds=took,
        thread_names=names,
    )


class Leaks(msgspec.Struct, frozen=True):
    """The readings of measurement 1 (baseline, first children, end), the parent turns run and their
    seconds (settling apart), and with ``--trace`` the Python allocations that grew most from the second
    reading to the end."""

    readings: list[Reading]
    parents: int
    turns: int
    seconds: float
    grown: list[str]


def _fan_out_round(sessions: list[Any], label: str) -> None:
    """Each session runs one turn fanning out to four one-step children, all at once; checked."""
    failures: list[str] = []

    def turn(session: Any, tag: str) -> None:
        events = list(session.prompt(f"fan {tag} {_FAN_OUT} 1", event_timeout=120.0))
        end = events[-1]
        finished = [e for e in events if isinstance(e, ev.SubagentFinished)]
        if not isinstance(end, ev.TurnCompleted) or end.text != _expected(tag, _FAN_OUT):
            failures.append(f"{tag}: {end!r}"[:300])
        elif len(finished) != _FAN_OUT or any(e.outcome != "completed" for e in finished):
            failures.append(f"{tag}: children ended {[e.outcome for e in finished]}")

    threads = [
        threading.Thread(target=turn, args=(s, f"{label}p{i}"), name=f"bench-parent-{i}")
        for i, s in enumerate(sessions)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300.0)
    if any(thread.is_alive() for thread in threads):
        raise RuntimeError(f"round {label}: a parent turn did not end within 300 s")
    if failures:
        raise RuntimeError(f"round {label}: {len(failures)} parent turns failed: {failures[:3]}")


def measure_leaks(*, children: int, parents: int, quiet: float, trace: bool = False) -> Leaks:
    """Rounds of fan-outs in one host until ``children`` children have run after the warm-up round."""
    checkpoint = min(50, children)
    snapshots: list[tracemalloc.Snapshot] = []
    with _provider() as (url, _), tempfile.TemporaryDirectory(prefix="turnkeep-subagents-") as tmp:
        env = {
            "TURNKEEP_PROVIDER__BASE_URL": url,
            "TURNKEEP_STORE__PATH": f"{tmp}/sessions.db",
            "TURNKEEP_TOOLS__ALLOW": "list_dir",
        }
        if trace:
            tracemalloc.start(25)
        with Host(load_settings(environ=env)) as host:
            sessions = [host.open(Path(tmp) / f"ws{i}", session_id=f"parent{i}") for i in range(parents)]
            _fan_out_round(sessions, "warm")
            readings = [_read(host, "after the warm-up round (baseline)", 0, quiet)]
            done, turns, seconds = 0, 0, 0.0
            while done < children:
                started = time.monotonic()
                _fan_out_round(sessions, f"r{turns // parents}")
                seconds += time.monotonic() - started
                turns += parents
                done += parents * _FAN_OUT
                if len(readings) == 1 and done >= checkpoint:
                    readings.append(_read(host, f"after the first {done} children", done, quiet))
                    snapshots += [tracemalloc.take_snapshot()] if trace else []
            readings.append(_read(host, "at the end", done, quiet))
            snapshots += [tracemalloc.take_snapshot()] if trace else []
            records = host.agent_host.store.list_sessions()
            children_stored = [r for r in records if r.parent is not None]
            if len(records) != parents + (parents + turns) * _FAN_OUT:  # the parents and every child
                raise RuntimeError(f"the store holds {len(records)} sessions")
            if any(r.status != "closed" for r in children_stored):
                raise RuntimeError("a child session is not closed")
    grown = []
    if trace:
        tracemalloc.stop()
        ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
        early, late = (snapshot.filter_traces(ignore) for snapshot in snapshots)
        span = max(readings[-1].children - readings[1].children, 1)
        for stat in late.compare_to(early, "lineno")[:15]:
            frame = stat.traceback[0]
            grown.append(
                f"{stat.size_diff / span:7.0f} B/child {stat.count_diff / span:5.1f} blocks/child  "
                f"{frame.filename.removeprefix(str(_ROOT) + '/')}:{frame.lineno}"
            )
    return Leaks(readings, parents, turns, seconds, grown)


# -- 2. fairness under a rate-limited provider -----------------------------------------------------------


class Fairness(msgspec.Struct, frozen=True):
    """Measurement 2: each family's seconds from the prompts to its end, and from its turn's start (once
    it had a slot) to its end; the gate waits of the families' requests, parents' and children's; the
    provider's counts (the warm-up's included); the most parent turns and children running at once."""

    families: int
    rate: float
    slots: int
    family_seconds: list[float]
    turn_seconds: list[float]
    parent_waits: list[float]
    child_waits: list[float]
    requests: int
    refused: int
    peak_parents: int
    peak_children: int


@contextlib.contextmanager
def _timed_gate() -> Iterator[list[tuple[str, int, float]]]:
    """Record (session, rank, seconds from the call to the grant) of every request the provider gate lets
    through, by wrapping ``GateClient.acquire`` for as long as the block runs."""
    waits: list[tuple[str, int, float]] = []
    original = GateClient.acquire

    @functools.wraps(original)
    async def acquire(self: GateClient, *args: Any, **kwargs: Any) -> Any:
        start = trio.current_time()
        grant = await original(self, *args, **kwargs)
        waits.append((self.session, self.rank, trio.current_time() - start))
        return grant

    GateClient.acquire = acquire  # type: ignore[method-assign]
    try:
        yield waits
    finally:
        GateClient.acquire = original  # type: ignore[method-assign]


def _peak(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def _family_turn(inbox: queue.Queue[tuple[float, Any]], tag: str) -> tuple[float, float]:
    """When the family's turn started and ended; raises unless it completed with every child's answer."""
    began, finished = None, []
    while True:
        at, event = inbox.get(timeout=600.0)
        if isinstance(event, ev.TurnStarted):
            began = at
        elif isinstance(event, ev.SubagentFinished):
            finished.append(event.outcome)
        elif isinstance(event, ev.TERMINAL_EVENTS):
            break
    complete = isinstance(event, ev.TurnCompleted) and event.text == _expected(tag, _FAN_OUT)
    if not complete or finished != ["completed"] * _FAN_OUT or began is None:
        raise RuntimeError(f"family {tag}: {event!r} {finished}"[:400])
    return began, at


def measure_fairness(*, families: int, rate: float, slots: int) -> Fairness:
    """Every family's parent prompted at once; each fans out to 4 children of one or two steps."""
    with (
        _provider(rate) as (url, counts),
        tempfile.TemporaryDirectory(prefix="turnkeep-subagents-") as tmp,
        _timed_gate() as waits,
    ):
        env = {
            "TURNKEEP_PROVIDER__BASE_URL": url,
            "TURNKEEP_STORE__PATH": f"{tmp}/sessions.db",
            "TURNKEEP_TOOLS__ALLOW": "list_dir",
            "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": str(slots),
            "TURNKEEP_PROVIDER__LIMITS__REQUESTS_PER_MINUTE": f"{rate * 60:g}",
        }
        with Host(load_settings(environ=env)) as host:
            agent_host = host.agent_host
            _fan_out_round([host.open(Path(tmp) / "warm", session_id="warm")], "warm")
            time.sleep(2.0)  # the provider's bucket (one second of requests) fills again
            waits.clear()
            inboxes: list[queue.Queue[tuple[float, Any]]] = []
            addresses = []
            for n in range(families):
                inbox: queue.Queue[tuple[float, Any]] = queue.Queue()
                addresses.append(agent_host.open(Path(tmp) / f"ws{n}", session_id=f"family{n}"))
                agent_host.subscribe(f"family{n}", functools.partial(_arrived, inbox))
                inboxes.append(inbox)
            peak_children = [0]
            sampled = threading.Event()

            def sample() -> None:
                while not sampled.wait(0.02):
                    peak_children[0] = max(peak_children[0], agent_host.subagents.running)

            sampler = threading.Thread(target=sample, name="bench-sampler", daemon=True)
            sampler.start()
            started = time.monotonic()
            for n, address in enumerate(addresses):
                address.tell(UserPrompt(f"fan f{n} {_FAN_OUT} mixed"))
            try:
                turns = [_family_turn(inbox, f"f{n}") for n, inbox in enumerate(inboxes)]
            finally:
                sampled.set()
                sampler.join()
            measured = [wait for wait in waits if wait[0].startswith("family")]
    return Fairness(
        families=families,
        rate=rate,
        slots=slots,
        family_seconds=[end - started for _, end in turns],
        turn_seconds=[end - began for began, end in turns],
        parent_waits=[seconds for _, rank, seconds in measured if rank == 0],
        child_waits=[seconds for _, rank, seconds in measured if rank > 0],
        requests=counts.get("requests", 0),
        refused=counts.get("refused", 0),
        peak_parents=_peak(turns),
        peak_children=peak_children[0],
    )


def _arrived(inbox: queue.Queue[tuple[float, Any]], event: Any) -> None:
    inbox.put((time.monotonic(), event))


# -- figures ---------------------------------------------------------------------------------------------

_POOL_ALLOWANCE = 2
"""Threads the end may have over the baseline, if they are idle workers of trio's thread cache: settling
outlasts their 10 s idle timeout, but one handed a job in the last instant (a late close, a store read of
the janitor) may still be there."""


def leak_figures(leaks: Leaks) -> list[Figure]:
    """Threads at the end against the baseline; memory at the end against the first children's."""
    base, early, end = leaks.readings[0], leaks.readings[1], leaks.readings[-1]
    pool = min(max(end.pool_threads - base.pool_threads, 0), _POOL_ALLOWANCE)
    span = max(end.children - early.children, 1)
    rss = end.rss_kib / early.rss_kib
    target = f"+0 (+{_POOL_ALLOWANCE} trio pool)"
    rows = [
        Figure(
            benchmark="subagents",
            figure=f"OS threads after {end.children} children",
            value=f"{end.os_threads} ({end.os_threads - base.os_threads:+d})",
            baseline=f"{base.os_threads} after the warm-up",
            ratio=end.os_threads / base.os_threads,
            target=target,
            met=end.os_threads - base.os_threads - pool <= 0,
        ),
        Figure(
            benchmark="subagents",
            figure=f"Python threads after {end.children} children",
            value=f"{end.python_threads} ({end.python_threads - base.python_threads:+d})",
            baseline=f"{base.python_threads} after the warm-up",
            ratio=end.python_threads / base.python_threads,
            target=target,
            met=end.python_threads - base.python_threads - pool <= 0,
        ),
        Figure(
            benchmark="subagents",
            figure=f"VmRSS after {end.children} children",
            value=f"{end.rss_kib / 1024:,.1f} MiB ({(rss - 1) * 100:+.1f} %)",
            baseline=f"{early.rss_kib / 1024:,.1f} MiB after {early.children}",
            ratio=rss,
            target="<= 1.10",
            met=rss <= 1.10,
        ),
        Figure(
            benchmark="subagents",
            figure="  VmRSS growth per child, of it SQLite's heap",
            value=f"{(end.rss_kib - early.rss_kib) / span:.1f} KiB",
            baseline=f"{(end.sqlite_kib - early.sqlite_kib) / span:.1f} KiB SQLite",
        ),
        Figure(
            benchmark="subagents",
            figure="  actor addresses kept per child (stopped)",
            value=f"{(end.addresses - early.addresses) / span:.2f}",
            baseline=f"{end.stopped_addresses:,} stopped of {end.addresses:,}",
        ),
    ]
    return rows


def fairness_figures(fair: Fairness) -> list[Figure]:
    """The slowest family against the median one, parents' gate waits against children's, and that every
    family completed with fewer turn slots than families."""
    median = statistics.median(fair.family_seconds)
    slowest = max(fair.family_seconds)
    in_turn = statistics.median(fair.turn_seconds)
    parents = statistics.median(fair.parent_waits)
    children = statistics.median(fair.child_waits)
    needed = len(fair.parent_waits) + len(fair.child_waits)
    ideal = max(needed - fair.rate, 0) / fair.rate  # the provider's bucket holds one second at the start
    return [
        Figure(
            benchmark="subagents",
            figure=f"{fair.families} families at {fair.rate:g} req/s: slowest family / median",
            value=f"{slowest:.1f} s",
            baseline=f"{median:.1f} s (median)",
            ratio=slowest / median,
            target="<= 1.5",
            met=slowest / median <= 1.5,
        ),
        Figure(
            benchmark="subagents",
            figure="  the same from each turn's start (once it had a slot)",
            value=f"{max(fair.turn_seconds):.1f} s",
            baseline=f"{in_turn:.1f} s (median)",
            ratio=max(fair.turn_seconds) / in_turn,
        ),
        Figure(
            benchmark="subagents",
            figure="gate wait median, parents' requests",
            value=f"{parents * 1000:,.0f} ms ({len(fair.parent_waits)})",
            baseline=f"{children * 1000:,.0f} ms children's ({len(fair.child_waits)})",
            ratio=parents / children if children > 0 else None,
            target="< 1",
            met=parents < children,
        ),
        Figure(
            benchmark="subagents",
            figure=f"families completed, host.max_concurrent_turns = {fair.slots}",
            value=f"{len(fair.family_seconds)}/{fair.families} in {slowest:.1f} s",
            baseline=f"ideal {ideal:.1f} s ({needed} requests)",
            ratio=slowest / ideal if ideal > 0 else None,
            target="all",
            met=len(fair.family_seconds) == fair.families,
        ),
        Figure(
            benchmark="subagents",
            figure="  at most at once: parent turns, children",
            value=f"{fair.peak_parents}, {fair.peak_children}",
            baseline=f"{fair.refused} 429s in {fair.requests} requests",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--children", type=int, default=500, help="children run after the warm-up")
    parser.add_argument("--parents", type=int, default=2, help="parent sessions of measurement 1")
    parser.add_argument("--quiet", type=float, default=11.0, help="seconds the thread count must hold")
    parser.add_argument("--families", type=int, default=20, help="parents prompted at once")
    parser.add_argument("--rate", type=float, default=None, help="requests/s the provider allows (20)")
    parser.add_argument("--slots", type=int, default=8, help="host.max_concurrent_turns of measurement 2")
    parser.add_argument("--only", choices=("leaks", "fairness"), default=None)
    parser.add_argument(
        "--trace", action="store_true", help="also list what grew most (tracemalloc: figures not to quote)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.rate)
        return
    table: list[Figure] = []
    leaks = None
    if args.only in (None, "leaks"):
        leaks = measure_leaks(
            children=args.children, parents=args.parents, quiet=args.quiet, trace=args.trace
        )
        table += leak_figures(leaks)
    if args.only in (None, "fairness"):
        fair = measure_fairness(families=args.families, rate=args.rate or 20.0, slots=args.slots)
        table += fairness_figures(fair)
    if args.json:
        print(msgspec.json.encode(table).decode())
        return
    print(format_table(table))
    if leaks is not None:
        print(f"\n{leaks.turns} parent turns of {_FAN_OUT} children in {leaks.seconds:.1f} s")
        for r in leaks.readings:
            print(
                f"{r.point}: {r.python_threads} Python / {r.os_threads} OS threads, VmRSS "
                f"{r.rss_kib / 1024:,.1f} MiB (SQLite {r.sqlite_kib / 1024:,.1f} MiB), {r.addresses:,} "
                f"addresses ({r.stopped_addresses:,} stopped), settled in {r.settle_seconds:.1f} s"
            )
        base = set(leaks.readings[0].thread_names)
        print(
            "threads at the end not there at the baseline:",
            [n for n in leaks.readings[-1].thread_names if n not in base],
        )
        for line in leaks.grown:
            print(line)


if __name__ == "__main__":
    main()
