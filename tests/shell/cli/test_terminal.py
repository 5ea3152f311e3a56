"""``turnkeep chat --fake`` in a real terminal: tmux runs it in a detached session of a fixed size, the test
types into it with ``send-keys`` and reads the screen with ``capture-pane`` until what it awaits shows.

Each test runs its own tmux server on a socket of its own (``tmux -L``) and kills only that server. Without
tmux the tests skip, unless ``REQUIRE_TERMINAL_TESTS=1`` says they must run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.shell.cli.test_cli import REPO, environment

DEADLINE = 60.0
"""Seconds a test waits for what it expects on the screen."""
_POLL = 0.1
_EXITED = "[the command exited with "

TMUX = shutil.which("tmux")
if TMUX is None and os.environ.get("REQUIRE_TERMINAL_TESTS") == "1":
    pytest.fail("tmux is not installed, and REQUIRE_TERMINAL_TESTS=1 says the terminal tests must run")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (the terminal tests need it)")


class Terminal:
    """One tmux server of our own, with one session running a command in a 120 x 40 window."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"turnkeep-test-{uuid.uuid4().hex[:12]}"
        self.session = "chat"
        # The command's exit status is written on the screen and the pane kept open after it (by `cat`),
        # so the test reads it there; the shell outlives a Ctrl-C meant for the command (`trap :`).
        wrapper = f'trap : INT; {shlex.join(command)}; echo "{_EXITED}$?]"; exec cat'
        size = ("-x", "120", "-y", "40")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", self.session, *size, "-c", str(REPO), wrapper)
        self.socket_path = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        result = subprocess.run(
            [TMUX, "-L", self.socket, *args], env=environment(), capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def type(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def screen(self) -> str:
        """The pane's text, its scrollback included, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-500", "-t", self.session)

    def wait_for(self, found: Callable[[str], bool], what: str) -> str:
        """The screen once ``found`` holds of it; fails with the screen after :data:`DEADLINE` seconds."""
        deadline = time.monotonic() + DEADLINE
        while True:
            text = self.screen()
            if found(text):
                return text
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} on the screen within {DEADLINE} s:\n{text}")
            time.sleep(_POLL)

    def exit_status(self) -> int:
        """The command's exit status, once it has ended (awaited up to :data:`DEADLINE` seconds)."""
        screen = self.wait_for(lambda text: _EXITED in text, "end of the command")
        found = re.search(rf"{re.escape(_EXITED)}(\d+)\]", screen)
        assert found is not None, screen
        return int(found.group(1))

    def close(self) -> None:
        """Kill this test's tmux server (no other) and remove its socket."""
        subprocess.run([TMUX or "tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        self.socket_path.unlink(missing_ok=True)


@pytest.fixture
def chat_in_terminal(tmp_path: Path) -> Iterator[Callable[[str], Terminal]]:
    opened: list[Terminal] = []

    def start(scenario: str) -> Terminal:
        command = [sys.executable, "-m", "shell.cli", "chat", "--fake", scenario]
        terminal = Terminal(
            [*command, "--workspace", str(tmp_path / "ws"), "--store", str(tmp_path / "s.db")]
        )
        opened.append(terminal)
        terminal.wait_for(lambda text: text.rstrip().endswith(">"), "prompt")
        return terminal

    yield start
    for terminal in opened:
        terminal.close()


def test_chat_fake_coding_shows_tool_calls_folded_results_and_the_usage_live(chat_in_terminal) -> None:
    terminal = chat_in_terminal("coding")
    terminal.type("write some notes", "Enter")
    screen = terminal.wait_for(lambda text: "[usage: " in text, "usage line")
    assert '[tool shell {"command":"wc -l notes.md && cat notes.md"}]' in screen
    assert "[tool shell ok]\n  7 notes.md\n  # Notes\n  (6 more lines)\n" in screen
    assert '[tool write_file {"path":"notes.md","content":"# Notes\\n\\n- list the workspace' in screen
    assert "[retrying after rate_limit (HTTP 429): attempt 2 of 10 in 1.0 s]" in screen
    assert "[turn 1 completed in 5 steps]" in screen
    assert "The workspace now holds notes.md." in screen
    terminal.wait_for(lambda text: text.rstrip().endswith(">"), "prompt after the turn")
    terminal.type("C-d")
    assert terminal.exit_status() == 0


def test_chat_fake_flaky_shows_each_retry_with_its_kind_and_wait(chat_in_terminal) -> None:
    terminal = chat_in_terminal("flaky")
    terminal.type("hello", "Enter")
    screen = terminal.wait_for(lambda text: "[usage: " in text, "usage line")
    assert "[retrying after rate_limit (HTTP 429): attempt 2 of 10 in 1.0 s]" in screen
    assert "[retrying after HTTP 500: attempt 2 of 10 in " in screen
    assert "the text above is void]" in screen
    assert "[turn 1 completed in 2 steps]" in screen


def test_ctrl_c_cancels_the_turn_in_flight_and_ctrl_c_at_the_prompt_leaves_with_130(chat_in_terminal) -> None:
    terminal = chat_in_terminal("flaky")
    terminal.type("hello", "Enter")
    terminal.wait_for(lambda text: "[retrying after rate_limit" in text, "retry line")  # waits 1 s
    terminal.type("C-c")
    screen = terminal.wait_for(lambda text: "[usage: " in text, "end of the cancelled turn")
    assert "[the turn was cancelled (user_cancelled)]" in screen
    terminal.wait_for(lambda text: text.rstrip().endswith(">"), "prompt after the cancelled turn")
    terminal.type("C-c")
    assert terminal.exit_status() == 130
