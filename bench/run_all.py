"""Every benchmark in one run, summed up in one table: figure, baseline, ratio, target, met.

Run: ``.venv/bin/python bench/run_all.py [--quick]``. Each benchmark runs in a process of its own (so
memory, threads and warm caches do not leak from one into the next) and measures its baseline in that
same process. ``--quick`` runs smaller sizes, for a smoke run; its figures are not the ones to quote.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

__all__ = [
    "BenchmarkFailed",
    "Figure",
    "figures_from_json",
    "format_table",
    "machine",
    "main",
    "parse_actors",
    "parse_sampler",
    "run_benchmarks",
]

_HERE = Path(__file__).resolve().parent


class Figure(msgspec.Struct, frozen=True, kw_only=True):
    """One measured figure next to the baseline measured in the same run.

    ``ratio`` is ``value / baseline`` when both are numbers of the same kind, else None; ``met`` says
    whether ``target`` holds, or is None when the figure has no target.
    """

    benchmark: str
    figure: str
    value: str
    baseline: str = ""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None


class BenchmarkFailed(Exception):
    """A benchmark's process exited with an error, or printed nothing this runner can read."""


def format_table(figures: Sequence[Figure]) -> str:
    """The figures as one aligned plain-text table, a header line first."""
    header = ("benchmark", "figure", "value", "baseline", "ratio", "target", "met?")
    rows = [header]
    for f in figures:
        ratio = "" if f.ratio is None else f"{f.ratio:.2f}"
        met = "" if f.met is None else ("yes" if f.met else "NO")
        rows.append((f.benchmark, f.figure, f.value, f.baseline, ratio, f.target, met))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    right = {2, 3, 4}
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def figures_from_json(text: str) -> list[Figure]:
    """The figures a benchmark printed with ``--json`` (its last line of output)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise BenchmarkFailed("the benchmark printed nothing")
    try:
        return msgspec.json.decode(lines[-1], type=list[Figure])
    except msgspec.DecodeError as exc:
        raise BenchmarkFailed(f"unreadable output: {lines[-1][:200]!r}") from exc


# -- the two benchmarks that print text tables of their own ----------------------------------------------

_ACTORS_ROW = re.compile(
    r"^(?P<name>\S.*?)\s{2,}(?P<ours>\S+ \S+)\s+(?P<base>\S+ \S+)\s+(?P<ratio>[\d.]+)\s+(?P<target>[<>]=.*)$"
)
_SAMPLER_ROW = re.compile(
    r"^(?P<name>\S.*?|\s+\S.*?)\s{2,}(?P<value>[\d,.]+)(?:\s+(?P<ratio>[\d.]+))?(?:\s+(?P<target>[<>]=.*))?$"
)


def _target_met(ratio: float, target: str) -> bool | None:
    match = re.fullmatch(r"\s*([<>]=)\s*([\d.]+)\s*", target)
    if match is None:
        return None
    bound = float(match.group(2))
    return ratio >= bound if match.group(1) == ">=" else ratio <= bound


def parse_actors(text: str) -> list[Figure]:
    """The rows of ``actors_bench.py``'s table (turnkeep against raw pykka)."""
    figures = []
    for line in text.splitlines():
        match = _ACTORS_ROW.match(line)
        if match is None:
            continue
        # The printed ratio is rounded; the values are precise enough to give it exactly.
        ours, base = (float(match[key].split()[0].replace(",", "")) for key in ("ours", "base"))
        ratio = ours / base if base else float(match["ratio"])
        target = match["target"].strip()
        figures.append(
            Figure(
                benchmark="actors",
                figure=match["name"].strip(),
                value=match["ours"],
                baseline=f"{match['base']} (raw pykka)",
                ratio=ratio,
                target=target,
                met=_target_met(ratio, target),
            )
        )
    return figures


def parse_sampler(text: str) -> list[Figure]:
    """The rows of ``sampler_bench.py``'s table: a headline row (turnkeep's value) followed by indented
    rows ``vs <baseline>`` carrying the baseline's value and the ratio."""
    figures = []
    headline, value = "", ""
    for line in text.splitlines():
        match = _SAMPLER_ROW.match(line)
        if match is None or line.startswith("benchmark"):
            continue
        name = match["name"].strip()
        if not line.startswith(" "):
            headline, value = name, match["value"]
            continue
        if match["ratio"] is None or not name.startswith("vs "):
            continue
        ratio = float(match["ratio"])
        target = (match["target"] or "").strip()
        figures.append(
            Figure(
                benchmark="sampler",
                figure=headline,
                value=value,
                baseline=f"{match['value']} ({name[3:]})",
                ratio=ratio,
                target=target,
                met=_target_met(ratio, target) if target else None,
            )
        )
    return figures


