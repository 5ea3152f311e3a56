"""Specification of group commit's promise under a crash: a process killed with SIGKILL in the middle of a
burst of appends from many threads loses none it acknowledged, stores none twice, and leaves every
session's seqs consecutive — on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from sampler.messages import TextPart, UserMessage
from shell.store import open_store

BURST = Path(__file__).with_name("_burst.py")
THREADS = 40
ACKNOWLEDGED_BEFORE_KILL = 400


def read_lines(stream: object, lines: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put(None)


def test_a_burst_killed_midway_keeps_every_acknowledged_append_once_with_its_seq(store_target, tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(BURST), str(store_target), str(THREADS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    acknowledged: list[tuple[str, int, str]] = []
    try:
        assert lines.get(timeout=60) == "ready\n", process.stderr
        while len(acknowledged) < ACKNOWLEDGED_BEFORE_KILL:
            line = lines.get(timeout=60)
            assert line is not None, "the burst ended before it was killed"
            _, session_id, seq, content = line.split()
            acknowledged.append((session_id, int(seq), content))
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    reader.join(timeout=30)
    # Lines written before the kill were acknowledged too; a line cut short by it is not an acknowledgement.
    while (line := lines.get(timeout=5)) is not None:
        if line.endswith("\n"):
            _, session_id, seq, content = line.split()
            acknowledged.append((session_id, int(seq), content))
    assert process.stderr is not None
    process.stderr.close()

    with open_store(store_target) as store:
        stored: dict[tuple[str, int], str] = {}
        for n in range(THREADS):
            session_id = f"b{n}"
            messages = store.load_messages(session_id, include_replaced=True)
            assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
            for m in messages:
                assert isinstance(m.message, UserMessage) and isinstance(m.message.parts[0], TextPart)
                stored[session_id, m.seq] = m.message.parts[0].text

    for session_id, seq, content in acknowledged:
        assert stored.get((session_id, seq)) == content
    assert [content for content, count in Counter(stored.values()).items() if count > 1] == []
    assert len(stored) >= len(acknowledged)
