"""An MCP server for the tests, written with the SDK: ``python fixture_server.py [--http PORT] [--garbage]
[--silent] [--pidfile PATH] [--delay SECONDS]``.

Tools: ``echo`` (answers its text), ``die`` (exits mid-call with a code), ``hang`` (blocks its whole
event loop, so it answers nothing, pings included), ``slow`` (sleeps, cancellable), ``spawn_child``
(leaves a grandchild ``sleep`` in its process group), ``fail`` (an error result) and ``grow`` (adds a
tool and says its list changed). Processes it starts write their pid to the file they are given.

Annotations: ``echo`` is read-only, ``fail`` read-only though not idempotent (read-only wins), ``slow``
idempotent, ``spawn_child`` says both hints are false; the others have none.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def _misbehave_at_once(argv: list[str]) -> None:
    """``--garbage`` and ``--silent`` need no SDK: they say so on stderr before it is imported, which can
    take longer than a start-up timeout on a busy machine."""
    if "--garbage" in argv:
        print("fixture: about to misbehave", file=sys.stderr, flush=True)
        print("this is not JSON-RPC", flush=True)
        time.sleep(600)
    if "--silent" in argv:
        print("fixture: reading but never answering", file=sys.stderr, flush=True)
        for _ in sys.stdin:
            pass
        time.sleep(600)


if __name__ == "__main__":
    _misbehave_at_once(sys.argv[1:])

import anyio  # noqa: E402
from mcp.server import MCPServer  # noqa: E402
from mcp.server.mcpserver import Context  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

server = MCPServer("fixture")


def _grandchild(pidfile: str) -> int:
    child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    if pidfile:
        with open(pidfile + ".tmp", "w") as out:
            out.write(f"{child.pid}\n")
        os.replace(pidfile + ".tmp", pidfile)
    return child.pid


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@server.tool()
def die(code: int = 3) -> str:
    """Exit at once with the code, in the middle of the call."""
    sys.stdout.flush()
    os._exit(code)


@server.tool()
async def hang(pidfile: str = "") -> str:
    """Leave a grandchild process, then block the whole server (no answer, not even to a ping)."""
    _grandchild(pidfile)
    while True:
        time.sleep(3600)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def slow(seconds: float, markfile: str = "") -> str:
    """Sleep (cancellably), then answer; when cancelled, write ``cancelled`` to ``markfile``."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if markfile:
            with open(markfile, "w") as out:
                out.write("cancelled\n")
        raise
    return f"slept {seconds:g} s"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
def spawn_child(pidfile: str) -> str:
    """Start a grandchild `sleep 600` in the server's process group and answer its pid."""
    return f"spawned {_grandchild(pidfile)}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=False))
def fail(message: str) -> str:
    """Fail with the message (an error result)."""
    raise ToolError(message)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` (it echoes) and tell the client the tool list changed."""

    def extra(text: str) -> str:
        return f"{name}: {text}"

    server.add_tool(extra, name=name, description=f"The tool {name}, added at run time.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--pidfile", default="")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before serving")
    options = parser.parse_args()
    time.sleep(options.delay)
    if options.pidfile:
        with open(options.pidfile, "w") as out:
            out.write(f"{os.getpid()}\n")
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
