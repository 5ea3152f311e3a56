"""Names that keep metric labels few: an actor's kind from its address, a tool outcome, a turn's outcome."""

from __future__ import annotations

from ..session import SessionPath

__all__ = ["actor_kind"]


def actor_kind(address: str) -> str:
    """The kind of the actor at ``address``: a session member's role (``sampler``, ``tools``, …), with
    ``_child`` for an actor below one (a tool call's actor), ``session`` for a session's own supervisor,
    else the last part of the name (``provider_gate``, ``host``). No id appears, so the label stays
    bounded however many sessions and calls run."""
    parsed = SessionPath.parse(address)
    if parsed is not None:
        _, members = parsed
        if not members:
            return "session"
        return members[0] if len(members) == 1 else f"{members[0]}_child"
    return address.rsplit("/", 1)[-1] or "root"
