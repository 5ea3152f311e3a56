"""The physical floor of a turn: the host's CPU per streamed echo turn and per streamed chunk, against a bare
program doing only what such a turn physically needs, measured in the same run.

The floor is one trio loop and nothing else: per turn it inserts the prompt into a SQLite table and
commits, sends one streamed chat-completions request (the conversation so far, encoded with msgspec) over
a kept-alive HTTP/1.1 connection on a plain non-blocking socket (each read: ``wait_readable``, then one
``recv`` of what is there, as the sampler's transport reads), undoes the ``chunked`` framing, splits the
server-sent events and decodes each event's JSON with msgspec into typed structs, joins the answer, then
inserts the answer and commits. The database is in WAL mode with ``synchronous = NORMAL``, as the host's
store. Nothing else: no actors, no threads, no retries, no events published, no general HTTP or SSE
parser (the framing code handles what the embedded provider sends and raises on anything else).

The host is a real ``shell.Host`` with its default SQLite store (WAL, ``synchronous = NORMAL``, group
commit): ``host.open(...)``, then ``session.run(...)`` for each turn. Both sides talk to the same embedded
provider, which runs in a process of its own (``bench/_services.py``, the echo script), so the CPU
measured (``time.process_time``: user and system, every thread) is each side's process alone. Two
providers run for the whole bench: one streams every answer in ``--chunks`` chunks (the echo turn), the
other in ``--long`` chunks.

Each round runs the floor and the host, each in a fresh process of its own (which goes first alternates
from round to round); the host side starts a host per provider. Each side measures:

- one at a time: ``--sessions`` sessions (conversations, for the floor), one turn at a time round-robin
  over them (never two at once): ``--turns`` turns each on the short provider, then ``--long-turns``
  turns each on the long one, after one unmeasured turn per session on each. CPU per turn is the process
  time of the measured turns divided by their number;
- at once (``--concurrent N``, 0 for none): N more sessions each prompt one turn at the same instant,
  ``--batches`` times on each provider after one unmeasured batch. The floor runs N tasks on its one
  loop, each with a kept-alive connection of its own; the host runs ``session.run`` from N threads that
  start together (a barrier), with ``max_concurrent_turns = N``. CPU per turn is the batches' process
  time divided by their turns.

The CPU per streamed chunk is marginal: (CPU per turn with ``--long`` chunks - CPU per turn with
``--chunks`` chunks) / (``--long`` - ``--chunks``), on each side, one at a time or at once: what one more
chunk costs (with, on both sides alike, what grows with the answer's length: a longer answer stored and
sent back in the history). A ratio is the median over the rounds of host / floor within each round.

How many chunks one read takes is not the same on both sides: a slower reader finds more chunks waiting
at each read, and a read (a wake of the loop, a system call) costs several chunks' decoding. So each side
counts its reads of the answer's stream, each one wait until the socket is readable and one call taking
what is there (the floor in its own code; the host by wrapping the sampler transport's one-read step,
``sampler._transport._receive``: one more coroutine call per read), and the floor also measures its
*decoding alone*: the bytes of one long answer, kept as they were read, fed again 20 times in 64 KiB
pieces (the framing undone, the events split, the JSON decoded; no read, no system call).

Run: ``.venv/bin/python bench/floor_bench.py [--rounds N] [--sessions N] [--turns N] [--long-turns N]
[--chunks N] [--long N] [--concurrent N] [--batches N] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import trio
from _services import outside_services
from run_all import Figure, format_table

SIDES = ("floor", "host")


class Side(msgspec.Struct, kw_only=True):
    """What one side measured in one round: CPU-microseconds per turn."""

    short_us: float = 0.0
    long_us: float = 0.0
    at_once_short_us: float = 0.0
    at_once_long_us: float = 0.0
    reads: dict[str, float] = {}
    """Reads of the response stream per turn, by phase (``short``, ``long``, ``at_once_short``, ...)."""
    commits_us: float = 0.0
    """The floor only: its two inserts and commits per turn, timed apart in a loop."""
    decoding_us: float = 0.0
    """The floor only: per chunk of a long answer, its framing, events and JSON decoded without any read
    (its bytes, kept from one more turn, fed again in 64 KiB pieces)."""
    turns: int = 0
    completed: int = 0


class FloorRun(msgspec.Struct, kw_only=True):
    """Every round of both sides, and the sizes they ran at."""

    rounds: dict[str, list[Side]]
    chunks: int
    long: int
    concurrent: int


# -- the floor ------------------------------------------------------------------------------------------


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_reads = [0]
"""Reads of a response stream so far, on either side (the host's are counted by a wrapper)."""
_encode = msgspec.json.Encoder().encode


class _Unchunked:
    """Undoes ``Transfer-Encoding: chunked`` for pieces split anywhere (no extensions, no trailers)."""

    __slots__ = ("_buffer", "_remaining", "done")

    def __init__(self) -> None:
        self._buffer = b""
        self._remaining = -1  # data bytes due; -1: a size line; -2: the CRLF after data; -3: the last CRLF
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer + data if self._buffer else data
        out: list[bytes] = []
        position, size = 0, len(buffer)
        while position < size:
            remaining = self._remaining
            if remaining > 0:
                end = min(size, position + remaining)
                out.append(buffer[position:end])
                self._remaining = remaining - (end - position) or -2
                position = end
            elif remaining == -1:
                newline = buffer.find(b"\r\n", position)
                if newline < 0:
                    break
                length = int(buffer[position:newline], 16)
                position = newline + 2
                self._remaining = length or -3
            else:
                if size - position < 2:
                    break
                if buffer[position : position + 2] != b"\r\n":
                    raise ValueError("malformed chunked body")
                position += 2
                if remaining == -3:
                    self.done = True
                    if position != size:
                        raise ValueError("bytes after the end of the body")
                self._remaining = -1
        self._buffer = buffer[position:]
        return b"".join(out) if len(out) != 1 else out[0]


class _Connection:
    """One kept-alive HTTP/1.1 connection to the provider, on a plain non-blocking socket."""

    def __init__(self, base_url: str) -> None:
        parts = urllib.parse.urlsplit(base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        self._head = (
            f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            "Authorization: Bearer floor\r\nContent-Length: "
        ).encode()
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)

    async def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            view = view[sent:]

    async def _receive(self) -> bytes:
        while True:
            await trio.lowlevel.wait_readable(self.sock)
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError("the provider closed the connection")
            _reads[0] += 1
            return data

    async def stream(self, body: bytes, capture: list[bytes] | None = None) -> tuple[str, int]:
        """Send one request; the answer's text and how many content chunks carried it. With ``capture``,
        the body's bytes are appended to it as they are read."""
        await self._send(self._head + str(len(body)).encode() + b"\r\n\r\n" + body)
        data = await self._receive()
        while b"\r\n\r\n" not in data:
            data += await self._receive()
        head, _, data = data.partition(b"\r\n\r\n")
        if head[9:12] != b"200" or b"transfer-encoding: chunked" not in head.lower():
            raise RuntimeError(f"unexpected response: {head[:200]!r}")
        answer = _Answer()
        while True:
            if capture is not None:
                capture.append(data)
            if answer.feed(data):
                return "".join(answer.pieces), len(answer.pieces)
            data = await self._receive()


class _Answer:
    """A streamed answer's body as it is read: the framing undone, the events split, each event's JSON
    decoded, the content kept."""

    __slots__ = ("_body", "_pending", "pieces")

    def __init__(self) -> None:
        self._body = _Unchunked()
        self._pending = b""
        self.pieces: list[str] = []

    def feed(self, data: bytes) -> bool:
        """Take one read's bytes; True once the body has ended."""
        payload = self._body.feed(data)
        if self._pending:
            payload = self._pending + payload
        events = payload.split(b"\n\n")
        self._pending = events.pop()
        for event in events:
            if event[:6] != b"data: " or event == b"data: [DONE]":
                continue
            chunk = _decode_chunk(event[6:])
            if chunk.choices:
                content = chunk.choices[0].delta.content
                if content:
                    self.pieces.append(content)
        return self._body.done


def decoding_alone(body: bytes, chunks: int, times: int) -> float:
    """CPU-microseconds per chunk of undoing the framing of ``body`` (an answer of ``chunks`` chunks),
    splitting its events and decoding them, fed in 64 KiB pieces as if each read took that much."""
    pieces = [body[start : start + 65536] for start in range(0, len(body), 65536)]
    cpu = time.process_time()
    for _ in range(times):
        answer = _Answer()
        for piece in pieces:
            answer.feed(piece)
    cpu = time.process_time() - cpu
    if len(answer.pieces) != chunks:
        raise RuntimeError(f"the replayed answer has {len(answer.pieces)} chunks, not {chunks}")
    return cpu / (times * chunks) * 1e6


class _Floor:
    """The floor's conversations and its database."""

    def __init__(self, db_path: Path) -> None:
        self.db = sqlite3.connect(db_path)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL,"
            " role TEXT NOT NULL, content TEXT NOT NULL)"
        )
        self.db.commit()
        self.failures: list[str] = []
        self.completed = 0
        self.captured: list[bytes] = []

    def _store(self, session: str, seq: int, role: str, content: str) -> None:
        self.db.execute(
            "INSERT INTO messages (session, seq, role, content) VALUES (?, ?, ?, ?)",
            (session, seq, role, content),
        )
        self.db.commit()

    async def turn(
        self,
        connection: _Connection,
        session: str,
        history: list[dict[str, str]],
        text: str,
        chunks: int,
        capture: list[bytes] | None = None,
    ) -> None:
        self._store(session, len(history), "user", text)
        history.append({"role": "user", "content": text})
        body = _encode(
            {
                "model": "fake-model",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": history,
            }
        )
        answer, count = await connection.stream(body, capture)
        history.append({"role": "assistant", "content": answer})
        self._store(session, len(history) - 1, "assistant", answer)
        if count == chunks and answer.startswith("echo: "):
            self.completed += 1
        else:
            self.failures.append(f"{count} chunks: {answer[:60]!r}")

    def commits_alone(self, pairs: int) -> float:
        """CPU-microseconds of two inserts and commits, as a turn makes them, timed in a loop."""
        cpu = time.process_time()
        for n in range(pairs):
            self._store("commits", 2 * n, "user", f"turn {n}")
            self._store("commits", 2 * n + 1, "assistant", "echo: " + f"turn {n} " * 4)
        return (time.process_time() - cpu) / pairs * 1e6


