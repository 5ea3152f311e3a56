"""The README and the pages under docs/ hold what they show.

Every ```python block runs as written, every ```toml block loads as turnkeep's settings, every `turnkeep`
command shown (in a ```sh block or in inline code) exists with the options shown, every relative link
leads to a file (and a heading) that exists, every page is reachable from the README, and the README stays
short enough to read first.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
from functools import cache

import pytest

from turnkeep import load_settings

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 250

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", flags=re.MULTILINE)


def _name(page: pathlib.Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _blocks(language: str) -> list[tuple[str, str]]:
    """(id, source) for every fenced block of ``language``, numbered within its page."""
    found = []
    for page in PAGES:
        sources = [body for lang, body in _FENCE.findall(page.read_text()) if lang == language]
        found += [(f"{_name(page)}:{language}-{index}", source) for index, source in enumerate(sources)]
    return found


def _prose(page: pathlib.Path) -> str:
    """The page without its fenced blocks and inline code, where a bracket is not a link."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", page.read_text()))


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _relative_links(page: pathlib.Path) -> list[str]:
    return [target for target in _LINK.findall(_prose(page)) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def _commands() -> dict[str, set[str]]:
    """Each ``turnkeep COMMAND`` the pages show, with the options and subcommands written after it."""
    shown: dict[str, set[str]] = {}
    for page in PAGES:
        text = page.read_text()
        lines = [
            line.split(" #")[0]
            for lang, body in _FENCE.findall(text)
            if lang == "sh"
            for line in body.splitlines()
        ]
        spans = [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", _FENCE.sub("", text))]
        for code in lines + spans:
            for command, rest in re.findall(r"\bturnkeep ([a-z][a-z-]*)\b([^&;]*)", code):
                # A subcommand of ``sessions`` has options of its own: they are checked against its help.
                if command == "sessions" and rest.split() and not rest.split()[0].startswith("-"):
                    command = f"sessions {rest.split()[0]}"
                words = shown.setdefault(command, set())
                words.update(re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest))
    return shown


@cache
def _help(*command: str) -> str:
    turnkeep = pathlib.Path(sys.executable).with_name("turnkeep")
    program = str(turnkeep) if turnkeep.exists() else shutil.which("turnkeep")
    assert program, "the turnkeep command is not installed"
    result = subprocess.run([program, *command, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


PYTHON = _blocks("python")
TOML = _blocks("toml")
COMMANDS = _commands()
LINKS = [(f"{_name(page)}->{target}", page, target) for page in PAGES for target in _relative_links(page)]


def test_the_pages_have_examples_and_links() -> None:
    assert len(PAGES) > 2
    assert PYTHON
    assert TOML
    assert COMMANDS
    assert LINKS


def test_the_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; reference belongs under docs/"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("source", [source for _, source in PYTHON], ids=[name for name, _ in PYTHON])
def test_a_python_example_runs(source: str, tmp_path: pathlib.Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(source)
    # The cluster's example starts Ray, which can take a minute or more on a busy machine.
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("source", [source for _, source in TOML], ids=[name for name, _ in TOML])
def test_a_toml_example_loads_as_settings(source: str, tmp_path: pathlib.Path) -> None:
    config = tmp_path / "turnkeep.toml"
    config.write_text(source)
    load_settings(config, environ={})


@pytest.mark.parametrize(("command", "words"), sorted(COMMANDS.items()), ids=sorted(COMMANDS))
def test_a_command_shown_exists_with_its_options(command: str, words: set[str]) -> None:
    name, *sub = command.split()
    assert re.search(rf"^ +{re.escape(name)}\b", _help(), flags=re.MULTILINE), f"turnkeep has no {name}"
    for word in sub:
        assert re.search(rf"(?<![\w-]){re.escape(word)}\b", _help(name)), f"turnkeep {name} has no {word}"
    usage = _help(*command.split())
    for word in sorted(words):
        assert re.search(rf"(?<![\w-]){re.escape(word)}\b", usage), f"turnkeep {command} has no {word}"


@pytest.mark.parametrize(
    ("page", "target"), [(p, t) for _, p, t in LINKS], ids=[name for name, _, _ in LINKS]
)
def test_a_relative_link_resolves(page: pathlib.Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    assert destination.exists(), f"{_name(page)} links to {target}, which does not exist"
    if anchor:
        assert destination.suffix == ".md", f"{_name(page)} links to an anchor in {target}, not a page"
        assert anchor in _anchors(destination), f"{_name(page)} links to {target}: no such heading"


@pytest.mark.parametrize("page", PAGES[1:], ids=[_name(page) for page in PAGES[1:]])
def test_every_page_is_linked_from_the_readme(page: pathlib.Path) -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _relative_links(README)}
    assert page.resolve() in linked, f"the README does not link to {_name(page)}"


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES[1:] if page.name != "architecture.md"],
    ids=[_name(page) for page in PAGES[1:] if page.name != "architecture.md"],
)
def test_a_page_says_what_it_covers_and_leads_back(page: pathlib.Path) -> None:
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# "), f"{_name(page)} does not start with its title"
    statement = next(line for line in lines[1:] if line.strip())
    assert "../README.md" in statement, f"{_name(page)}'s first line does not lead back to the README"
