"""Recovery: how long a session's ChatStateActor is out of service after a crash.

Each crash is a message the actor's chaos policy crashes on (``LearnWindow``, which no turn sends
here), asked of ``host/session/<id>/chat_state`` (a told one would be handed to the next incarnations
until a few injected crashes in a row made it a dead letter); the clock runs from that ask until an ask of
``GetHistory`` at the same address answers, served by the restarted incarnation (which reloads the
history from the store). The baseline is the same ask with no crash, in the same host and run.

Crashes go round-robin over enough sessions that no session supervisor exceeds its restart intensity.
Run: ``.venv/bin/python bench/recovery_bench.py [--crashes N] [--history TURNS] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
from run_all import Figure, format_table

from actors import ChaosCrash, ChaosPolicy
from sampler.fake import FakeProvider, Script
from shell import Host, SessionChaos, TurnCompleted, load_settings
from shell._protocol import GetHistory, LearnWindow

# The session supervisor allows 10 restarts within 5 s; stay well inside that.
_CRASHES_PER_SESSION = 8


class Recovery(msgspec.Struct, frozen=True):
    """Seconds per crash until the actor served again, and per ask without a crash."""

    recovery: list[float]
    baseline: list[float]
    history_messages: int
    sessions: int
    crashes_counted: int
    restarts_counted: int
    turns_after: int
    turns_after_completed: int


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(crashes: int, history: int) -> Recovery:
    """Crash chat-state actors ``crashes`` times in sessions with ``history`` turns behind them."""
    sessions = max(1, -(-crashes // _CRASHES_PER_SESSION))
    chaos = SessionChaos(chat_state=ChaosPolicy(seed=1, crash_probability=1.0, crash_on=(LearnWindow,)))
    with tempfile.TemporaryDirectory(prefix="turnkeep-recovery-") as tmp, FakeProvider(Script.echo()) as fake:
        settings = load_settings(
            environ={
                "TURNKEEP_PROVIDER__BASE_URL": fake.base_url,
                "TURNKEEP_PROVIDER__MODEL": "fake-model",
                "TURNKEEP_STORE__PATH": f"{tmp}/sessions.db",
            }
        )
        with Host(settings, chaos=chaos) as host:
            opened = [host.open(Path(tmp) / f"ws{i}") for i in range(sessions)]
            for session in opened:
                for turn in range(history):
                    if not isinstance(session.run(f"turn {turn}: remember this"), TurnCompleted):
                        raise RuntimeError("a history turn did not complete")
            system = host.agent_host.system
            chats = [system.address(s.address.name.rsplit("/", 1)[0] + "/chat_state") for s in opened]
            length = len(chats[0].ask(GetHistory()))
            for chat in chats:  # warm every path once
                chat.ask(GetHistory())
            before = system.metrics()
            recovery: list[float] = []
            baseline: list[float] = []
            for n in range(crashes):
                chat = chats[n % sessions]
                started = time.perf_counter()
                chat.ask(GetHistory())
                baseline.append(time.perf_counter() - started)
                started = time.perf_counter()
                with contextlib.suppress(ChaosCrash):
                    chat.ask(LearnWindow(1))
                served = chat.ask(GetHistory())
                recovery.append(time.perf_counter() - started)
                if len(served) != length:
                    raise RuntimeError(f"the restarted actor lost history: {len(served)} of {length}")
            now = system.metrics()
            counted = {k: now.get(k, 0) - before.get(k, 0) for k in ("chaos_crashes", "restarts")}
            # The sessions still work after all that.
            after = [s.run("one more turn") for s in opened]
    return Recovery(
        recovery=recovery,
        baseline=baseline,
        history_messages=length,
        sessions=sessions,
        crashes_counted=counted["chaos_crashes"],
        restarts_counted=counted["restarts"],
        turns_after=len(after),
        turns_after_completed=sum(isinstance(event, TurnCompleted) for event in after),
    )


def figures(r: Recovery) -> list[Figure]:
    """The figures of one run, as rows of the benchmark table."""
    rows: list[Figure] = []
    for label, q, target in (("median", 0.5, 0.050), ("p99", 0.99, None)):
        ours, base = _pct(r.recovery, q) * 1000, _pct(r.baseline, q) * 1000
        rows.append(
            Figure(
                benchmark="recovery",
                figure=f"chat state crash to serving again, {label}",
                value=f"{ours:.2f} ms",
                baseline=f"{base:.3f} ms (ask, no crash)",
                ratio=ours / base,
                target="" if target is None else f"< {target * 1000:g} ms",
                met=None if target is None else ours < target * 1000,
            )
        )
    rows.append(
        Figure(
            benchmark="recovery",
            figure="crashes measured (crashed, restarted)",
            value=f"{len(r.recovery)} ({r.crashes_counted}, {r.restarts_counted})",
            baseline=f"{r.sessions} sessions, {r.history_messages} messages each",
            target="all counted",
            met=r.crashes_counted == r.restarts_counted == len(r.recovery),
        )
    )
    rows.append(
        Figure(
            benchmark="recovery",
            figure="turns completed after the crashes",
            value=f"{r.turns_after_completed}/{r.turns_after}",
            target="all",
            met=r.turns_after_completed == r.turns_after,
        )
    )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the table (or, with ``--json``, the figures as JSON)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--crashes", type=int, default=200)
    parser.add_argument("--history", type=int, default=5, help="turns in each session before the crashes")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    result = measure(args.crashes, args.history)
    rows = figures(result)
    print(msgspec.json.encode(rows).decode() if args.json else format_table(rows))
    if not args.json:
        print(f"median of the no-crash ask: {statistics.median(result.baseline) * 1e6:.0f} us")


if __name__ == "__main__":
    main()
