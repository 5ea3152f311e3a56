"""The README and the pages under docs/ hold what they show: every ```python block runs as written, and
the README stays short enough to read first."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)


def _blocks(language: str) -> list[tuple[str, str]]:
    """(id, source) for every fenced block of ``language``, numbered within its page."""
    found = []
    for page in PAGES:
        sources = [body for lang, body in _FENCE.findall(page.read_text()) if lang == language]
        name = page.relative_to(ROOT).as_posix()
        found += [(f"{name}:{language}-{index}", source) for index, source in enumerate(sources)]
    return found


PYTHON = _blocks("python")


def test_the_pages_have_examples() -> None:
    assert PYTHON


def test_the_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; reference belongs under docs/"


@pytest.mark.parametrize("source", [source for _, source in PYTHON], ids=[name for name, _ in PYTHON])
def test_a_python_example_runs(source: str, tmp_path: pathlib.Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(source)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
