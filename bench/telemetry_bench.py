"""Telemetry's cost: turn throughput with traces and metrics exported (every turn traced, or one in ten),
with telemetry off, and with the telemetry hooks bypassed altogether.

Each configuration runs the same work in a host of its own: ``--sessions`` sessions, each in its own
thread, run ``--turns`` echo turns one after the other (each answer in ``--chunks`` streamed chunks when
given). The embedded provider and the OTLP receiver run in a process of their own on loopback
(bench/_services.py), so that what is measured is the host's: the figure is turns per CPU-second of the
bench's process (every thread of the host: its actors, the trio loop, the exporters; and the threads
asking for the turns), as ``time.process_time`` counts them, which other work on a shared machine does
not move the way it moves wall-clock rates; the wall-clock rate is printed beside it. Configurations
take turns within each round (the order rotates); a ratio is the median over the rounds of the ratio
within each round, so drift on the machine falls on both sides of it.

On a machine shared with other work one configuration's rate moves by several per cent from round to
round, about the effect measured; so the telemetry's own CPU is also measured apart, with little noise:
what the SessionActor told the telemetry during one real turn (its turn machine's inputs and actions) is
replayed through a telemetry of its own ``--replays`` times, its spans exported to the same receiver and
its metrics collected, best of 5. Set against the CPU a turn costs with telemetry off in the same run, it
gives the on/off ratio that cost alone implies. It is a lower bound: replayed in a tight loop the
telemetry's code runs with warm caches, faster than interleaved with a host's turns, and without the
garbage collection its spans cause while they wait to be exported. The same turn is replayed through a
telemetry whose sampling is 0 too: what a turn that is not traced still costs (its metrics, and the
recorder's work around spans the sampler declines).

The CPU a traced turn adds is the CPU per turn on (``1 / rate``) less the CPU per turn off, the median
over the rounds of that difference within each round; the same at sampling 0.1 is the cost per turn
averaged over traced and untraced turns.

- on: ``[telemetry] enabled`` (``sampling = 1.0``, the default: every turn traced), spans exported over
  OTLP/HTTP in batches to the receiver, metrics served on a Prometheus port and scraped once a round. The
  round's clock stops once the spans its turns made are exported (a flush of the batch processor): a
  round is shorter than the processor's export delay, so without the flush the encoding and sending of
  its spans would fall after the measurement.
- on, sampling 0.1: the same with ``sampling = 0.1``: one turn in ten (by trace id) is traced and
  exported; every turn is still counted in the metrics.
- off: the default configuration (telemetry disabled; the hooks are there, and see no observer).
- hooks bypassed: telemetry disabled and the SessionActor's feed loop without the observer hook, as it
  was before telemetry existed. (Usage accounting is part of the turn itself and runs in all four, and so
  does the test for a trace context when the SessionActor sends a Sample or RunTools: an attribute read.)

Run: ``.venv/bin/python bench/telemetry_bench.py [--sessions N] [--turns N] [--rounds N] [--chunks N]
[--json]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
from _services import outside_services
from run_all import Figure, format_table

from shell import Host, TurnCompleted, load_settings
from shell import events as ev
from shell import session as session_module
from shell import turn as tm
from shell.session._actor import _writes_at

CONFIGS = ("hooks bypassed", "off", "on", "on, sampling 0.1")
SAMPLED = {"on": 1.0, "on, sampling 0.1": 0.1}
"""The telemetry's sampling in each configuration with telemetry on."""


class Throughput(msgspec.Struct, frozen=True):
    """Turns per second of each round, by configuration, and what the hosts with telemetry on exported."""

    rounds: dict[str, list[float]]
    """Turns per CPU-second, by configuration, one per round."""
    replayed: float
    """The telemetry's own CPU-seconds per turn, replayed (see the module's doc)."""
    replayed_untraced: float
    """The same, replayed through a telemetry whose sampling is 0: a turn not traced."""
    wall: dict[str, list[float]]
    """Turns per wall-clock second, by configuration, one per round."""
    turns_per_round: int
    spans_posts: int
    scraped_bytes: int


