"""Soak of ``turnkeep serve`` behind a slow reader: does the server's memory stay flat?

Four sessions stream long answers turn after turn, each followed by a reader at full speed, while one
more reader of one of those sessions takes one event per second. The figure is the growth of the server
process's resident memory (VmRSS) over the soak; the baseline is its RSS after a warm-up under the same
load without the slow reader, measured in the same run. Afterwards the slow reader drains its stream and
must have received every terminal event the store holds for its session.

Run: ``.venv/bin/python bench/serve_soak.py [--seconds 60] [--warmup 10] [--json]``; prints one JSON
object (with ``--json``, the figures as ``bench/run_all.py`` reads them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from httpx_sse import connect_sse

from sampler.fake import FakeProvider, FinalAnswer, Script
from shell.store import SessionStore

TOKEN = "soak-token-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
TERMINAL = {"turn_completed", "turn_failed", "turn_cancelled"}
SESSIONS = 4
TARGET_MB = 20.0


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found[1])


def start_server(provider: FakeProvider, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    (tmp / "root").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_SERVE_TOKEN"] = TOKEN
    process = subprocess.Popen(
        [sys.executable, "-m", "shell.cli", "serve", "--port", "0", "--store", str(tmp / "store.db"),
         "--base-url", provider.base_url, "--model", "fake-model", "--workspace-root", str(tmp / "root")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            return process, found[1]
    raise RuntimeError("the server did not start")


def drive(url: str, session: str, stop: threading.Event, ends: list[int]) -> None:
    """Prompt, read the turn to its end at full speed, again, until ``stop``."""
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as client:
        after = "0"
        while not stop.is_set():
            client.post(f"/v1/sessions/{session}/prompts", json={"text": "go"})
            with connect_sse(client, "GET", f"/v1/sessions/{session}/events", params={"after": after}) as src:
                for sse in src.iter_sse():
                    if sse.event in TERMINAL:
                        after = sse.id
                        ends.append(1)
                        break


def slow_reader(url: str, session: str, stop: threading.Event, seen: list[str], cut: list[int]) -> None:
    """One event per second until ``stop``, then as fast as it can until told to end (``seen`` gets the
    ids of the terminal events). Cut off by the server for falling behind, it reconnects after the last id
    it read, as any event-stream client does (``cut`` counts the reconnections)."""
    last = "0"
    with httpx.Client(base_url=url, headers=HEADERS, timeout=120) as client:
        while True:
            try:
                with connect_sse(
                    client, "GET", f"/v1/sessions/{session}/events", headers={"Last-Event-ID": last}
                ) as source:
                    for sse in source.iter_sse():
                        if sse.id:
                            last = sse.id
                        if sse.event in TERMINAL:
                            seen.append(sse.id)
                        if sse.event == "drained":
                            return
                        if not stop.is_set():
                            time.sleep(1.0)
                        elif len(seen) >= needed[0]:
                            return
            except (httpx.RemoteProtocolError, httpx.ReadError):
                cut.append(1)


needed = [1 << 30]


def figures(
    baseline: int, after: int, growth_mb: float, seen: int, stored: int, complete: bool
) -> list[dict[str, object]]:
    """The figures as ``bench/run_all.py`` reads them."""
    return [
        {
            "benchmark": "serve",
            "figure": "server RSS growth behind a slow reader",
            "value": f"+{growth_mb:.1f} MiB ({after / 1024:.1f} MiB)",
            "baseline": f"{baseline / 1024:.1f} MiB after warm-up",
            "ratio": round(after / baseline, 3),
            "target": f"< {TARGET_MB:g} MiB",
            "met": growth_mb < TARGET_MB,
        },
        {
            "benchmark": "serve",
            "figure": "slow reader's terminal events",
            "value": f"{seen} of {stored}",
            "target": "all, in order",
            "met": complete,
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--no-slow-reader", action="store_true", help="the load alone, for comparison")
    parser.add_argument("--json", action="store_true", help="print the figures for bench/run_all.py")
    options = parser.parse_args()
    answer = FinalAnswer("streamed text " * 4000, chunks=2000)
    script = Script(lambda _: answer)
    with FakeProvider(script, chunk_chars=28) as provider, tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(provider, Path(tmp))
        try:
            with httpx.Client(base_url=url, headers=HEADERS) as client:
                for n in range(SESSIONS):
                    client.post("/v1/sessions", json={"workspace": f"w{n}", "id": f"s{n}"})
            stop_load, stop_slow = threading.Event(), threading.Event()
            ends: list[int] = []
            drivers = [
                threading.Thread(target=drive, args=(url, f"s{n}", stop_load, ends), daemon=True)
                for n in range(SESSIONS)
            ]
            for thread in drivers:
                thread.start()
            time.sleep(options.warmup)
            baseline = rss_kib(process.pid)
            seen: list[str] = []
            cut: list[int] = []
            slow = threading.Thread(target=slow_reader, args=(url, "s0", stop_slow, seen, cut), daemon=True)
            if not options.no_slow_reader:
                slow.start()
            peak = baseline
            deadline = time.monotonic() + options.seconds
            while time.monotonic() < deadline:
                time.sleep(1.0)
                peak = max(peak, rss_kib(process.pid))
            after = rss_kib(process.pid)
            stop_load.set()
            for thread in drivers:
                thread.join(60)
            with SessionStore.open(Path(tmp) / "store.db") as store:
                stored_ends = [str(e.seq) for e in store.load_events("s0") if e.type.startswith("Turn")
                               and e.type != "TurnStarted"]  # fmt: skip
            needed[0] = len(stored_ends)
            stop_slow.set()
            if not options.no_slow_reader:
                slow.join(120)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    growth_mb = (after - baseline) / 1024
    complete = seen == stored_ends
    if options.json:
        print(json.dumps(figures(baseline, after, growth_mb, len(seen), len(stored_ends), complete)))
        return
    print(json.dumps({
        "seconds": options.seconds,
        "turns_completed": len(ends),
        "rss_baseline_mib": round(baseline / 1024, 1),
        "rss_after_mib": round(after / 1024, 1),
        "rss_peak_mib": round(peak / 1024, 1),
        "rss_growth_mib": round(growth_mb, 2),
        "ratio_after_to_baseline": round(after / baseline, 3),
        "target_growth_mib": TARGET_MB,
        "slow_reader_terminal_events": len(seen),
        "stored_terminal_events": len(stored_ends),
        "every_terminal_event_received": seen == stored_ends,
        "slow_reader_reconnections": len(cut),
        "met": growth_mb < TARGET_MB and seen == stored_ends,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
