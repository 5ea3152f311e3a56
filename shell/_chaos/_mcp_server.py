"""The MCP server `turnkeep chaos --mcp-crash-rate` gives every session: ``python -m
shell._chaos._mcp_server``, over stdio, with ``echo`` (answers at once) and ``slow`` (sleeps, then
answers). Written with the ``mcp`` SDK."""

from __future__ import annotations

import anyio
from mcp.server import MCPServer

server = MCPServer("chaos")


@server.tool()
def echo(text: str) -> str:
    """Answer with the text."""
    return text


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for the seconds (at most 2), then answer."""
    await anyio.sleep(min(max(seconds, 0.0), 2.0))
    return f"slept {seconds:g} s"


if __name__ == "__main__":
    server.run("stdio")