def _feed_without_hooks(self: Any, message: tm.TurnInput) -> None:
    """The SessionActor's feed loop (``SessionActor._feed``) without its observer calls, as it would be
    without telemetry."""
    turn = self._rt.turn
    pending: deque[tm.TurnInput] = deque([message])
    while pending and turn is not None and self._rt.turn is turn:
        try:
            actions = turn.feed(pending.popleft(), time.monotonic())
        except Exception as exc:
            why = f"the session failed unexpectedly: {exc!r}"
            self._finish(turn, ev.TurnFailed(self._opts.session_id, turn.number, "internal", why))
            return
        if turn.end is not None:
            self._perform_ending(turn, actions)
            continue
        index = 0
        while index < len(actions):
            run = _writes_at(actions, index)
            try:
                if len(run) > 1 and self._write_all(turn, run):
                    index += len(run)
                    continue
                answer = self._perform(turn, actions[index])
            except Exception as exc:
                pending.append(self._failure(actions[index:], exc))
                break
            if answer is not None:
                pending.append(answer)
            index += 1


@contextmanager
def _bypassed(active: bool) -> Iterator[None]:
    original: Callable[..., None] = session_module.SessionActor._feed
    if active:
        session_module.SessionActor._feed = _feed_without_hooks  # type: ignore[method-assign]
    try:
        yield
    finally:
        session_module.SessionActor._feed = original  # type: ignore[method-assign]


def _one_round(
    config: str, base: dict[str, str], tmp: Path, sessions: int, turns: int
) -> tuple[float, float, int]:
    slug = "".join(c if c.isalnum() else "-" for c in config)
    env = dict(base, TURNKEEP_STORE__PATH=str(tmp / f"{slug}-{time.monotonic_ns()}.db"))
    if config in SAMPLED:
        env.update(
            TURNKEEP_TELEMETRY__ENABLED="true",
            TURNKEEP_TELEMETRY__PROMETHEUS_PORT="0",
            TURNKEEP_TELEMETRY__SAMPLING=str(SAMPLED[config]),
        )
    scraped = 0
    with _bypassed(config == "hooks bypassed"), Host(load_settings(environ=env)) as host:
        opened = [host.open(tmp / f"ws{i}") for i in range(sessions)]
        for session in opened:  # warm every session's actors and connections
            session.run("warm up")
        failures: list[object] = []

        def work(session: Any) -> None:
            for n in range(turns):
                end = session.run(f"turn {n}")
                if not isinstance(end, TurnCompleted):
                    failures.append(end)

        threads = [threading.Thread(target=work, args=(s,)) for s in opened]
        started, cpu = time.perf_counter(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120.0)
        telemetry = host.agent_host.telemetry
        if telemetry is not None:  # the export of the round's spans is part of its cost
            telemetry.tracer_provider.force_flush(30_000)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        if failures or any(thread.is_alive() for thread in threads):
            raise RuntimeError(f"{config}: turns did not complete: {failures[:3]!r}")
        if telemetry is not None and telemetry.prometheus_address is not None:
            host_, port = telemetry.prometheus_address
            scraped = len(httpx.get(f"http://{host_}:{port}/metrics", timeout=5.0).content)
    return sessions * turns / cpu, sessions * turns / elapsed, scraped


@contextmanager
def _observations() -> Iterator[list[tuple[int, object, list[Any]]]]:
    """Every (turn, input, actions) the telemetry of a session opened within is told."""
    from shell.telemetry import Telemetry

    seen: list[tuple[int, object, list[Any]]] = []
    original = Telemetry.observe

    def spy(self: Telemetry, session_id: str, number: int, message: object, actions: list[Any]) -> None:
        seen.append((number, message, list(actions)))
        original(self, session_id, number, message, actions)

    Telemetry.observe = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Telemetry.observe = original  # type: ignore[method-assign]


def _observed_turn(base: dict[str, str], tmp: Path) -> list[tuple[object, list[Any]]]:
    """What the telemetry of a host was told during one echo turn (its second: the first warms up)."""
    env = dict(base, TURNKEEP_STORE__PATH=str(tmp / "replay.db"), TURNKEEP_TELEMETRY__ENABLED="true")
    with _observations() as seen, Host(load_settings(environ=env)) as host:
        session = host.open(tmp / "replay")
        session.run("warm up")
        session.run("the turn replayed")
    return [(message, actions) for number, message, actions in seen if number == 2]


