"""The mailbox API of a session: what a host or an application sends to a session's Address.

A session also takes :class:`tool_bridge.PermissionDecision`, the answer to a permission request, and
:class:`tool_bridge.SetPermissionMode`, defined with the permissions.
"""

from __future__ import annotations

from typing import Any

import msgspec

from sampler import ImagePart

__all__ = ["Cancel", "SetModel", "Subscribe", "Unsubscribe", "UserPrompt"]


class UserPrompt(msgspec.Struct, frozen=True, tag=True):
    """Start a turn with ``text`` (queued behind the turn in flight, if any). Asked, it answers with the
    turn's number."""

    text: str
    images: tuple[ImagePart, ...] = ()


class Cancel(msgspec.Struct, frozen=True, tag=True):
    """End the turn in flight: ``user_cancelled`` (default) or ``aborted`` (by the program). The session
    stays usable. Asked, it answers whether a turn was running."""

    reason: str = "user_cancelled"


class Subscribe(msgspec.Struct, frozen=True, tag=True):
    """Receive every event of the session from now on. ``subscriber`` is an Address (told each event), a
    callable (called with it, on the session's thread: keep it quick) or a ``queue.Queue`` (put into)."""

    subscriber: Any


class Unsubscribe(msgspec.Struct, frozen=True, tag=True):
    """Stop the events of :class:`Subscribe`."""

    subscriber: Any


class SetModel(msgspec.Struct, frozen=True, tag=True):
    """Ask the provider for ``model`` from the session's next turn on (a turn in flight keeps its model),
    priced as the config's ``[pricing]`` prices it. It lasts while the session runs in this process; a
    session started again uses the configured model. Asked, it answers with the model the next turn
    uses; an empty name is refused (``ValueError``)."""

    model: str
