"""read_file, write_file, edit_file and list_dir: confined to the workspace, failing as is_error results."""

from __future__ import annotations

import json
import os

import pytest

from shell.store import SessionStore
from tool_bridge.builtins import builtin_registry
from tool_bridge.results import ToolResultError, ToolStatus
from tool_bridge.tools import ToolContext, ToolLimits, run_tool


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path):
    elsewhere = tmp_path / "outside"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("secret\n")
    return elsewhere


async def call(workspace, name, arguments, *, limits=None):
    decoded = builtin_registry().decode_call(name, arguments)
    assert not isinstance(decoded, ToolResultError), decoded
    tool, args = decoded
    return await run_tool(
        tool, args, ToolContext(workspace=workspace, call_id="c1", limits=limits or ToolLimits())
    )


def snapshot(directory):
    return {
        os.path.relpath(os.path.join(parent, name), directory): open(os.path.join(parent, name), "rb").read()
        if name in files
        else None
        for parent, dirs, files in os.walk(directory)
        for name in dirs + files
    }


# read_file


@pytest.mark.trio
async def test_read_file_returns_the_whole_file(workspace):
    (workspace / "a.txt").write_text("one\ntwo\n")
    outcome = await call(workspace, "read_file", {"path": "a.txt"})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "one\ntwo\n")


@pytest.mark.trio
async def test_read_file_returns_an_inclusive_one_based_line_range(workspace):
    (workspace / "a.txt").write_text("1\n2\n3\n4\n5\n")
    outcome = await call(workspace, "read_file", {"path": "a.txt", "start_line": 2, "end_line": 4})
    assert outcome.content == "2\n3\n4\n"


@pytest.mark.trio
async def test_read_file_range_may_run_past_the_end(workspace):
    (workspace / "a.txt").write_text("1\n2\n3")
    outcome = await call(workspace, "read_file", {"path": "a.txt", "start_line": 3, "end_line": 10})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "3")


@pytest.mark.trio
async def test_read_file_starting_past_the_end_is_an_error_giving_the_line_count(workspace):
    (workspace / "a.txt").write_text("1\n2\n")
    outcome = await call(workspace, "read_file", {"path": "a.txt", "start_line": 5})
    assert outcome.is_error
    assert outcome.content == "start_line 5 is past the end of `a.txt` (2 lines)"


@pytest.mark.trio
async def test_read_file_with_end_before_start_is_an_error(workspace):
    (workspace / "a.txt").write_text("1\n2\n")
    outcome = await call(workspace, "read_file", {"path": "a.txt", "start_line": 2, "end_line": 1})
    assert (outcome.is_error, outcome.content) == (True, "end_line 1 is before start_line 2")


def test_read_file_rejects_a_line_number_below_one(workspace):
    decoded = builtin_registry().decode_call("read_file", {"path": "a.txt", "start_line": 0})
    assert isinstance(decoded, ToolResultError)
    assert decoded.message == "invalid arguments for `read_file`: Expected `int` >= 1 - at `$.start_line`"


@pytest.mark.trio
async def test_read_file_output_is_capped_with_a_note_on_how_to_read_on(workspace):
    (workspace / "a.txt").write_text("abcdef\nghijkl\n")
    outcome = await call(workspace, "read_file", {"path": "a.txt"}, limits=ToolLimits(output_cap=10))
    assert (
        outcome.content
        == "abcdef\nghi\n[output capped at 10 characters; line 2 was cut, read on with start_line]"
    )


@pytest.mark.trio
async def test_read_file_of_an_empty_file_says_so(workspace):
    (workspace / "empty").write_text("")
    outcome = await call(workspace, "read_file", {"path": "empty"})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "(empty file)")


@pytest.mark.trio
@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda ws: None, "no such file: `x`"),
        (lambda ws: (ws / "x").mkdir(), "`x` is a directory; use list_dir"),
        (lambda ws: (ws / "x").write_bytes(b"\x7fELF\0\0\1"), "`x` looks like a binary file (7 bytes)"),
    ],
)
async def test_read_file_of_a_missing_file_a_directory_or_a_binary_is_an_error(workspace, setup, message):
    setup(workspace)
    outcome = await call(workspace, "read_file", {"path": "x"})
    assert (outcome.status, outcome.content) == (ToolStatus.ERROR, message)