def _replayed(
    base: dict[str, str], turn: list[tuple[object, list[Any]]], replays: int, sampling: float = 1.0
) -> float:
    """CPU-seconds per turn of telemetry alone: ``turn``'s observations replayed ``replays`` times
    through a fresh telemetry sampling that share of the turns and exporting to the receiver, its spans
    flushed and metrics collected; best of 5."""
    from shell.config import TelemetrySettings
    from shell.telemetry import start_telemetry

    endpoint = base["TURNKEEP_TELEMETRY__OTLP_ENDPOINT"]
    settings = TelemetrySettings(enabled=True, otlp_endpoint=endpoint, sampling=sampling)
    telemetry = start_telemetry(settings, provider="openai", environ={})
    best = float("inf")
    try:
        for attempt in range(5):
            cpu = time.process_time()
            for number in range(replays):
                for message, actions in turn:
                    telemetry.observe(f"replay-{attempt}", number, message, actions)
            telemetry.tracer_provider.force_flush(30_000)
            telemetry.prometheus_text()
            best = min(best, time.process_time() - cpu)
    finally:
        telemetry.shutdown()
    return best / replays


def measure(
    sessions: int, turns: int, rounds: int, replays: int = 1_000, chunks: int | None = None
) -> Throughput:
    """Run every configuration ``rounds`` times, rotating their order; then replay one turn's telemetry
    ``replays`` times. Each answer is the echo of its prompt, in ``chunks`` streamed chunks when given."""
    results: dict[str, list[float]] = {config: [] for config in CONFIGS}
    wall: dict[str, list[float]] = {config: [] for config in CONFIGS}
    scraped = 0
    with (
        tempfile.TemporaryDirectory(prefix="turnkeep-telemetry-") as tmp,
        outside_services(chunks) as services,
    ):
        base = {
            "TURNKEEP_PROVIDER__BASE_URL": services.provider_url,
            "TURNKEEP_PROVIDER__MODEL": "fake-model",
            "TURNKEEP_TELEMETRY__OTLP_ENDPOINT": services.otlp_url,
        }
        for number in range(rounds):
            shift = number % len(CONFIGS)
            order = CONFIGS[shift:] + CONFIGS[:shift]
            for config in order:
                rate, wall_rate, size = _one_round(config, base, Path(tmp), sessions, turns)
                results[config].append(rate)
                wall[config].append(wall_rate)
                scraped = max(scraped, size)
        turn = _observed_turn(base, Path(tmp))
        replayed = _replayed(base, turn, replays)
        untraced = _replayed(base, turn, replays, sampling=0.0)
    return Throughput(
        rounds=results,
        replayed=replayed,
        replayed_untraced=untraced,
        wall=wall,
        turns_per_round=sessions * turns,
        spans_posts=services.posts,
        scraped_bytes=scraped,
    )


def paired(result: Throughput, ours: str, base: str) -> float:
    """The median over the rounds of ``ours / base`` measured in the same round (pairs share the
    machine's state of the moment better than medians taken apart)."""
    return statistics.median(a / b for a, b in zip(result.rounds[ours], result.rounds[base], strict=True))


def added_cpu(result: Throughput, ours: str, base: str) -> float:
    """The median over the rounds of the CPU-seconds per turn ``ours`` adds to ``base`` in the same
    round."""
    pairs = zip(result.rounds[ours], result.rounds[base], strict=True)
    return statistics.median(1 / a - 1 / b for a, b in pairs)


