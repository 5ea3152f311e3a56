"""`turnkeep demo` (the runtime's supervision demo) exits 0 with every operation accounted for."""

from __future__ import annotations

import subprocess
import sys


def test_the_demo_accounts_for_every_operation_and_exits_zero() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "shell.cli", "demo", "--operations", "300"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lost or double         0" in result.stdout
    assert "[start]   bank/teller incarnation 2" in result.stdout
