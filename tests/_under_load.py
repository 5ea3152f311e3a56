"""Runs the whole suite several times while other processes keep every core busy, and lists what failed.

``make test-loaded`` runs it: three runs in the usual order and one in a shuffled order with another hash
seed, each while one CPU-bound process per core competes with it. A test that fails in any run is listed
with the runs it failed in; the exit status is 1 if any failed. The busy processes are this program's own
children and end with it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["main"]


def _spin() -> None:
    while True:
        pass


@contextmanager
def _cores_kept_busy(count: int) -> Iterator[None]:
    """While inside, ``count`` processes of this program's own each keep a core busy."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            spinner.join(timeout=10)


@dataclass(frozen=True)
class _Run:
    label: str
    hash_seed: str
    shuffle_seed: int | None = None


@dataclass
class _Outcome:
    run: _Run
    seconds: float
    exit_status: int
    failed: list[str] = field(default_factory=list)


def _failed_tests(report: Path) -> list[str]:
    """The node ids of the tests a JUnit report lists as failed or in error."""
    if not report.exists():
        return []
    failed = []
    for case in ElementTree.parse(report).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").replace(".", "/")
            failed.append(f"{module}.py::{case.get('name')}")
    return failed


def _run_suite(run: _Run, pytest_args: Sequence[str], workdir: Path) -> _Outcome:
    report = workdir / f"{run.label}.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    if run.shuffle_seed is not None:
        command.append(f"--random-order-seed={run.shuffle_seed}")
    command += list(pytest_args)
    environment = {**os.environ, "PYTHONHASHSEED": run.hash_seed}
    started = time.monotonic()
    completed = subprocess.run(command, env=environment, check=False)
    return _Outcome(run, time.monotonic() - started, completed.returncode, _failed_tests(report))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite under load; 0 if every run passed, 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs in the usual order (default 3)")
    parser.add_argument("--shuffled", type=int, default=1, help="runs in a shuffled order (default 1)")
    parser.add_argument(
        "--busy", type=int, default=os.cpu_count() or 2, help="busy processes (default: cores)"
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (e.g. a path or -k)")
    options = parser.parse_args(argv)
    runs = [_Run(f"run-{n}", hash_seed=str(n)) for n in range(1, options.runs + 1)]
    runs += [
        _Run(f"shuffled-{n}", hash_seed=str(100 + n), shuffle_seed=1000 + n)
        for n in range(1, options.shuffled + 1)
    ]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="turnkeep-loaded-") as workdir, _cores_kept_busy(options.busy):
        for run in runs:
            print(
                f"== {run.label}: PYTHONHASHSEED={run.hash_seed}, order seed {run.shuffle_seed}", flush=True
            )
            outcomes.append(_run_suite(run, options.pytest_args, Path(workdir)))
    print("\n== under load, with", options.busy, "busy processes:")
    failing: dict[str, list[str]] = {}
    for outcome in outcomes:
        seconds, failed = round(outcome.seconds), len(outcome.failed)
        print(f"{outcome.run.label}: exit {outcome.exit_status}, {seconds} s, {failed} failed")
        for test in outcome.failed:
            failing.setdefault(test, []).append(outcome.run.label)
    for test, labels in sorted(failing.items()):
        print(f"FAILED {test} in {', '.join(labels)}")
    return 0 if all(outcome.exit_status == 0 for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
