"""SIGINT and SIGTERM answered by a handler of the command's own, for as long as a block runs."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["on_stop_signals"]


@contextmanager
def on_stop_signals(handler: Callable[[], None]) -> Iterator[None]:
    """Within: SIGINT and SIGTERM call ``handler`` (on the main thread), even where a shell had SIGINT
    ignored; the handlers before are put back at the end. Does nothing off the main thread, where signal
    handlers cannot be set."""

    def answer(signum: int, frame: FrameType | None) -> None:
        handler()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, answer) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
