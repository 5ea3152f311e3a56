"""The error every wrong configuration is refused with."""

from __future__ import annotations

from .._secrets import redact

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """The configuration is invalid; the message says which key (``key``, dotted) and why.

    ``key`` is None when the problem is not one setting's (a missing or malformed file).
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(redact(message))
        self.key = key
