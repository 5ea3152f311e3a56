"""What a benchmarked host talks to, in a process of its own so that none of its CPU counts as the host's:
the embedded model provider (echo answers, in ``--chunks`` streamed chunks when given; with ``--tools``,
turns of two tool steps, ``read_file`` then ``write_file``, before the answer) and an OTLP/HTTP receiver
that accepts every export, keeps nothing and counts the posts.

Run by :func:`outside_services`; ``python bench/_services.py [--chunks N]`` prints the provider's base URL
and the receiver's, one a line, serves until its standard input closes, then prints how many posts the
receiver took.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OutsideServices", "outside_services"]


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts every export and keeps nothing."""

    posts = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        type(self).posts += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class OutsideServices:
    """The child's two addresses; ``posts`` is the receiver's count, set once the child has ended."""

    provider_url: str
    otlp_url: str
    posts: int = 0


@contextlib.contextmanager
def outside_services(chunks: int | None = None, *, tools: bool = False) -> Iterator[OutsideServices]:
    """The provider and the OTLP receiver in a child process, for as long as the block runs."""
    command = [sys.executable, __file__] + ([] if chunks is None else ["--chunks", str(chunks)])
    command += ["--tools"] if tools else []
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    services = OutsideServices(child.stdout.readline().strip(), child.stdout.readline().strip())
    try:
        if not services.provider_url or not services.otlp_url:
            raise RuntimeError("the benchmark's services did not start")
        yield services
    finally:
        child.stdin.close()
        try:
            child.wait(10)
            services.posts = int(child.stdout.readline() or 0)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=None, help="stream each answer in this many chunks")
    parser.add_argument("--tools", action="store_true", help="two tool steps before each answer")
    args = parser.parse_args()
    from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep

    script = Script.echo(chunks=args.chunks)
    if args.tools:
        script = Script.task(
            [
                ToolStep([("read_file", {"path": "notes.txt"})]),
                ToolStep([("write_file", {"path": "out.txt", "content": "written"})]),
                FinalAnswer("done", chunks=args.chunks),
            ]
        )

    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    receiving = threading.Thread(target=sink.serve_forever, name="otlp-sink", daemon=True)
    receiving.start()
    with FakeProvider(script) as provider:
        print(provider.base_url, flush=True)
        print(f"http://127.0.0.1:{sink.server_address[1]}", flush=True)
        sys.stdin.read()  # served for as long as the parent holds this open
    sink.shutdown()
    sink.server_close()
    print(_Sink.posts, flush=True)


if __name__ == "__main__":
    main()
