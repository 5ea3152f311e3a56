"""An open session in a host: where it works, and its parts, made when first needed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tool_bridge.mcp import McpServerHandle

from ._state import SessionRuntime
from ._tree import SessionParts

__all__ = ["Built", "OpenSession"]


@dataclass(frozen=True)
class Built:
    """What a session runs with: its runtime, the parts its subtree is made of, its own MCP servers."""

    runtime: SessionRuntime
    parts: SessionParts
    mcp: tuple[McpServerHandle, ...]


@dataclass(eq=False)
class OpenSession:
    """An open session; its parts are made when first needed (its first message, mostly), so that opening
    one costs its store row and its address."""

    record_id: str
    workspace: Path
    build: Callable[[], Built]
    active: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    _built: Built | None = None
    _building: threading.Lock = field(default_factory=threading.Lock)

    @property
    def built(self) -> bool:
        """Whether its parts exist (it has been started, described or closed since it was opened)."""
        return self._built is not None

    def _parts(self) -> Built:
        built = self._built
        if built is None:
            with self._building:
                if self._built is None:
                    self._built = self.build()
                built = self._built
        return built

    @property
    def runtime(self) -> SessionRuntime:
        return self._parts().runtime

    @property
    def parts(self) -> SessionParts:
        return self._parts().parts

    @property
    def mcp(self) -> tuple[McpServerHandle, ...]:
        """Its own MCP servers: none until it is built."""
        built = self._built
        return () if built is None else built.mcp
