"""`turnkeep demo`: several sessions at once under faults; exits 0 with every turn converged, nothing lost."""

from __future__ import annotations

import subprocess
import sys


def test_the_demo_converges_every_turn_and_loses_nothing() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "shell.cli", "demo", "--sessions", "3", "--faults", "heavy", "--seed", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 turns: 6 converged" in result.stdout
    assert "nothing lost" in result.stdout