@contextlib.contextmanager
def _phase(side: Side, phase: str, turns: int) -> Iterator[None]:
    """Measure the turns run in the block: CPU and reads per turn, stored on ``side`` under ``phase``."""
    reads, cpu = _reads[0], time.process_time()
    yield
    cpu = time.process_time() - cpu
    setattr(side, f"{phase}_us", cpu / turns * 1e6)
    side.reads[phase] = (_reads[0] - reads) / turns
    side.turns += turns


async def _floor_main(args: argparse.Namespace, floor: _Floor, side: Side) -> None:
    async def one_at_a_time(url: str, chunks: int, per_session: int, phase: str) -> None:
        connection = _Connection(url)
        names = [f"s{i}-{chunks}" for i in range(args.sessions)]
        histories: list[list[dict[str, str]]] = [[] for _ in names]
        for name, history in zip(names, histories, strict=True):
            await floor.turn(connection, name, history, "warm up", chunks)
        with _phase(side, phase, per_session * len(names)):
            for n in range(per_session):
                for name, history in zip(names, histories, strict=True):
                    await floor.turn(connection, name, history, f"turn {n}", chunks)
        if phase == "long":  # one more, unmeasured, to keep its bytes for decoding alone
            await floor.turn(connection, names[0], histories[0], "kept", chunks, floor.captured)
        connection.sock.close()

    async def at_once(url: str, chunks: int, phase: str) -> None:
        connections = [_Connection(url) for _ in range(args.concurrent)]
        names = [f"c{i}-{chunks}" for i in range(args.concurrent)]
        histories: list[list[dict[str, str]]] = [[] for _ in names]

        async def batch(text: str) -> None:
            async with trio.open_nursery() as nursery:
                for connection, name, history in zip(connections, names, histories, strict=True):
                    nursery.start_soon(floor.turn, connection, name, history, text, chunks)

        await batch("warm up")
        with _phase(side, phase, args.batches * args.concurrent):
            for n in range(args.batches):
                await batch(f"turn {n}")
        for connection in connections:
            connection.sock.close()

    await one_at_a_time(args.short_url, args.chunks, args.turns, "short")
    await one_at_a_time(args.long_url, args.long, args.long_turns, "long")
    if args.concurrent:
        await at_once(args.short_url, args.chunks, "at_once_short")
        await at_once(args.long_url, args.long, "at_once_long")


