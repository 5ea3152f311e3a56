"""Ctrl-C at any moment of ``turnkeep run``, the start included: exit 130 and one line, never a traceback.

Each test holds the process at a point of its start it controls (a store that accepts the connection and
never answers, an import that waits for the test) and sends SIGINT once the process is known to be there.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.shell.cli.conftest import Options
from tests.shell.cli.test_cli import REPO, TIMEOUT, command, environment, serving

# Installed as sitecustomize: the import of the command line's modules waits for a line on stdin.
_IMPORT_GATE = """
import sys


class _Gate:
    def find_spec(self, name, path=None, target=None):
        if name == "shell.cli._main":
            sys.stderr.write("importing the command line\\n")
            sys.stderr.flush()
            sys.stdin.readline()
        return None


sys.meta_path.insert(0, _Gate())
"""


@contextmanager
def a_store_that_never_answers() -> Iterator[tuple[str, socket.socket]]:
    """A ``postgresql://`` URL on loopback whose server accepts connections and never says a word."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(TIMEOUT)
        yield f"postgresql://turnkeep@127.0.0.1:{listener.getsockname()[1]}/turnkeep", listener


def interrupted(process: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGINT now; the exit code and everything the process wrote on stderr."""
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=TIMEOUT)
    return process.returncode, err


def test_ctrl_c_while_the_host_connects_to_its_store_exits_130_without_a_traceback(options: Options) -> None:
    with serving() as provider, a_store_that_never_answers() as (url, listener):
        arguments = [*options(provider), "--store", url]
        process = subprocess.Popen(
            command("run", *arguments, "hello"),
            cwd=REPO,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            connection, _ = listener.accept()
            with connection:
                code, err = interrupted(process)
        finally:
            process.kill()

    assert code == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "turnkeep: interrupted"


@pytest.mark.parametrize("started_with", ["SIGINT handled", "SIGINT ignored"])
def test_ctrl_c_while_the_command_line_is_imported_exits_130_without_a_traceback(
    tmp_path: Path, options: Options, started_with: str
) -> None:
    """Also where the shell started it with SIGINT ignored, as a non-interactive shell starts a job in
    the background: Ctrl-C is the way to stop turnkeep whatever started it."""
    ignored = started_with == "SIGINT ignored"
    (tmp_path / "gate").mkdir()
    (tmp_path / "gate" / "sitecustomize.py").write_text(_IMPORT_GATE)
    with serving() as provider:
        process = subprocess.Popen(
            command("run", *options(provider), "hello"),
            cwd=REPO,
            env=environment(PYTHONPATH=str(tmp_path / "gate")),
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stderr is not None
            for line in process.stderr:
                if line == "importing the command line\n":
                    break
            code, err = interrupted(process)
        finally:
            process.kill()

    assert code == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "turnkeep: interrupted"