# -- running ---------------------------------------------------------------------------------------------


class _Benchmark(msgspec.Struct, frozen=True):
    name: str
    script: str
    args: tuple[str, ...]
    quick_args: tuple[str, ...]
    read: Callable[[str], list[Figure]]


_BENCHMARKS = (
    _Benchmark(
        "actors", "actors_bench.py", (), ("--tells", "20000", "--asks", "2000", "--rounds", "2"), parse_actors
    ),
    _Benchmark("sampler", "sampler_bench.py", (), ("--chunks", "5000", "--rounds", "1"), parse_sampler),
    _Benchmark(
        "scale",
        "scale_bench.py",
        ("--json",),
        ("--json", "--sessions", "300", "--all-active", "300"),
        figures_from_json,
    ),
    _Benchmark(
        "recovery", "recovery_bench.py", ("--json",), ("--json", "--crashes", "50"), figures_from_json
    ),
    _Benchmark(
        "convergence", "convergence_bench.py", ("--json",), ("--json", "--turns", "30"), figures_from_json
    ),
    _Benchmark(
        "provider gate",
        "provider_gate_bench.py",
        ("--json",),
        ("--json", "--sessions", "50", "--rate", "20"),
        figures_from_json,
    ),
    _Benchmark("sandbox", "sandbox_bench.py", ("--json",), ("--json", "--calls", "20"), figures_from_json),
    _Benchmark("serve", "serve_soak.py", ("--json",), ("--json", "--seconds", "8"), figures_from_json),
    _Benchmark(
        "store",
        "store_bench.py",
        ("--json",),
        ("--json", "--appends", "300", "--threads", "50", "--sessions", "200", "--rounds", "1"),
        figures_from_json,
    ),
    _Benchmark(
        "journal",
        "journal_bench.py",
        ("--json",),
        ("--json", "--sessions", "2", "--turns", "10", "--rounds", "2"),
        figures_from_json,
    ),
    _Benchmark(
        "telemetry",
        "telemetry_bench.py",
        ("--json",),
        ("--json", "--turns", "15", "--rounds", "2"),
        figures_from_json,
    ),
    _Benchmark(
        "acp", "acp_bench.py", ("--json",), ("--json", "--chunks", "2000", "--rounds", "2"), figures_from_json
    ),
    _Benchmark("startup", "startup_bench.py", ("--json",), ("--json", "--rounds", "3"), figures_from_json),
    _Benchmark(
        "subagents",
        "subagents_bench.py",
        ("--json",),
        ("--json", "--children", "100", "--families", "10"),
        figures_from_json,
    ),
    _Benchmark(
        "floor",
        "floor_bench.py",
        ("--json",),
        ("--json", "--rounds", "2", "--turns", "10", "--long", "300", "--concurrent", "100"),
        figures_from_json,
    ),
)


def run_benchmarks(
    names: Sequence[str] | None = None, *, quick: bool = False, echo: Callable[[str], None] = print
) -> list[Figure]:
    """Run the benchmarks called ``names`` (default: all), each in a fresh process, and collect their
    figures. A benchmark that fails is reported as a figure whose ``met`` is False; the others still run."""
    figures: list[Figure] = []
    for bench in _BENCHMARKS:
        if names and bench.name not in names:
            continue
        args = bench.quick_args if quick else bench.args
        started = time.monotonic()
        echo(f"running {bench.name} ...")
        done = subprocess.run(
            [sys.executable, str(_HERE / bench.script), *args], capture_output=True, text=True, check=False
        )
        elapsed = time.monotonic() - started
        try:
            if done.returncode != 0:
                raise BenchmarkFailed(f"exit status {done.returncode}: {done.stderr.strip()[-500:]}")
            found = bench.read(done.stdout)
            if not found:
                raise BenchmarkFailed(f"no figures in its output: {done.stdout.strip()[-500:]!r}")
        except BenchmarkFailed as exc:
            echo(f"  {bench.name} failed: {exc}")
            figures.append(Figure(benchmark=bench.name, figure="(did not run)", value="failed", met=False))
            continue
        echo(f"  {bench.name}: {len(found)} figures in {elapsed:.0f} s")
        figures.extend(found)
    return figures


def machine() -> str:
    """One line naming the machine: cores, CPU model, Python version, and the load average now."""
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}, load average {load}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and print the table; the exit status is 1 when a target was missed or a
    benchmark failed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    started = time.monotonic()
    before = machine()
    figures = run_benchmarks(names, quick=args.quick, echo=lambda line: print(line, file=sys.stderr))
    print(format_table(figures))
    print(f"\n{len(figures)} figures in {time.monotonic() - started:.0f} s")
    print(f"machine at start: {before}")
    print(f"machine at end:   {machine()}")
    return 1 if any(f.met is False for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
