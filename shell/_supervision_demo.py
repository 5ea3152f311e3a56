"""A small live demo of the runtime: a supervised actor crashing under load and being restarted."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import msgspec

from actors import (
    Actor,
    ActorError,
    ActorSystem,
    ChaosPolicy,
    ChildSpec,
    Down,
    RestartIntensity,
    Supervisor,
    handles,
)


class Deposit(msgspec.Struct, frozen=True, tag=True):
    """Add ``amount`` to the ledger under ``op_id``."""

    op_id: int
    amount: int


class _Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: dict[int, int] = {}

    def add(self, op_id: int, amount: int) -> None:
        with self._lock:
            if op_id in self.entries:
                raise AssertionError(f"operation {op_id} applied twice")
            self.entries[op_id] = amount


class _Teller(Actor):
    def __init__(self, ledger: _Ledger) -> None:
        super().__init__()
        self._ledger = ledger

    def on_start(self) -> None:
        print(f"  [start]   {self.address.name} incarnation {self.incarnation}", flush=True)

    @handles(Deposit)
    def deposit(self, message: Deposit) -> int:
        self._ledger.add(message.op_id, message.amount)
        return message.op_id


class _Monitor(Actor):
    @handles(Down)
    def down(self, message: Down) -> None:
        print(f"  [down]    {message.address} incarnation {message.incarnation}: {message.error}", flush=True)


def run(operations: int = 400, crash_probability: float = 0.02, seed: int = 7) -> int:
    """Run the demo; returns the process exit code (0 when every operation is accounted for)."""
    print(f"supervision demo: {operations} deposits from 4 threads, crash probability {crash_probability}")
    ledger = _Ledger()
    ok: list[int] = []
    failed: list[int] = []
    lock = threading.Lock()
    started = time.monotonic()
    with ActorSystem() as system:
        teller = ChildSpec(
            "teller",
            lambda: _Teller(ledger),
            chaos=ChaosPolicy(seed=seed, crash_probability=crash_probability),
        )
        bank = system.spawn(
            ChildSpec("bank", lambda: Supervisor([teller], intensity=RestartIntensity(100, 1.0)))
        )
        monitor = system.spawn(ChildSpec("monitor", _Monitor))
        address = system.address(f"{bank.name}/teller")
        system.watch(address, monitor)

        def deposit(op_id: int) -> None:
            try:
                address.ask(Deposit(op_id, 10))
                with lock:
                    ok.append(op_id)
            except ActorError:
                with lock:
                    failed.append(op_id)

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(deposit, range(operations)))
        metrics = system.metrics()
    report = system.report
    assert report is not None
    lost = operations - len(ok) - len(failed)
    wrong = [op for op in failed if op in ledger.entries] + [op for op in ok if op not in ledger.entries]
    print()
    print(f"  deposits acknowledged  {len(ok)}")
    print(f"  deposits refused       {len(failed)} (each by a named error, none applied)")
    print(f"  crashes injected       {metrics.get('chaos_crashes', 0)}")
    print(f"  restarts               {metrics.get('restarts', 0)}")
    print(f"  lost or double         {lost + len(wrong)}")
    print(f"  shutdown clean         {report.clean} ({time.monotonic() - started:.2f} s in all)")
    return 0 if lost == 0 and not wrong and report.clean else 1
