"""The names of a session subtree's actors, as one value instead of strings built and parsed in place."""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["MEMBERS", "SessionPath", "check_session_id"]

MEMBERS: Final = ("chat_state", "sampler", "tools", "session")
"""The children of a session's supervisor, in the order they start."""

_SUBTREE: Final = "session"


def check_session_id(session_id: str) -> str:
    """``session_id`` if it can name a subtree (non-empty, no ``/``, no whitespace at either end); raises
    :class:`ValueError` saying why not."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"a session id must be a non-empty string, got {session_id!r}")
    if "/" in session_id or session_id != session_id.strip():
        raise ValueError(f"a session id may not contain '/' or start or end with spaces: {session_id!r}")
    return session_id


class SessionPath(msgspec.Struct, frozen=True):
    """Where a session's subtree lives: under the supervisor named ``parent`` (``""`` at the root).

    ``SessionPath("s1", "host").member("chat_state") == "host/session/s1/chat_state"``, and
    :meth:`parse` reads any address inside a subtree back into its path and the rest of the name.
    """

    session_id: str
    parent: str = ""

    def __post_init__(self) -> None:
        check_session_id(self.session_id)

    @property
    def child_name(self) -> str:
        """The subtree's name among its parent's children."""
        return f"{_SUBTREE}/{self.session_id}"

    @property
    def subtree(self) -> str:
        """The full name of the session's supervisor."""
        return f"{self.parent}/{self.child_name}" if self.parent else self.child_name

    def member(self, name: str) -> str:
        """The full name of the subtree's child ``name`` (one of :data:`MEMBERS`, or a deeper path)."""
        return f"{self.subtree}/{name}"

    @classmethod
    def parse(cls, address: str) -> tuple[SessionPath, tuple[str, ...]] | None:
        """The path of the subtree ``address`` lies in and the names below its supervisor (empty for the
        supervisor itself); None when the address is not inside a session subtree."""
        parts = address.split("/")
        for index in range(len(parts) - 1):
            if parts[index] == _SUBTREE and parts[index + 1]:
                parent = "/".join(parts[:index])
                try:
                    return cls(parts[index + 1], parent), tuple(parts[index + 2 :])
                except ValueError:
                    return None
        return None

    @classmethod
    def sibling(cls, address: str, name: str) -> str:
        """The full name of the member ``name`` of the subtree that ``address`` (a member) belongs to."""
        return cls._inside(address)[0].member(name)

    @classmethod
    def member_of(cls, address: str) -> str:
        """The member of its subtree that ``address`` is or lies under (``"tools"`` for a tool actor)."""
        below = cls._inside(address)[1]
        if not below:
            raise ValueError(f"{address!r} is a session's supervisor, not one of its members")
        return below[0]

    @classmethod
    def _inside(cls, address: str) -> tuple[SessionPath, tuple[str, ...]]:
        found = cls.parse(address)
        if found is None:
            raise ValueError(f"{address!r} is not inside a session subtree")
        return found