@pytest.mark.trio
async def test_paths_that_stay_inside_the_workspace_are_accepted(workspace):
    (workspace / "sub").mkdir()
    (workspace / "a.txt").write_text("a")
    for path in ("sub/../a.txt", str(workspace / "a.txt"), "./a.txt"):
        outcome = await call(workspace, "read_file", {"path": path})
        assert (outcome.status, outcome.content) == (ToolStatus.OK, "a"), path


# write_file


@pytest.mark.trio
async def test_write_file_creates_the_file_and_its_parent_directories(workspace):
    outcome = await call(workspace, "write_file", {"path": "new/deep/a.txt", "content": "héllo\n"})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "created `new/deep/a.txt` (7 bytes)")
    assert (workspace / "new/deep/a.txt").read_text() == "héllo\n"


@pytest.mark.trio
async def test_write_file_overwrites_an_existing_file_and_says_so(workspace):
    (workspace / "a.txt").write_text("old content")
    outcome = await call(workspace, "write_file", {"path": "a.txt", "content": "new"})
    assert outcome.content == "overwrote `a.txt` (3 bytes)"
    assert (workspace / "a.txt").read_text() == "new"


@pytest.mark.trio
async def test_write_file_onto_a_directory_is_an_error(workspace):
    (workspace / "d").mkdir()
    outcome = await call(workspace, "write_file", {"path": "d", "content": "x"})
    assert (outcome.is_error, outcome.content) == (True, "`d` is a directory")


# edit_file


@pytest.mark.trio
async def test_edit_file_replaces_the_one_exact_occurrence(workspace):
    (workspace / "a.py").write_text("x = 1\ny = 2\n")
    outcome = await call(workspace, "edit_file", {"path": "a.py", "old": "y = 2", "new": "y = 3"})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "edited `a.py`: replaced 1 occurrence")
    assert (workspace / "a.py").read_text() == "x = 1\ny = 3\n"


@pytest.mark.trio
async def test_edit_file_with_absent_text_is_an_error_and_changes_nothing(workspace):
    (workspace / "a.py").write_text("x = 1\n")
    outcome = await call(workspace, "edit_file", {"path": "a.py", "old": "z = 9", "new": "z = 0"})
    assert (outcome.is_error, outcome.content) == (True, "`old` was not found in `a.py`; nothing was changed")
    assert (workspace / "a.py").read_text() == "x = 1\n"


@pytest.mark.trio
async def test_edit_file_with_text_occurring_more_than_once_is_an_error_counting_them(workspace):
    (workspace / "a.py").write_text("x = 1\nx = 1\n")
    outcome = await call(workspace, "edit_file", {"path": "a.py", "old": "x = 1", "new": "x = 2"})
    assert outcome.is_error
    assert outcome.content.startswith("`old` occurs 2 times in `a.py`; it must occur exactly once")
    assert (workspace / "a.py").read_text() == "x = 1\nx = 1\n"


@pytest.mark.trio
async def test_edit_file_counts_overlapping_occurrences(workspace):
    (workspace / "a.txt").write_text("aaa")
    outcome = await call(workspace, "edit_file", {"path": "a.txt", "old": "aa", "new": "b"})
    assert outcome.content.startswith("`old` occurs 2 times")


@pytest.mark.trio
async def test_edit_file_of_a_missing_file_is_an_error(workspace):
    outcome = await call(workspace, "edit_file", {"path": "nope.py", "old": "a", "new": "b"})
    assert (outcome.is_error, outcome.content) == (True, "no such file: `nope.py`")


# list_dir


@pytest.mark.trio
async def test_list_dir_lists_sorted_entries_marking_directories_and_symlinks(workspace):
    (workspace / "b.txt").write_text("")
    (workspace / "a_dir").mkdir()
    (workspace / "c_link").symlink_to("b.txt")
    outcome = await call(workspace, "list_dir", {})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "a_dir/\nb.txt\nc_link -> b.txt")


@pytest.mark.trio
async def test_list_dir_caps_its_listing_and_counts_what_is_left(workspace):
    for name in ("aaaa", "bbbb", "cccc"):
        (workspace / name).write_text("")
    outcome = await call(workspace, "list_dir", {"path": "."}, limits=ToolLimits(output_cap=10))
    assert outcome.content == "aaaa\nbbbb\n[1 more entries not shown]"


