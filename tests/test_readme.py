"""The README's Python examples run as written."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_a_readme_example_runs(source: str, tmp_path: pathlib.Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(source)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
