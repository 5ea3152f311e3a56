"""Start-up: how soon the ``turnkeep`` command answers ``--help``, and how soon ``turnkeep run`` sends its
first model request, against the interpreter's own start (``python -c pass``) measured in the same run.

Each round runs, one after the other, ``python -c pass``, ``turnkeep --help``, ``turnkeep run --help`` and
``turnkeep run PROMPT``, each a new process (the installed console script, the virtual environment's
interpreter); a figure is the median over the rounds. A wall time is from just before
``subprocess.Popen`` to the process's exit; for ``run`` it is to the moment the embedded provider
(a ``FakeProvider`` in this process, on loopback) receives the turn's first request: its script notes
``time.monotonic()`` when it is asked. ``run`` uses one store (made by a warm-up run first, as a user's
store already is) and a new session in a temporary workspace each time, with the default settings: the
sandbox probed, no MCP server, no telemetry.

Run: ``.venv/bin/python bench/startup_bench.py [--rounds N] [--json]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
from run_all import Figure, format_table

from sampler.fake import Conversation, FakeProvider, FinalAnswer, Script, Step

_KEY_VAR = "STARTUP_BENCH_KEY"
_HELP_TARGET = 0.3
_FIRST_REQUEST_TARGET = 0.6
_TIMEOUT = 60.0


class StartTimes(msgspec.Struct, frozen=True):
    """Seconds of each round, by what was started."""

    interpreter: list[float]
    help: list[float]
    run_help: list[float]
    first_request: list[float]
    run_whole: list[float]


def _turnkeep() -> list[str]:
    """The console script next to this interpreter, else the module the script runs."""
    script = Path(sys.executable).with_name("turnkeep")
    return [str(script)] if script.exists() else [sys.executable, "-m", "shell.cli"]


class _Arrivals:
    """The monotonic times at which the provider was asked, noted by its script."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: list[float] = []

    def respond(self, conversation: Conversation) -> Step:
        with self._lock:
            self._times.append(time.monotonic())
        return FinalAnswer("done")

    def take(self) -> list[float]:
        with self._lock:
            times, self._times = self._times, []
        return times


def _wall(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    code = process.wait(_TIMEOUT)
    if code != 0:
        raise RuntimeError(f"{command[:3]} exited with {code}")
    return time.monotonic() - started


def _run_turn(command: list[str], env: dict[str, str], cwd: Path, arrivals: _Arrivals) -> tuple[float, float]:
    """Start ``command`` (a ``turnkeep run``); seconds to the provider's first request, and to the exit."""
    arrivals.take()
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _, err = process.communicate(timeout=_TIMEOUT)
    ended = time.monotonic()
    if process.returncode != 0:
        raise RuntimeError(f"turnkeep run exited with {process.returncode}: {err.strip()[-500:]}")
    times = arrivals.take()
    if not times:
        raise RuntimeError("turnkeep run completed without asking the provider")
    return times[0] - started, ended - started


def measure(rounds: int) -> StartTimes:
    """``rounds`` rounds of the four starts, after one warm-up round."""
    result = StartTimes([], [], [], [], [])
    turnkeep = _turnkeep()
    arrivals = _Arrivals()
    env = {name: value for name, value in os.environ.items() if not name.startswith("TURNKEEP_")}
    env[_KEY_VAR] = "sk-startup-bench"
    with (
        FakeProvider(Script(arrivals.respond, name="noted")) as provider,
        tempfile.TemporaryDirectory(prefix="turnkeep-startup-") as scratch,
    ):
        root = Path(scratch)
        run = [
            *turnkeep,
            "run",
            "--base-url",
            provider.base_url,
            "--api-key-env",
            _KEY_VAR,
            "--store",
            str(root / "sessions.db"),
            "--workspace",
            str(root),
            "hello",
        ]
        for index in range(rounds + 1):
            interpreter = _wall([sys.executable, "-c", "pass"], env, root)
            help_ = _wall([*turnkeep, "--help"], env, root)
            run_help = _wall([*turnkeep, "run", "--help"], env, root)
            first, whole = _run_turn(run, env, root, arrivals)
            if index == 0:
                continue  # the warm-up: the store is made, the files are in the page cache
            result.interpreter.append(interpreter)
            result.help.append(help_)
            result.run_help.append(run_help)
            result.first_request.append(first)
            result.run_whole.append(whole)
    return result


def figures(times: StartTimes) -> list[Figure]:
    """The median of each start against the interpreter's own, for the results table."""
    base = statistics.median(times.interpreter)
    baseline = f"{base:.3f} s (python -c pass)"
    rows = []
    for name, values, target in (
        ("turnkeep --help, wall time (median)", times.help, _HELP_TARGET),
        ("turnkeep run --help, wall time (median)", times.run_help, _HELP_TARGET),
        ("turnkeep run, start to first model request (median)", times.first_request, _FIRST_REQUEST_TARGET),
    ):
        value = statistics.median(values)
        rows.append(
            Figure(
                benchmark="startup",
                figure=name,
                value=f"{value:.3f} s",
                baseline=baseline,
                ratio=value / base,
                target=f"<= {target} s",
                met=value <= target,
            )
        )
    whole = statistics.median(times.run_whole)
    rows.append(
        Figure(
            benchmark="startup",
            figure="  turnkeep run, start to exit (one short turn)",
            value=f"{whole:.3f} s",
            baseline=f"{len(times.run_whole)} runs each",
        )
    )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    times = measure(args.rounds)
    if args.json:
        print(msgspec.json.encode(figures(times)).decode())
        return
    print(format_table(figures(times)))
    for name in StartTimes.__struct_fields__:
        values = getattr(times, name)
        print(f"{name}: " + ", ".join(f"{v:.3f}" for v in values) + " s")


if __name__ == "__main__":
    main()
