"""Actor messaging: Address.tell throughput and Address.ask latency against raw pykka, in one run.

Run: ``.venv/bin/python bench/actors_bench.py [--tells N] [--asks N] [--rounds R]``. Prints ratios;
a ratio is turnkeep's figure divided by raw pykka's, measured alternately in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import msgspec
import pykka

from actors import Actor, ActorSystem, ChildSpec, handles


class Ping(msgspec.Struct, frozen=True, tag=True):
    n: int


class Count(msgspec.Struct, frozen=True, tag=True):
    pass


class TurnkeepCounter(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    @handles(Ping)
    def ping(self, message: Ping) -> int:
        self.seen += 1
        return message.n

    @handles(Count)
    def count(self, _: Count) -> int:
        return self.seen


class RawCounter(pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def on_receive(self, message: Any) -> Any:
        if type(message) is Ping:
            self.seen += 1
            return message.n
        return self.seen


def tell_rate(tell: Any, ask: Any, n: int) -> float:
    """Messages per second from the first tell until the actor has handled the last one."""
    base = ask(Count())
    started = time.perf_counter()
    for i in range(n):
        tell(Ping(i))
    assert ask(Count()) == base + n
    return n / (time.perf_counter() - started)


def ask_latency(ask: Any, n: int) -> float:
    """Median round trip of one ask, in microseconds."""
    samples = []
    for i in range(n):
        started = time.perf_counter()
        ask(Ping(i))
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tells", type=int, default=200_000)
    parser.add_argument("--asks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with ActorSystem() as system:
        address = system.spawn(ChildSpec("bench", TurnkeepCounter))
        raw = RawCounter.start()
        try:
            ours_tell, raw_tell, ours_ask, raw_ask = [], [], [], []
            for _ in range(args.rounds):
                raw_tell.append(tell_rate(raw.tell, lambda m: raw.ask(m, timeout=30), args.tells))
                ours_tell.append(tell_rate(address.tell, lambda m: address.ask(m, timeout=30), args.tells))
                raw_ask.append(ask_latency(lambda m: raw.ask(m, timeout=30), args.asks))
                ours_ask.append(ask_latency(lambda m: address.ask(m, timeout=30), args.asks))
        finally:
            raw.stop()

    tell_ours, tell_raw = statistics.median(ours_tell), statistics.median(raw_tell)
    ask_ours, ask_raw = statistics.median(ours_ask), statistics.median(raw_ask)
    rows = [
        (
            "Address.tell throughput",
            f"{tell_ours:,.0f} msg/s",
            f"{tell_raw:,.0f} msg/s",
            tell_ours / tell_raw,
            ">= 0.80",
        ),
        (
            "Address.ask latency (median)",
            f"{ask_ours:.1f} us",
            f"{ask_raw:.1f} us",
            ask_ours / ask_raw,
            "<= 1.25",
        ),
    ]
    print(f"{'benchmark':<30} {'turnkeep':>16} {'raw pykka':>16} {'ratio':>7}  target")
    for name, ours, baseline, ratio, target in rows:
        print(f"{name:<30} {ours:>16} {baseline:>16} {ratio:>7.2f}  {target}")


if __name__ == "__main__":
    main()
