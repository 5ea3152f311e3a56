"""What `turnkeep acp` adds to each streamed text chunk: the framing of its `session/update` line, and the
whole way an event takes from the session's thread to the line written, against encoding the event as
JSON, measured in the same run.

- framing: the agent's `UpdateBuilder` makes the `agent_message_chunk` update of one `TextDelta` and the
  line is encoded (`session/update` notification, JSON-RPC 2.0, newline), as the agent does for each
  chunk;
- the event path: a real `AcpAgent` on a trio loop, with one session opened through `session/new` (on a
  stand-in host that only hands out an address), is given `--chunks` `TextDelta` events by a thread, as a
  session's subscriber is called: each crosses to the loop, is framed and written to a line sink (a list);
  the figure is the process CPU from the first event to the last line, per chunk: in a burst (the
  events given as fast as the thread can), and one at a time (each given once the one before is
  written, a tenth as many: each wakes the loop on its own), the latter against a bare call handed from
  a thread to a trio loop one at a time and waited for (the crossing every consumer on the loop pays);
- the baseline: `msgspec.json.encode` of the same `TextDelta` (the least any process writing the event
  out does).

CPU is `time.process_time` (every thread), per chunk, the median of `--rounds` rounds. The chunk text is
`--text` characters long (default 24: a few tokens, as providers stream them).

Run: ``.venv/bin/python bench/acp_bench.py [--chunks N] [--rounds N] [--text N] [--json]``.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio
from run_all import Figure, format_table

from shell import events as ev
from shell.acp import AcpSettings
from shell.acp._agent import AcpAgent
from shell.acp._jsonrpc import encode_notification
from shell.acp._schema import SessionNotification
from shell.acp._updates import UpdateBuilder
from shell.config import Settings

FRAMING_TARGET_US = 5.0


class AcpCost(msgspec.Struct, frozen=True):
    """CPU-microseconds per chunk of each round, by what was measured."""

    framing: list[float]
    event_path: list[float]
    one_at_a_time: list[float]
    handoff: list[float]
    baseline: list[float]


def _deltas(count: int, text: int) -> list[ev.TextDelta]:
    return [ev.TextDelta("s1", 1, ("word " * text)[:text]) for _ in range(count)]


def _framing(deltas: list[ev.TextDelta]) -> float:
    builder = UpdateBuilder(128_000, 1 << 20)
    cpu = time.process_time()
    for delta in deltas:
        for update in builder.live(delta, now=0.0):
            encode_notification("session/update", SessionNotification(session_id="s1", update=update))
    return (time.process_time() - cpu) / len(deltas) * 1e6


def _baseline(deltas: list[ev.TextDelta]) -> float:
    encode = msgspec.json.encode
    cpu = time.process_time()
    for delta in deltas:
        encode(delta)
    return (time.process_time() - cpu) / len(deltas) * 1e6


class _Address:
    def ask(self, message: Any, timeout: float | None = None) -> Any:
        raise AssertionError(f"the bench asks the session nothing, got {message!r}")

    def tell(self, message: Any) -> None:
        pass


class _Host:
    """The part of an `AgentHost` that `session/new` uses: it keeps the agent's subscriber."""

    def __init__(self) -> None:
        self.settings = Settings()
        self.subscribers: list[Any] = []

    def open(self, workspace: Any, *, session_id: str, subscribers: Any = (), **_: Any) -> _Address:
        self.subscribers.extend(subscribers)
        return _Address()