def figures(result: Throughput) -> list[Figure]:
    """The ratios, each against the baseline measured in the same run, round by round; the CPU a turn
    traced adds; the telemetry's own CPU, replayed."""
    median = {config: statistics.median(rates) for config, rates in result.rounds.items()}
    on, off, before = median["on"], median["off"], median["hooks bypassed"]
    tenth = median["on, sampling 0.1"]
    on_off, off_before = paired(result, "on", "off"), paired(result, "off", "hooks bypassed")
    tenth_off = paired(result, "on, sampling 0.1", "off")
    implied = 1 / (1 + result.replayed * off)  # the on/off ratio the telemetry's own CPU implies
    off_turn = statistics.median(1 / rate for rate in result.rounds["off"])
    traced, per_turn = added_cpu(result, "on", "off"), added_cpu(result, "on, sampling 0.1", "off")
    return [
        Figure(
            benchmark="telemetry",
            figure="turn throughput per CPU-second, telemetry on (traces + metrics exported)",
            value=f"{on:.1f} turns/s",
            baseline=f"{off:.1f} turns/s (telemetry off)",
            ratio=on_off,
            target=">= 0.95",
            met=on_off >= 0.95,
        ),
        Figure(
            benchmark="telemetry",
            figure="turn throughput per CPU-second, telemetry on, sampling 0.1",
            value=f"{tenth:.1f} turns/s",
            baseline=f"{off:.1f} turns/s (telemetry off)",
            ratio=tenth_off,
            target=">= 0.95",
            met=tenth_off >= 0.95,
        ),
        Figure(
            benchmark="telemetry",
            figure="turn throughput per CPU-second, telemetry off",
            value=f"{off:.1f} turns/s",
            baseline=f"{before:.1f} turns/s (hooks bypassed)",
            ratio=off_before,
            target=">= 0.99",
            met=off_before >= 0.99,
        ),
        Figure(
            benchmark="telemetry",
            figure="CPU per traced turn (on, sampling 1.0, less off)",
            value=f"{traced * 1e6:.0f} us",
            baseline=f"{off_turn * 1e6:.0f} us per turn (off)",
            ratio=traced / off_turn,
        ),
        Figure(
            benchmark="telemetry",
            figure="CPU per turn at sampling 0.1, all turns (on, sampling 0.1, less off)",
            value=f"{per_turn * 1e6:.0f} us",
            baseline=f"{off_turn * 1e6:.0f} us per turn (off)",
            ratio=per_turn / off_turn,
        ),
        Figure(
            benchmark="telemetry",
            figure="telemetry's own CPU per turn (replayed: a lower bound), against a turn's CPU, off",
            value=f"{result.replayed * 1e6:.0f} us",
            baseline=f"{1e6 / off:.0f} us per turn (off)",
            ratio=implied,
        ),
        Figure(
            benchmark="telemetry",
            figure="telemetry's own CPU per untraced turn (replayed, sampling 0), against a traced one",
            value=f"{result.replayed_untraced * 1e6:.0f} us",
            baseline=f"{result.replayed * 1e6:.0f} us (traced)",
            ratio=result.replayed_untraced / result.replayed,
        ),
        Figure(
            benchmark="telemetry",
            figure="  wall-clock turn throughput, on (median)",
            value=f"{statistics.median(result.wall['on']):.1f} turns/s",
            baseline=f"{statistics.median(result.wall['off']):.1f} turns/s (off)",
        ),
        Figure(
            benchmark="telemetry",
            figure="  wall-clock turn throughput, on, sampling 0.1 (median)",
            value=f"{statistics.median(result.wall['on, sampling 0.1']):.1f} turns/s",
            baseline=f"{statistics.median(result.wall['off']):.1f} turns/s (off)",
        ),
        Figure(
            benchmark="telemetry",
            figure="exported while on, both samplings (OTLP posts, metrics page)",
            value=f"{result.spans_posts} posts",
            baseline=f"{result.scraped_bytes:,} bytes scraped",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the table (or, with ``--json``, the figures as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=4, help="sessions running turns at once")
    parser.add_argument("--turns", type=int, default=100, help="turns per session per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (each runs every configuration)")
    parser.add_argument("--replays", type=int, default=1_000, help="times one turn's telemetry is replayed")
    parser.add_argument(
        "--chunks",
        type=int,
        default=None,
        help="stream each answer in this many chunks (default: as it comes)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    result = measure(args.sessions, args.turns, args.rounds, args.replays, args.chunks)
    rows = figures(result)
    print(msgspec.json.encode(rows).decode() if args.json else format_table(rows))
    if not args.json:
        for config, rates in result.rounds.items():
            print(f"{config}: " + ", ".join(f"{rate:.1f}" for rate in rates) + " turns per CPU-second")


if __name__ == "__main__":
    main()
