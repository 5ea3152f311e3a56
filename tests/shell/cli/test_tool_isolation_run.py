"""``turnkeep run`` says once, on stderr, which sandbox and environment policy its shell commands run with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sampler.fake import FinalAnswer, Script, ToolStep
from tests.shell.cli.test_cli import KEY_VAR, serving, turnkeep


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is for Linux")
def test_turnkeep_run_says_once_which_sandbox_and_environment_policy_are_in_force(tmp_path: Path) -> None:
    script = Script.task([ToolStep([("shell", {"command": "echo from-the-shell"})]), FinalAnswer("ok")])
    config = tmp_path / "tk.toml"
    config.write_text('[tools.sandbox]\nmode = "off"\n[tools.env]\ninherit = "core"\n')
    with serving(script) as provider:
        result = turnkeep(
            "run",
            "--config",
            str(config),
            "--base-url",
            provider.base_url,
            "--api-key-env",
            KEY_VAR,
            "--store",
            str(tmp_path / "s.db"),
            "--workspace",
            str(tmp_path / "ws"),
            "--allow",
            "shell",
            "run it",
        )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[tools: ")]
    assert lines == [
        "[tools: sandbox: off (shell commands run unconfined); environment: core variables only minus "
        "credentials (*KEY*, *SECRET*, *TOKEN*, *PASSWORD*, *CREDENTIAL*)]"
    ]
