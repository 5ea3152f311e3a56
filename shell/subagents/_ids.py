"""The id of the child session an ``agent`` call runs: derived from the call's place, so that the call run
again (retried, or its turn resumed by another host) finds the same child instead of starting a second."""

from __future__ import annotations

import hashlib

__all__ = ["child_session_id"]


def child_session_id(parent: str, turn: int, call_id: str) -> str:
    """The child session of the ``agent`` call ``call_id`` of turn ``turn`` of ``parent``: the same for the
    same three, and different for different ones (a digest of all three, with the parent and turn shown
    for people reading lists of sessions)."""
    digest = hashlib.sha256(f"{parent}\0{turn}\0{call_id}".encode()).hexdigest()[:12]
    return f"{parent}.agent-{turn}-{digest}"
