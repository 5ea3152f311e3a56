"""A burst of appends, for the durability specification to kill mid-way.

``python _burst.py TARGET THREADS``: opens the store at TARGET (a SQLite file or a PostgreSQL URL) with
group commit, creates sessions ``b0`` … ``b{THREADS-1}`` (one per thread), prints ``ready``, then each
thread appends messages of unique content to its session for as long as the process lives (at most
``_MOST`` each), printing ``ack SESSION SEQ CONTENT`` once its append has returned, and flushing.
"""

from __future__ import annotations

import sys
import threading

from sampler.messages import UserMessage
from shell.store import open_store

_MOST = 100_000


def main(target: str, threads: int) -> None:
    store = open_store(target)
    for n in range(threads):
        store.create_session(f"b{n}", workspace="/w", model="m")
    out = threading.Lock()
    print("ready", flush=True)

    def burst(session_id: str) -> None:
        for n in range(_MOST):
            content = f"{session_id}-{n}"
            seq = store.append_message(session_id, 1, UserMessage.of_text(content))
            with out:
                sys.stdout.write(f"ack {session_id} {seq} {content}\n")
                sys.stdout.flush()

    workers = [threading.Thread(target=burst, args=(f"b{n}",)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
