"""The chat's ``/mcp`` command: the MCP servers' states, and ``/mcp reconnect NAME``."""

from __future__ import annotations

from ..facade import Host, Session
from ..host import HostError

__all__ = ["mcp_command"]

USAGE = "/mcp shows the MCP servers; /mcp reconnect NAME starts one again now"


def mcp_command(host: Host, session: Session, text: str) -> str:
    """What to print for the chat line ``text`` (``/mcp`` or ``/mcp reconnect NAME``)."""
    words = text.split()
    try:
        agent = host.agent_host
    except HostError as error:
        return str(error)
    if words == ["/mcp"]:
        states = [handle.state().describe() for handle in agent.mcp_servers()]
        return "\n".join(states) if states else "no MCP server is configured"
    if len(words) == 3 and words[1] == "reconnect":
        if agent.reconnect_mcp(words[2], session.id):
            return f"reconnecting the MCP server {words[2]}"
        return f"there is no MCP server {words[2]!r}"
    return USAGE
