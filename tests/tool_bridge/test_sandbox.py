"""The shell tool in a real bubblewrap sandbox: what a command can see, write and reach, and that the
timeouts, the grace, the kill and the partial output are the same as outside it.

Real processes, so real time with short limits. The directories live outside ``/tmp`` (which is private in
the sandbox anyway), under the user's cache directory, so that hiding is tested for real.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.tool_bridge._sandbox import usable_sandbox
from tool_bridge._process import process_group_alive, run_process_group
from tool_bridge.builtins import shell_tool
from tool_bridge.builtins.shell import ShellArgs
from tool_bridge.results import ToolOutcome, ToolStatus
from tool_bridge.sandbox import Sandbox, SandboxProbe
from tool_bridge.tools import ToolContext, ToolLimits, run_tool


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory outside /tmp: ``ws`` (the workspace), ``other`` (another session's workspace),
    ``home`` with a ``.netrc``, ``store`` with a database file, and ``open`` (nothing hidden)."""
    cache = Path.home() / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="turnkeep-sandbox-", dir=cache)).resolve()
    for name in ("ws", "other", "home", "store", "open"):
        (root / name).mkdir()
    (root / "other" / "theirs.txt").write_text("another session's file\n")
    (root / "home" / ".netrc").write_text("machine example.com password netrc-password-1\n")
    (root / "store" / "sessions.db").write_text("stored-session-bytes\n")
    (root / "open" / "readme.txt").write_text("visible\n")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sandbox(probe: SandboxProbe, base: Path, **kwargs: object) -> Sandbox:
    hidden = [str(base / "home"), str(base / "store" / "sessions.db"), str(base / "other")]
    options: dict[str, object] = {"hidden": lambda: hidden, "hide_siblings": False, **kwargs}
    return Sandbox(mode="auto", probe=probe, **options)  # type: ignore[arg-type]


async def shell(
    workspace: Path, command: str, box: Sandbox, *, timeout: float = 10.0, grace: float = 2.0
) -> ToolOutcome:
    context = ToolContext(workspace=workspace, call_id="c1", limits=ToolLimits(terminate_grace=grace))
    return await run_tool(shell_tool(sandbox=box), ShellArgs(command=command, timeout=timeout), context)


