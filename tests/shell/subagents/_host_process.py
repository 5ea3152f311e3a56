"""A host in a process of its own, for tests that kill it: ``python -m tests.shell.subagents._host_process
CONFIG STORE BASE_URL WORKSPACE PROMPT`` opens session ``p`` and prompts it, then waits (at most two minutes)
to be killed."""

from __future__ import annotations

import sys
import threading

from shell import AgentHost, load_settings
from shell.messages import UserPrompt


def main(config: str, store: str, base_url: str, workspace: str, prompt: str) -> None:
    environ = {
        "TURNKEEP_STORE__PATH": store,
        "TURNKEEP_PROVIDER__BASE_URL": base_url,
        "TURNKEEP_TOOLS__ALLOW": "shell",
    }
    with AgentHost(load_settings(config, environ=environ)) as host:
        host.open(workspace, session_id="p").ask(UserPrompt(prompt))
        threading.Event().wait(120)


if __name__ == "__main__":
    main(*sys.argv[1:])
