"""Where a store is: a target (a path, ``sqlite://PATH`` or a PostgreSQL URL) resolved to a backend."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from ._records import Backend

__all__ = ["resolve"]

_URL_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
_SCHEMES: dict[str, Backend] = {"sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}


def resolve(target: str | os.PathLike[str]) -> Path | str:
    """The SQLite file ``target`` names, or the URL of the PostgreSQL database it names."""
    if isinstance(target, os.PathLike):
        return _sqlite_path(os.fspath(target))
    if not isinstance(target, str):
        raise TypeError(f"a store target is a path or a URL string, got {type(target).__name__}")
    match = _URL_SCHEME.match(target)
    if match is None:
        return _sqlite_path(target)
    scheme = match["scheme"].lower()
    backend = _SCHEMES.get(scheme)
    if backend is None:
        raise ValueError(
            f"unsupported store URL scheme {scheme!r}: use a path, sqlite://PATH or postgresql://..."
        )
    if backend == "postgresql":
        return target
    rest = target[match.end() :]
    if "?" in rest or "#" in rest:
        raise ValueError("a sqlite:// store URL takes a path only, no query or fragment")
    if not rest:
        raise ValueError("a sqlite:// store URL needs a path, as in sqlite:///var/lib/turnkeep/sessions.db")
    return _sqlite_path(unquote(rest))


def _sqlite_path(text: str) -> Path:
    path = Path(text).expanduser()
    first = path.parts[0] if path.parts else ""
    # Path("postgresql://h/db") is "postgresql:/h/db": the URL has lost a "/" and cannot be recovered.
    if first.endswith(":") and first[:-1].lower() in _SCHEMES:
        raise ValueError(
            f"{text!r} looks like a store URL that went through Path(), which drops a '/' from it;"
            " pass the URL as a string"
        )
    return path
