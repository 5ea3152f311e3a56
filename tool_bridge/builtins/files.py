"""File tools: read, write, edit and list, each confined to the workspace root.

They are ``THREAD`` tools: blocking file I/O in a worker thread.  Every path is resolved with all
symlinks followed and refused with an ``is_error`` result when it lands outside the workspace, before
anything is read or written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import msgspec

from tool_bridge.builtins._workspace import display_path, resolve_in_workspace
from tool_bridge.idempotency import Idempotency
from tool_bridge.tools import Tool, ToolContext, ToolError, ToolKind

__all__ = [
    "EDIT_FILE",
    "LIST_DIR",
    "READ_FILE",
    "WRITE_FILE",
    "EditFileArgs",
    "ListDirArgs",
    "ReadFileArgs",
    "WriteFileArgs",
]

_FILE_TOOL_TIMEOUT = 30.0
_BINARY_SNIFF_BYTES = 8192

_PathField = Annotated[str, msgspec.Meta(description="Path relative to the workspace root.")]
_Line = Annotated[int, msgspec.Meta(ge=1)]


class ReadFileArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Arguments of `read_file`."""

    path: _PathField
    start_line: Annotated[_Line | None, msgspec.Meta(description="First line to read (1-based).")] = None
    end_line: Annotated[_Line | None, msgspec.Meta(description="Last line to read, inclusive.")] = None


class WriteFileArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Arguments of `write_file`."""

    path: _PathField
    content: Annotated[str, msgspec.Meta(description="The whole new content of the file.")]


class EditFileArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Arguments of `edit_file`."""

    path: _PathField
    old: Annotated[str, msgspec.Meta(min_length=1, description="Exact text to replace; must occur once.")]
    new: Annotated[str, msgspec.Meta(description="Text to put in its place.")]


class ListDirArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Arguments of `list_dir`."""

    path: Annotated[str, msgspec.Meta(description="Directory relative to the workspace root.")] = "."


def _read_file(args: ReadFileArgs, context: ToolContext) -> str:
    real = resolve_in_workspace(context.workspace, args.path)
    start = args.start_line or 1
    if args.end_line is not None and args.end_line < start:
        raise ToolError(f"end_line {args.end_line} is before start_line {start}")
    _require_file(real, args.path)
    cap = context.limits.output_cap
    try:
        with real.open("rb") as raw:
            if b"\0" in raw.read(_BINARY_SNIFF_BYTES):
                raise ToolError(f"`{args.path}` looks like a binary file ({real.stat().st_size} bytes)")
        with real.open(encoding="utf-8", errors="replace", newline="") as text:
            return _collect_lines(text, start, args.end_line, cap, args.path)
    except OSError as exc:
        raise ToolError(f"cannot read `{args.path}`: {exc.strerror}") from None


def _collect_lines(lines: Iterable[str], start: int, end: int | None, cap: int, shown: str) -> str:
    parts: list[str] = []
    room = cap
    last = 0
    for number, line in enumerate(lines, start=1):
        last = number
        if number < start:
            continue
        if end is not None and number > end:
            break
        if len(line) > room:
            parts.append(line[:room])
            parts.append(
                f"\n[output capped at {cap} characters; line {number} was cut, read on with start_line]"
            )
            return "".join(parts)
        parts.append(line)
        room -= len(line)
    if last < start and start > 1:
        raise ToolError(f"start_line {start} is past the end of `{shown}` ({last} lines)")
    return "".join(parts) if parts else "(empty file)"


def _write_file(args: WriteFileArgs, context: ToolContext) -> str:
    real = resolve_in_workspace(context.workspace, args.path)
    if real.is_dir():
        raise ToolError(f"`{args.path}` is a directory")
    existed = real.exists()
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        data = args.content.encode("utf-8")
        real.write_bytes(data)
    except OSError as exc:
        raise ToolError(f"cannot write `{args.path}`: {exc.strerror}") from None
    verb = "overwrote" if existed else "created"
    return f"{verb} `{display_path(context.workspace, real)}` ({len(data)} bytes)"


def _edit_file(args: EditFileArgs, context: ToolContext) -> str:
    real = resolve_in_workspace(context.workspace, args.path)
    _require_file(real, args.path)
    try:
        text = real.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"`{args.path}` is not UTF-8 text; it cannot be edited") from None
    except OSError as exc:
        raise ToolError(f"cannot read `{args.path}`: {exc.strerror}") from None
    matches = _count_occurrences(text, args.old)
    if matches == 0:
        raise ToolError(f"`old` was not found in `{args.path}`; nothing was changed")
    if matches > 1:
        raise ToolError(
            f"`old` occurs {matches} times in `{args.path}`; it must occur exactly once, "
            "so include more of the surrounding text. Nothing was changed"
        )
    try:
        real.write_bytes(text.replace(args.old, args.new, 1).encode("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot write `{args.path}`: {exc.strerror}") from None
    return f"edited `{display_path(context.workspace, real)}`: replaced 1 occurrence"


def _count_occurrences(text: str, needle: str) -> int:
    """Counts overlapping occurrences too: each one is a different place an edit could mean."""
    count, at = 0, text.find(needle)
    while at != -1:
        count += 1
        at = text.find(needle, at + 1)
    return count


def _list_dir(args: ListDirArgs, context: ToolContext) -> str:
    real = resolve_in_workspace(context.workspace, args.path)
    if not real.is_dir():
        raise ToolError(
            f"`{args.path}` is not a directory" if real.exists() else f"no such directory: `{args.path}`"
        )
    try:
        with os.scandir(real) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError as exc:
        raise ToolError(f"cannot list `{args.path}`: {exc.strerror}") from None
    if not entries:
        return "(empty directory)"
    lines: list[str] = []
    room = context.limits.output_cap
    for index, entry in enumerate(entries):
        line = _describe_entry(entry)
        if len(line) + 1 > room:
            lines.append(f"[{len(entries) - index} more entries not shown]")
            break
        lines.append(line)
        room -= len(line) + 1
    return "\n".join(lines)


def _describe_entry(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        try:
            return f"{entry.name} -> {os.readlink(entry.path)}"
        except OSError:
            return f"{entry.name} -> ?"
    return f"{entry.name}/" if entry.is_dir() else entry.name


def _require_file(real: Path, shown: str) -> None:
    if real.is_dir():
        raise ToolError(f"`{shown}` is a directory; use list_dir")
    if not real.exists():
        raise ToolError(f"no such file: `{shown}`")


READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a text file in the workspace, optionally only lines start_line..end_line (1-based, "
        "inclusive). Long output is capped; read on with start_line."
    ),
    args_type=ReadFileArgs,
    fn=_read_file,
    kind=ToolKind.THREAD,
    parallel_safe=True,
    timeout=_FILE_TOOL_TIMEOUT,
    idempotency=Idempotency.READ_ONLY,
)
"""The ``read_file`` tool; read-only."""

WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create or overwrite a file in the workspace with the given content, creating parent directories."
    ),
    args_type=WriteFileArgs,
    fn=_write_file,
    kind=ToolKind.THREAD,
    timeout=_FILE_TOOL_TIMEOUT,
    idempotency=Idempotency.IDEMPOTENT,
)
"""The ``write_file`` tool; idempotent: writing the same content again leaves the same file."""

EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace one exact occurrence of `old` with `new` in a workspace file. Fails, changing nothing, "
        "when `old` is absent or occurs more than once."
    ),
    args_type=EditFileArgs,
    fn=_edit_file,
    kind=ToolKind.THREAD,
    timeout=_FILE_TOOL_TIMEOUT,
    idempotency=Idempotency.SIDE_EFFECTING,
)
"""The ``edit_file`` tool; side-effecting: run again after it took effect, its ``old`` text may be gone
(the call fails) or, when ``new`` contains ``old``, be replaced a second time."""

LIST_DIR = Tool(
    name="list_dir",
    description="List a workspace directory: directories end with '/', symlinks show their target.",
    args_type=ListDirArgs,
    fn=_list_dir,
    kind=ToolKind.THREAD,
    parallel_safe=True,
    timeout=_FILE_TOOL_TIMEOUT,
    idempotency=Idempotency.READ_ONLY,
)
"""The ``list_dir`` tool; read-only."""