def run_floor(args: argparse.Namespace, scratch: Path) -> Side:
    """The floor's round, in this process."""
    floor = _Floor(scratch / "floor.db")
    side = Side()
    trio.run(_floor_main, args, floor, side)
    if floor.failures:
        raise RuntimeError(f"floor turns went wrong: {floor.failures[:3]}")
    side.completed = floor.completed - 2 * args.sessions - 1 - 2 * args.concurrent
    side.commits_us = floor.commits_alone(max(200, args.sessions * args.turns))
    side.decoding_us = decoding_alone(b"".join(floor.captured), args.long, 20)
    return side


# -- the host -------------------------------------------------------------------------------------------


def _count_host_reads() -> bool:
    """Count the sampler transport's reads of a response in ``_reads``; False when it has no such step."""
    from sampler import _transport

    receive = getattr(_transport, "_receive", None)
    if receive is None:
        return False

    async def counted(*args: Any, **kwargs: Any) -> bytes:
        data: bytes = await receive(*args, **kwargs)
        _reads[0] += 1
        return data

    _transport._receive = counted  # type: ignore[attr-defined]
    return True


def run_host(args: argparse.Namespace, scratch: Path) -> Side:
    """The host's round, in this process: a host per provider."""
    from shell import Host, TurnCompleted, load_settings

    side = Side()
    counted = _count_host_reads()
    failures: list[object] = []

    def run(session: Any, text: str) -> None:
        end = session.run(text)
        if isinstance(end, TurnCompleted):
            side.completed += 1
        else:
            failures.append(end)

    def one_host(url: str, chunks: int, per_session: int, phase: str) -> None:
        env = {
            "TURNKEEP_PROVIDER__BASE_URL": url,
            "TURNKEEP_PROVIDER__MODEL": "fake-model",
            "TURNKEEP_STORE__PATH": str(scratch / f"host-{chunks}.db"),
            "TURNKEEP_HOST__MAX_CONCURRENT_TURNS": str(max(args.concurrent, 16)),  # 16: the default
        }
        with Host(load_settings(environ=env)) as host:
            sessions = [host.open(scratch / f"ws-{chunks}-{i}") for i in range(args.sessions)]
            for session in sessions:
                run(session, "warm up")
            with _phase(side, phase, per_session * len(sessions)):
                for n in range(per_session):
                    for session in sessions:
                        run(session, f"turn {n}")
            if not args.concurrent:
                return
            crowd = [host.open(scratch / f"ws-{chunks}-c{i}") for i in range(args.concurrent)]
            start = threading.Barrier(args.concurrent)

            def one(session: Any, text: str) -> None:
                start.wait()
                run(session, text)

            with ThreadPoolExecutor(max_workers=args.concurrent) as pool:

                def batch(text: str) -> None:
                    for future in [pool.submit(one, session, text) for session in crowd]:
                        future.result()

                batch("warm up")
                with _phase(side, f"at_once_{phase}", args.batches * args.concurrent):
                    for n in range(args.batches):
                        batch(f"turn {n}")

    one_host(args.short_url, args.chunks, args.turns, "short")
    one_host(args.long_url, args.long, args.long_turns, "long")
    if failures:
        raise RuntimeError(f"host turns did not complete: {failures[:3]}")
    side.completed -= 2 * args.sessions + 2 * args.concurrent
    if not counted:
        side.reads = {}
    return side


