"""The host that ``turnkeep chaos --kill-host-every`` kills: run every session's turns to the last one.

``python -m shell._chaos._host_child STORE BASE_URL WORKSPACES SESSIONS TURNS`` opens (or resumes) the
sessions ``chaos-0`` … on the store and prompts each, one turn at a time, until each has ``TURNS`` ended
turns; a turn it finds running, or a prompt it finds stored as waiting, was acknowledged by a host killed
before: the session finishes it first, and it is not sent again. It
learns where each session is from the store alone, so it can be killed at any moment and started again.
It prints ``up`` on stdout once its host has started (the moment the killer's clock starts from).
Exit status 0 once every session has all its turns ended.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .. import events as ev
from ..config import load_settings
from ..host import AgentHost, HostError
from ..messages import UserPrompt
from ._host_names import prompt_text, session_name

__all__ = ["main"]

_TURN_TIMEOUT = 120.0
UP = "up"
"""The line printed once the host has started."""


def _end_of(events: queue.Queue[Any], number: int) -> Any:
    """The event that ends turn ``number``, heard within :data:`_TURN_TIMEOUT` (else TimeoutError)."""
    deadline = time.monotonic() + _TURN_TIMEOUT
    while True:
        event = events.get(timeout=max(deadline - time.monotonic(), 0.001))
        if isinstance(event, ev.TERMINAL_EVENTS) and event.turn == number:
            return event


def _drive(host: AgentHost, session_id: str, workspaces: Path, turns: int, failures: list[str]) -> None:
    events: queue.Queue[Any] = queue.Queue()
    try:
        try:
            address = host.resume(session_id, subscribers=[events])
        except HostError:  # not stored yet: the first start of the run
            address = host.open(workspaces / session_id, session_id=session_id)
            host.subscribe(session_id, events)
        while True:
            # The waiting prompts first: one that begins between the two reads shows in the record.
            waiting = [stored.turn for stored in host.store.load_queued_prompts(session_id)]
            record = host.store.get_session(session_id)
            if record.status == "in_turn":  # begun by a host killed before: it ends on its own here
                end = _end_of(events, record.current_turn)
            elif waiting:  # acknowledged by a host killed before, and stored: it runs here, not sent again
                end = _end_of(events, min(waiting))
            elif record.current_turn >= turns:
                return
            else:
                number = address.ask(UserPrompt(prompt_text(session_id, record.current_turn + 1)))
                end = _end_of(events, number)
            # Ended interrupted is an end too: the turn was resumed host.max_resumes_per_turn times.
            if not isinstance(end, ev.TurnCompleted) and getattr(end, "reason", "") != "interrupted":
                failures.append(f"{session_id}: turn {end.turn} ended {end}")
    except Exception as exc:  # reported, and the exit status says so
        failures.append(f"{session_id}: {exc!r}")


def main(argv: list[str]) -> int:
    """Run the sessions' turns (see the module's description); the exit status."""
    store, base_url, workspaces, sessions, turns = argv
    environ = {
        "TURNKEEP_STORE__PATH": store,
        "TURNKEEP_PROVIDER__BASE_URL": base_url,
        "TURNKEEP_PROVIDER__API_KEY_ENV": "CHAOS_PROVIDER_KEY",
        "CHAOS_PROVIDER_KEY": "sk-chaos-0000",
        "TURNKEEP_TOOLS__ALLOW": "shell,write_file",
        "TURNKEEP_HOST__MAX_RESUMES_PER_TURN": "1000",
    }
    failures: list[str] = []
    with AgentHost(load_settings(environ=environ)) as host:
        print(UP, flush=True)
        drivers = [
            threading.Thread(
                target=_drive,
                args=(host, session_name(i), Path(workspaces), int(turns), failures),
                daemon=True,
            )
            for i in range(int(sessions))
        ]
        for driver in drivers:
            driver.start()
        for driver in drivers:
            driver.join()
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
