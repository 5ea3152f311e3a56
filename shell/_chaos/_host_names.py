"""The names a host-kill run gives its sessions and prompts, shared by the killed host and the checks."""

from __future__ import annotations

__all__ = ["prompt_text", "session_name"]


def session_name(index: int) -> str:
    """The id of the ``index``-th session of the run."""
    return f"chaos-{index}"


def prompt_text(session_id: str, turn: int) -> str:
    """The prompt of turn ``turn`` of ``session_id`` (the provider's script reads it back)."""
    return f"chaos {session_id} turn {turn}: read, write, then append"
