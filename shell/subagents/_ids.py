"""The id of the child session an ``agent`` call runs: derived from the call's place, so that the call run
again (retried, or its turn resumed by another host) finds the same child instead of starting a second."""

from __future__ import annotations

import hashlib

__all__ = ["MAX_CHILD_ID", "child_session_id"]


MAX_CHILD_ID = 64
"""The longest a child's id is (what ``turnkeep serve`` takes as a session id)."""


def child_session_id(parent: str, turn: int, call_id: str) -> str:
    """The child session of the ``agent`` call ``call_id`` of turn ``turn`` of ``parent``: the same for the
    same three, and different for different ones (a digest of all three, after the parent's id — cut to
    keep the whole within :data:`MAX_CHILD_ID` characters — and the turn, for people reading lists)."""
    digest = hashlib.sha256(f"{parent}\0{turn}\0{call_id}".encode()).hexdigest()[:12]
    suffix = f".agent-{turn}-{digest}"
    return parent[: max(MAX_CHILD_ID - len(suffix), 1)] + suffix