@pytest.mark.trio
async def test_list_dir_of_a_file_or_nothing_is_an_error(workspace):
    (workspace / "f").write_text("")
    assert (await call(workspace, "list_dir", {"path": "f"})).content == "`f` is not a directory"
    assert (await call(workspace, "list_dir", {"path": "g"})).content == "no such directory: `g`"


# Confinement: every file tool refuses paths leading out, and touches nothing outside.


def escape_path(kind, workspace, outside, *, directory):
    if kind == "dotdot":
        return "../outside" if directory else "../outside/secret.txt"
    if kind == "absolute":
        return str(outside) if directory else str(outside / "secret.txt")
    if kind == "symlinked_dir":
        (workspace / "link").symlink_to(outside, target_is_directory=True)
        return "link" if directory else "link/secret.txt"
    if kind == "symlinked_file":
        (workspace / "link").symlink_to(outside if directory else outside / "secret.txt")
        return "link"
    raise AssertionError(kind)


TOOL_ARGUMENTS = {
    "read_file": lambda path: {"path": path},
    "write_file": lambda path: {"path": path, "content": "pwned"},
    "edit_file": lambda path: {"path": path, "old": "secret", "new": "pwned"},
    "list_dir": lambda path: {"path": path},
}


@pytest.mark.trio
@pytest.mark.parametrize("name", sorted(TOOL_ARGUMENTS))
@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlinked_dir", "symlinked_file"])
async def test_every_file_tool_refuses_paths_that_lead_outside(workspace, outside, name, kind):
    path = escape_path(kind, workspace, outside, directory=name == "list_dir")
    before = snapshot(outside)
    outcome = await call(workspace, name, TOOL_ARGUMENTS[name](path))
    assert (outcome.status, outcome.is_error) == (ToolStatus.ERROR, True)
    assert outcome.content == f"path `{path}` is outside the workspace"
    assert snapshot(outside) == before


@pytest.mark.trio
async def test_write_file_through_a_dangling_symlink_leading_outside_is_refused(workspace, outside):
    (workspace / "dangling").symlink_to(outside / "new.txt")
    outcome = await call(workspace, "write_file", {"path": "dangling", "content": "x"})
    assert outcome.content == "path `dangling` is outside the workspace"
    assert not (outside / "new.txt").exists()


@pytest.mark.trio
async def test_write_file_refuses_a_parent_to_create_under_a_symlink_leading_outside(workspace, outside):
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    outcome = await call(workspace, "write_file", {"path": "link/sub/new.txt", "content": "x"})
    assert outcome.content == "path `link/sub/new.txt` is outside the workspace"
    assert not (outside / "sub").exists()


@pytest.mark.trio
async def test_write_file_refuses_a_path_climbing_out_through_a_directory_yet_to_exist(workspace, outside):
    outcome = await call(workspace, "write_file", {"path": "newdir/../../outside/new.txt", "content": "x"})
    assert outcome.is_error
    assert not (outside / "new.txt").exists()
    assert not (workspace / "newdir").exists()


@pytest.mark.trio
async def test_a_symlink_that_stays_inside_the_workspace_is_followed(workspace):
    (workspace / "real.txt").write_text("inside")
    (workspace / "alias").symlink_to(workspace / "real.txt")
    outcome = await call(workspace, "read_file", {"path": "alias"})
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "inside")


@pytest.mark.trio
async def test_no_file_tool_reaches_the_store_lying_beside_the_workspace(workspace, tmp_path):
    store = tmp_path / "sessions.db"
    with SessionStore.open(store) as opened:
        opened.create_session("s1", workspace=str(workspace), model="m")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    (workspace / "via-link").symlink_to(store)
    (workspace / "dir-link").symlink_to(tmp_path)
    attempts = []
    for path in ("../sessions.db", str(store), "via-link", "dir-link/sessions.db", "ws/../../sessions.db"):
        attempts += [
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "overwritten"}),
            ("edit_file", {"path": path, "old": "SQLite", "new": "Broken"}),
        ]
    attempts += [("list_dir", {"path": path}) for path in ("..", str(tmp_path), "dir-link")]
    for name, arguments in attempts:
        outcome = await call(workspace, name, json.dumps(arguments))
        assert outcome.status is ToolStatus.ERROR, (name, arguments, outcome.content)
        assert "outside the workspace" in outcome.content, (name, arguments, outcome.content)
        assert "sessions.db" not in outcome.content.replace(arguments["path"], ""), outcome.content
    after = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    assert after == before