# -- the rounds -----------------------------------------------------------------------------------------


def _child(side: str, args: argparse.Namespace, short_url: str, long_url: str) -> Side:
    command = [sys.executable, __file__, "--child", side, "--short-url", short_url, "--long-url", long_url]
    for name in ("sessions", "turns", "long_turns", "chunks", "long", "concurrent", "batches"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {side}'s round failed:\n{done.stderr[-2000:]}")
    return msgspec.json.decode(done.stdout.splitlines()[-1], type=Side)


def measure(args: argparse.Namespace, echo: Callable[[str], None] = lambda _: None) -> FloorRun:
    """``args.rounds`` rounds of both sides, alternating which goes first."""
    rounds: dict[str, list[Side]] = {side: [] for side in SIDES}
    with outside_services(args.chunks) as short, outside_services(args.long) as long:
        for index in range(args.rounds):
            order = SIDES if index % 2 == 0 else tuple(reversed(SIDES))
            for side in order:
                started = time.monotonic()
                rounds[side].append(_child(side, args, short.provider_url, long.provider_url))
                echo(f"# round {index + 1}, {side}: {time.monotonic() - started:.1f} s")
    return FloorRun(rounds=rounds, chunks=args.chunks, long=args.long, concurrent=args.concurrent)


def _per_chunk(run: FloorRun, side: Side, prefix: str) -> float:
    """Marginal CPU-microseconds per chunk: (per long turn - per short turn) / (long - short chunks)."""
    long, short = getattr(side, f"{prefix}long_us"), getattr(side, f"{prefix}short_us")
    return float(long - short) / (run.long - run.chunks)


def _reads_per_chunk(run: FloorRun, side: Side, prefix: str) -> float:
    """Marginal reads per chunk, the same way (0 when the side's reads were not counted)."""
    reads = side.reads
    return (reads.get(f"{prefix}long", 0.0) - reads.get(f"{prefix}short", 0.0)) / (run.long - run.chunks)


def _row(
    run: FloorRun,
    figure: str,
    value: Callable[[Side], float],
    target: float | None,
    floor_value: Callable[[Side], float] | None = None,
    floor_name: str = "floor",
) -> Figure:
    """The host's median against the floor's, and the median over the rounds of their ratio."""
    host = [value(s) for s in run.rounds["host"]]
    floor = [(floor_value or value)(s) for s in run.rounds["floor"]]
    ratio = statistics.median(h / f for h, f in zip(host, floor, strict=True))
    digits = ".1f" if statistics.median(floor) < 100 else ",.0f"
    return Figure(
        benchmark="floor",
        figure=figure,
        value=f"{statistics.median(host):{digits}} us",
        baseline=f"{statistics.median(floor):{digits}} us ({floor_name})",
        ratio=ratio,
        target="" if target is None else f"<= {target:g}",
        met=None if target is None else ratio <= target,
    )


def _reads_row(run: FloorRun, where: str, prefix: str) -> Figure:
    host = statistics.median(_reads_per_chunk(run, s, prefix) for s in run.rounds["host"])
    floor = statistics.median(_reads_per_chunk(run, s, prefix) for s in run.rounds["floor"])
    return Figure(
        benchmark="floor",
        figure=f"  reads of the answer's stream per chunk (marginal), {where}",
        value=f"{host:.2f}" if host else "not counted",
        baseline=f"{floor:.2f} (floor)",
    )


def figures(run: FloorRun) -> list[Figure]:
    """The host against the floor, per turn and per chunk; the floor's commits; the turns completed."""
    chunks, span = f"{run.chunks} chunks", f"{run.chunks:,} to {run.long:,} chunks"
    phases = [("one at a time", "")]
    if run.concurrent:
        phases.append((f"{run.concurrent:,} at once", "at_once_"))
    rows = []
    for where, prefix in phases:
        rows += [
            _row(
                run,
                f"host CPU per echo turn ({chunks}), {where}",
                lambda s, p=prefix: float(getattr(s, f"{p}short_us")),
                4.0 if not prefix else None,
            ),
            _row(
                run,
                f"host CPU per streamed chunk ({span}), {where}",
                lambda s, p=prefix: _per_chunk(run, s, p),
                3.0,
            ),
            _reads_row(run, where, prefix),
            _row(
                run,
                f"  per chunk against the floor's decoding alone, {where}",
                lambda s, p=prefix: _per_chunk(run, s, p),
                None,
                lambda s: s.decoding_us,
                "no read",
            ),
        ]
    commits = statistics.median(s.commits_us for s in run.rounds["floor"])
    floor_turn = statistics.median(s.short_us for s in run.rounds["floor"])
    rows.append(
        Figure(
            benchmark="floor",
            figure="  of the floor's echo turn: two inserts and commits",
            value=f"{commits:,.0f} us",
            baseline=f"{commits / floor_turn:.0%} of the floor's turn",
        )
    )
    for side in SIDES:
        turns = sum(s.turns for s in run.rounds[side])
        completed = sum(s.completed for s in run.rounds[side])
        rows.append(
            Figure(
                benchmark="floor",
                figure=f"measured turns completed, {side}",
                value=f"{completed:,}/{turns:,}",
                target="all",
                met=completed == turns,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both sides (order alternating)")
    parser.add_argument("--sessions", type=int, default=4, help="sessions taking turns one at a time")
    parser.add_argument("--turns", type=int, default=50, help="echo turns per session, one at a time")
    parser.add_argument("--long-turns", type=int, default=10, help="long turns per session, one at a time")
    parser.add_argument("--chunks", type=int, default=40, help="chunks of an echo answer")
    parser.add_argument("--long", type=int, default=500, help="chunks of a long answer")
    parser.add_argument("--concurrent", type=int, default=300, help="turns at once (0: not measured)")
    parser.add_argument("--batches", type=int, default=1, help="measured batches of turns at once")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--short-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--long-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.long <= args.chunks:
        raise SystemExit("--long must be more than --chunks")
    if args.child:
        with tempfile.TemporaryDirectory(prefix="turnkeep-floor-") as scratch:
            side = (run_floor if args.child == "floor" else run_host)(args, Path(scratch))
        print(msgspec.json.encode(side).decode())
        return
    run = measure(args, echo=lambda line: print(line, file=sys.stderr))
    rows = figures(run)
    if args.json:
        print(msgspec.json.encode(rows).decode())
        return
    print(format_table(rows))
    print("\nrounds: CPU-us per turn (reads per turn)")
    phases = ("short", "long") + (("at_once_short", "at_once_long") if args.concurrent else ())
    for side in SIDES:
        for phase in phases:
            values = ", ".join(
                f"{getattr(s, f'{phase}_us'):,.0f} ({s.reads.get(phase, 0.0):.1f})" for s in run.rounds[side]
            )
            print(f"  {side} {phase}: {values}")


if __name__ == "__main__":
    main()
