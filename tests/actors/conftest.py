from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from actors import ActorSystem


def system_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(("actor:", "turnkeep-"))}


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    """A system whose shutdown must be clean and leave no thread behind."""
    before = system_threads()
    sys = ActorSystem(ask_timeout=5.0, restart_wait=1.0)
    try:
        yield sys
    finally:
        report = sys.shutdown(timeout=10.0)
    assert report.leftover_threads == ()
    assert system_threads() - before == set()
