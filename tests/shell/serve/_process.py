"""``turnkeep serve`` as a real process: started, read for its address, killed or stopped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from sampler.fake import FakeProvider

_LISTENING = re.compile(r"listening on (http://\S+)")


class ServeProcess:
    """A ``turnkeep serve`` subprocess on a free port; :attr:`lines` collects its stdout."""

    def __init__(
        self, provider: FakeProvider, tmp_path: Path, *args: str, token: str | None = None, ready: bool = True
    ) -> None:
        root = tmp_path / "root"
        root.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
        if token is not None:
            env["TURNKEEP_SERVE_TOKEN"] = token
        command = [
            sys.executable, "-m", "shell.cli", "serve", "--port", "0",
            "--store", str(tmp_path / "store.db"), "--base-url", provider.base_url, "--model", "fake-model",
            "--workspace-root", str(root), "--allow", "shell", *args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[str] = []
        self.url: str | None = None
        self._found = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if ready and not self._found.wait(30):
            self.kill()
            raise AssertionError(f"turnkeep serve did not start: {self.lines} {self.stderr()}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            found = _LISTENING.search(line)
            if found and self.url is None:
                self.url = found[1]
            if line.startswith("console: "):  # the last line of the announcement
                self._found.set()
        self._found.set()

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()

    def kill(self) -> None:
        """``kill -9``: no cleanup of any kind."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM, then the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)
