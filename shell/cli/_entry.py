"""The program's entry point: the command line run so that a Ctrl-C at any moment ends it in one line.

This module imports nothing heavy, so that :func:`main` is entered at once; the command line's modules
are imported inside it, where a Ctrl-C during their import is answered like any other.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence

from ._exit_codes import EXIT_CANCELLED

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: the process's arguments); return the exit code.

    A Ctrl-C that stops it anywhere (the imports and the host's start included) returns 130 after one
    line on stderr, never a traceback, also where the shell started it with SIGINT ignored (a job a
    non-interactive shell runs in the background). Run as the program (``argv`` None, on the main
    thread), a Ctrl-C once it has returned is ignored: the exit code is decided and the interpreter only
    tears down.
    """
    if argv is None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        try:
            from ._main import run_command

            return run_command(argv)
        finally:
            if argv is None:
                _ignore_interrupts()
    except KeyboardInterrupt:
        if argv is None:
            _ignore_interrupts()
        sys.stderr.write("\nturnkeep: interrupted\n")
        return EXIT_CANCELLED


def _ignore_interrupts() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