def _event_path(deltas: list[ev.TextDelta], scratch: Path, *, one_at_a_time: bool) -> float:
    host = _Host()
    written: list[bytes] = []
    all_written = threading.Event()
    wanted = len(deltas) + 2  # the initialize and session/new answers, then one line a chunk

    line_written = threading.Event()

    async def write(line: bytes) -> bool:
        written.append(line)
        line_written.set()
        if len(written) == wanted:
            all_written.set()
        return True

    cpu: list[float] = []

    async def main() -> None:
        agent = AcpAgent(host, AcpSettings(), write)  # type: ignore[arg-type]
        send, receive = trio.open_memory_channel[Any](10)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, receive)
            await send.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
            new = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(scratch), "mcpServers": []},
            }
            await send.send(msgspec.json.encode(new))
            with trio.fail_after(30):
                while len(written) < 2:
                    await trio.sleep(0.001)
            (forward,) = host.subscribers
            session = msgspec.json.decode(written[1])["result"]["sessionId"]
            events = [msgspec.structs.replace(delta, session=session) for delta in deltas]

            def feed() -> None:
                started = time.process_time()
                for event in events:
                    line_written.clear()
                    forward(event)
                    if one_at_a_time:
                        line_written.wait(10)  # the next chunk comes once this one is written
                all_written.wait(60)
                cpu.append(time.process_time() - started)

            await trio.to_thread.run_sync(feed)
            if len(written) != wanted:
                raise RuntimeError(f"{len(written) - 2} of {len(deltas)} chunks were written")
            await send.send(None)

    trio.run(main)
    return cpu[0] / len(deltas) * 1e6


def _handoff(count: int) -> float:
    """A thread handing the loop ``count`` calls one at a time, each waited for: the crossing alone."""
    done = threading.Event()
    cpu: list[float] = []

    async def main() -> None:
        token = trio.lowlevel.current_trio_token()

        def feed() -> None:
            started = time.process_time()
            for _ in range(count):
                done.clear()
                token.run_sync_soon(done.set)
                done.wait(10)
            cpu.append(time.process_time() - started)

        await trio.to_thread.run_sync(feed)

    trio.run(main)
    return cpu[0] / count * 1e6


def measure(*, chunks: int, rounds: int, text: int, scratch: Path) -> AcpCost:
    """Each figure ``rounds`` times, one after the other within a round."""
    deltas = _deltas(chunks, text)
    cost = AcpCost([], [], [], [], [])
    for _ in range(rounds):
        cost.baseline.append(_baseline(deltas))
        cost.framing.append(_framing(deltas))
        cost.event_path.append(_event_path(deltas, scratch, one_at_a_time=False))
        few = deltas[: max(1, len(deltas) // 10)]
        cost.one_at_a_time.append(_event_path(few, scratch, one_at_a_time=True))
        cost.handoff.append(_handoff(len(few)))
    return cost


def figures(cost: AcpCost) -> list[Figure]:
    """The framing and the event path per chunk against the encoded event, for the results table."""
    baseline = statistics.median(cost.baseline)
    framing = statistics.median(cost.framing)
    path = statistics.median(cost.event_path)
    alone = statistics.median(cost.one_at_a_time)
    handoff = statistics.median(cost.handoff)
    return [
        Figure(
            benchmark="acp",
            figure="framing per text chunk",
            value=f"{framing:.2f} us",
            baseline=f"{baseline:.2f} us (the event encoded)",
            ratio=framing / baseline,
            target=f"<= {FRAMING_TARGET_US:g} us",
            met=framing <= FRAMING_TARGET_US,
        ),
        Figure(
            benchmark="acp",
            figure="a text chunk from the session's thread to its line, in a burst",
            value=f"{path:.2f} us",
            baseline=f"{baseline:.2f} us (the event encoded)",
            ratio=path / baseline,
        ),
        Figure(
            benchmark="acp",
            figure="the same, one chunk at a time",
            value=f"{alone:.2f} us",
            baseline=f"{handoff:.2f} us (a bare call handed to the loop and waited for)",
            ratio=alone / handoff,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--text", type=int, default=24)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        cost = measure(chunks=args.chunks, rounds=args.rounds, text=args.text, scratch=Path(scratch))
    if args.json:
        print(msgspec.json.encode(figures(cost)).decode())
        return
    print(format_table(figures(cost)))
    for name in AcpCost.__struct_fields__:
        print(f"{name}: " + ", ".join(f"{v:.2f}" for v in getattr(cost, name)) + " us per chunk")


if __name__ == "__main__":
    main()
