"""What each exit code of the command line means."""

from __future__ import annotations

__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK = 0
"""A completed turn, or a command that did what it was asked."""
EXIT_FAILED = 1
"""A failed turn, or a host or store that failed."""
EXIT_USAGE = 2
"""A usage or configuration error, said in one line on stderr."""
EXIT_CANCELLED = 130
"""Ctrl-C: a turn cancelled, or the command interrupted while it started or ended."""
