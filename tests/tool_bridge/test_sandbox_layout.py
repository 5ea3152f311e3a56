"""The sandbox's command line and its decisions, as pure functions: what is hidden, in which order, and
when a command is sandboxed, run as it is, or refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_bridge.sandbox import (
    PRIVATE_DIRS,
    Hidden,
    Sandbox,
    SandboxProbe,
    probe_sandbox,
    sandbox_argv,
    sandbox_verdict,
    sibling_cover,
)

USABLE = SandboxProbe(True, "/usr/bin/bwrap")
UNUSABLE = SandboxProbe(False, None, "bwrap is not installed")


def mounts(argv: list[str]) -> list[tuple[str, ...]]:
    """The (option, arguments...) of the mount options, in order."""
    arity = {"--tmpfs": 1, "--bind": 2, "--ro-bind": 2}
    found, index = [], 0
    while index < len(argv) and argv[index] != "--":
        option = argv[index]
        if option in arity:
            found.append((option, *argv[index + 1 : index + 1 + arity[option]]))
            index += arity[option]
        index += 1
    return found


def test_the_command_runs_last_in_the_workspace_with_sigterm_restored() -> None:
    argv = sandbox_argv(["bash", "-c", "ls"], workspace="/w/ws", bwrap="/b/bwrap")
    assert argv[:3] == ["env", "--ignore-signal=TERM", "/b/bwrap"]
    tail = argv[argv.index("--") :]
    assert tail == ["--", "env", "--default-signal=TERM", "bash", "-c", "ls"]
    assert argv[argv.index("--chdir") + 1] == "/w/ws"
    assert {"--die-with-parent", "--unshare-pid", "--unshare-user", "--unshare-net"} <= set(argv)
    assert argv[argv.index("--cap-drop") + 1] == "ALL"


def test_the_whole_filesystem_is_read_only_then_tmp_is_private_then_the_workspace_writable() -> None:
    found = mounts(sandbox_argv(["true"], workspace="/w/ws"))
    assert found[0] == ("--ro-bind", "/", "/")
    assert found[1:3] == [("--tmpfs", path) for path in PRIVATE_DIRS]
    assert found[-1] == ("--bind", "/w/ws", "/w/ws")


def test_network_true_keeps_the_network_namespace() -> None:
    assert "--unshare-net" not in sandbox_argv(["true"], workspace="/w", network=True)


def test_a_hidden_ancestor_of_the_workspace_comes_before_its_bind_and_one_inside_after() -> None:
    hidden = [Hidden("/w", True), Hidden("/w/ws/.store", True), Hidden("/w/ws/db", False)]
    found = mounts(sandbox_argv(["true"], workspace="/w/ws", hidden=hidden))
    bind = found.index(("--bind", "/w/ws", "/w/ws"))
    assert found.index(("--tmpfs", "/w")) < bind
    assert found.index(("--tmpfs", "/w/ws/.store")) > bind
    assert found.index(("--ro-bind", "/dev/null", "/w/ws/db")) > bind


def test_paths_already_covered_the_root_and_the_workspace_itself_are_not_mounted_again() -> None:
    hidden = [
        Hidden("/home/u", True),
        Hidden("/home/u/.local/share/turnkeep", True),
        Hidden("/tmp/store.db", False),
        Hidden("/", True),
        Hidden("/w/ws", True),
        Hidden("relative", True),
    ]
    found = mounts(sandbox_argv(["true"], workspace="/w/ws", hidden=hidden))
    assert [m for m in found if m[-1] not in ("/", "/w/ws", *PRIVATE_DIRS)] == [("--tmpfs", "/home/u")]


def test_the_parent_of_the_workspace_hides_its_siblings_unless_it_is_a_system_directory() -> None:
    assert sibling_cover("/srv/sessions/a") == "/srv/sessions"
    for workspace in ("/srv", "/home/alice", "/usr/local/src", "/opt/x", "/work"):
        assert sibling_cover(workspace) is None, workspace


def test_the_parent_stays_visible_when_it_holds_a_directory_on_path() -> None:
    assert sibling_cover("/data/a/ws", ["/usr/bin", "/data/a/bin"]) is None
    assert sibling_cover("/data/a/ws", ["/usr/bin", "/data/b/bin"]) == "/data/a"


@pytest.mark.parametrize(
    ("mode", "probe", "verdict"),
    [
        ("off", None, "unsandboxed"),
        ("off", USABLE, "unsandboxed"),
        ("auto", USABLE, "sandboxed"),
        ("auto", UNUSABLE, "unsandboxed"),
        ("required", USABLE, "sandboxed"),
        ("required", UNUSABLE, "refused"),
    ],
)
def test_the_verdict_follows_the_mode_and_the_probe(mode, probe, verdict) -> None:  # type: ignore[no-untyped-def]
    assert sandbox_verdict(mode, probe) == verdict
    assert Sandbox(mode=mode, probe=probe).verdict == verdict


def test_a_sandbox_other_than_off_needs_a_probe_and_a_known_mode() -> None:
    with pytest.raises(ValueError, match="needs a probe"):
        Sandbox(mode="auto")
    with pytest.raises(ValueError, match="mode must be"):
        Sandbox(mode="sometimes", probe=USABLE)  # type: ignore[arg-type]


def test_unsandboxed_commands_are_left_as_they_are() -> None:
    for sandbox in (Sandbox(mode="off"), Sandbox(mode="auto", probe=UNUSABLE)):
        assert sandbox.wrap(("bash", "-c", "ls"), Path("/w"), {}) == ("bash", "-c", "ls")


def test_the_description_says_what_is_in_force_and_why() -> None:
    assert "bubblewrap" in Sandbox(mode="auto", probe=USABLE).describe()
    assert "no network" in Sandbox(mode="auto", probe=USABLE).describe()
    assert "with the network" in Sandbox(mode="auto", probe=USABLE, network=True).describe()
    assert "not installed" in Sandbox(mode="auto", probe=UNUSABLE).describe()
    assert "refused" in Sandbox(mode="required", probe=UNUSABLE).describe()
    assert Sandbox(mode="off").describe().startswith("off")


def test_a_missing_program_gives_an_unusable_probe_with_the_reason() -> None:
    probe = probe_sandbox("turnkeep-no-such-bwrap", fresh=True)
    assert not probe.usable and probe.bwrap is None
    assert "is not installed" in probe.reason and "apt-get install bubblewrap" in probe.reason


def test_a_program_that_cannot_make_the_sandbox_gives_an_unusable_probe_with_its_words(
    tmp_path: Path,
) -> None:
    fake = tmp_path / "fake-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    probe = probe_sandbox(str(fake), fresh=True)
    assert not probe.usable and probe.bwrap == str(fake)
    assert (
        probe.reason
        == "a trial command in the sandbox failed (bwrap: No permissions to create new namespace)"
    )
    assert probe_sandbox(str(fake)) is probe, "the answer is remembered"