@pytest.mark.trio
async def test_the_workspace_is_writable_and_the_rest_of_the_filesystem_read_only(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    escape = Path("/etc/turnkeep-sandbox-escape.txt")
    try:
        outcome = await shell(
            base / "ws",
            f"echo made > made.txt && cat {base}/open/readme.txt && touch {base}/open/new.txt;"
            f" touch {escape}",
            box,
        )
        assert not escape.exists()
    finally:
        escape.unlink(missing_ok=True)
    assert (base / "ws" / "made.txt").read_text() == "made\n"
    assert "visible" in outcome.content
    assert outcome.content.count("Read-only file system") == 2, outcome.content
    assert not (base / "open" / "new.txt").exists()


@pytest.mark.trio
async def test_hidden_directories_are_empty_and_hidden_files_cannot_be_read(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    outcome = await shell(
        base / "ws",
        f"ls -A {base}/home {base}/other; cat {base}/home/.netrc {base}/other/theirs.txt; "
        f"cat {base}/store/sessions.db",
        box,
    )
    assert "netrc-password-1" not in outcome.content and "another session" not in outcome.content
    assert "stored-session-bytes" not in outcome.content
    assert f"{base}/store/sessions.db: Permission denied" in outcome.content
    assert f"{base}/home/.netrc: No such file or directory" in outcome.content


@pytest.mark.trio
async def test_what_lies_beside_the_workspace_is_hidden(base: Path) -> None:
    box = sandbox(usable_sandbox(), base, hide_siblings=True, hidden=lambda: [])
    outcome = await shell(base / "ws", f"ls -A {base}; cat {base}/open/readme.txt; echo rc=$?", box)
    assert outcome.content.splitlines()[0] == "ws"
    assert "visible" not in outcome.content and "rc=1" in outcome.content


@pytest.mark.trio
async def test_tmp_is_private_to_the_command(base: Path, tmp_path: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    (tmp_path / "host-file").write_text("host\n")
    outcome = await shell(
        base / "ws", f"ls -A /tmp; echo mine > /tmp/inside; cat /tmp/inside {tmp_path}/host-file", box
    )
    assert outcome.content.splitlines()[:2] == ["exit code 1", "mine"], outcome.content
    assert "No such file or directory" in outcome.content and "host\n" not in outcome.content
    assert not Path("/tmp/inside").exists()


@pytest.mark.trio
async def test_the_command_has_its_own_pid_namespace(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    outcome = await shell(base / "ws", "ls /proc | grep -c '^[0-9]'", box)
    assert outcome.status is ToolStatus.OK
    assert int(outcome.content) < 10, "the host's processes are visible"


async def _listener() -> tuple[trio.SocketListener, int]:
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    return listener, listener.socket.getsockname()[1]


@pytest.mark.trio
async def test_there_is_no_network_unless_asked_for(base: Path) -> None:
    probe = usable_sandbox()
    listener, port = await _listener()
    command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    async with listener:
        closed = await shell(base / "ws", command, sandbox(probe, base))
        opened = await shell(base / "ws", command, sandbox(probe, base, network=True))
    assert closed.status is ToolStatus.ERROR and "connected" not in closed.content
    assert "Connection refused" in closed.content or "Network is unreachable" in closed.content
    assert (opened.status, opened.content) == (ToolStatus.OK, "connected")


@pytest.mark.trio
async def test_on_timeout_a_command_gets_its_grace_to_clean_up_and_keeps_its_output(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    started = trio.current_time()
    outcome = await shell(
        base / "ws",
        "trap 'echo terminated; sleep 0.2; echo cleaned; exit 3' TERM; echo started; sleep 30 & wait",
        box,
        timeout=0.5,
    )
    assert outcome.status is ToolStatus.TIMED_OUT and outcome.interrupted
    assert outcome.content.splitlines()[1:] == ["started", "terminated", "cleaned"]
    assert trio.current_time() - started < 3.0


@pytest.mark.trio
async def test_a_command_ignoring_sigterm_is_killed_when_the_grace_is_over(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    started = trio.current_time()
    outcome = await shell(base / "ws", "trap '' TERM; echo started; sleep 30", box, timeout=0.3, grace=0.3)
    assert outcome.status is ToolStatus.TIMED_OUT
    assert outcome.content.splitlines()[1:] == ["started"]
    assert 0.5 <= trio.current_time() - started < 3.0


def _running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker.encode() in cmdline.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.trio
async def test_nothing_the_command_started_outlives_it_not_even_a_new_session(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    argv = box.wrap(
        ("bash", "-c", "sleep 31.4159 & setsid sleep 31.4158 & echo spawned"), base / "ws", os.environ
    )
    result = await run_process_group(argv, cwd=base / "ws", timeout=10.0, drain_timeout=0.2)
    assert result.stdout == "spawned\n"
    assert not process_group_alive(result.pid)
    with trio.move_on_after(5.0):
        while _running("31.415"):
            await trio.sleep(0.02)
    assert _running("31.415") == []


@pytest.mark.trio
async def test_an_aborted_command_keeps_its_output_so_far(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    context = ToolContext(workspace=base / "ws", call_id="c1", limits=ToolLimits(terminate_grace=1.0))
    tool = shell_tool(sandbox=box)

    async def abort_soon() -> None:
        while not (base / "ws" / "ready").exists():
            await trio.sleep(0.01)
        context.abort.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_soon)
        outcome = await run_tool(tool, ShellArgs(command="echo partial; touch ready; sleep 30"), context)
    assert outcome.status is ToolStatus.ABORTED
    assert outcome.content.splitlines()[1:] == ["partial"]


@pytest.mark.trio
async def test_required_without_a_working_sandbox_refuses_the_command(tmp_path: Path) -> None:
    box = Sandbox(mode="required", probe=SandboxProbe(False, None, "bwrap is not installed"))
    outcome = await shell(tmp_path, "touch ran", box)
    assert outcome.status is ToolStatus.ERROR
    assert "refused" in outcome.content and "bwrap is not installed" in outcome.content
    assert not (tmp_path / "ran").exists()


@pytest.mark.trio
async def test_auto_without_a_working_sandbox_runs_the_command_unconfined(tmp_path: Path) -> None:
    (tmp_path / "host-file").write_text("host\n")
    box = Sandbox(mode="auto", probe=SandboxProbe(False, None, "bwrap is not installed"))
    outcome = await shell(tmp_path / ".", f"cat {tmp_path}/host-file", box)
    assert (outcome.status, outcome.content) == (ToolStatus.OK, "host")


@pytest.mark.trio
async def test_a_hard_kill_of_a_sandboxed_call_leaves_nothing_behind(base: Path) -> None:
    box = sandbox(usable_sandbox(), base)
    context = ToolContext(workspace=base / "ws", call_id="c1")
    command = "setsid sleep 27.1828 & sleep 27.1827 & touch ready; wait"
    with trio.move_on_after(10.0) as overdue:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_tool, shell_tool(sandbox=box), ShellArgs(command=command), context)
            while not (base / "ws" / "ready").exists():
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert not overdue.cancelled_caught
    with trio.move_on_after(5.0):
        while _running("27.182"):
            await trio.sleep(0.02)
    assert _running("27.182") == []
