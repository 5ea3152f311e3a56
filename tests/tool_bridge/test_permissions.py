"""Permissions: rules (first match wins), session grants, pre-tool hooks, and waiting for the host."""

from __future__ import annotations

import msgspec
import pytest
import trio

from tool_bridge.builtins.files import ReadFileArgs, WriteFileArgs
from tool_bridge.builtins.shell import ShellArgs
from tool_bridge.permissions import (
    Decision,
    DecisionSlot,
    PermissionConfigError,
    PermissionDecision,
    PermissionPolicy,
    PermissionRequested,
    PermissionRule,
    await_decision,
    denied_outcome,
)
from tool_bridge.results import ToolStatus


def sh(command: str) -> ShellArgs:
    return ShellArgs(command=command)


# Defaults


@pytest.mark.parametrize(
    ("tool", "args", "action"),
    [
        ("read_file", ReadFileArgs(path="a.txt"), "allow"),
        ("list_dir", {"path": "."}, "allow"),
        ("write_file", WriteFileArgs(path="a.txt", content=""), "ask"),
        ("edit_file", {"path": "a.txt", "old": "a", "new": "b"}, "ask"),
        ("shell", sh("ls"), "ask"),
        ("custom_tool", {}, "ask"),
    ],
)
def test_by_default_reads_are_allowed_and_writes_commands_and_unknown_tools_asked(tool, args, action):
    assert PermissionPolicy().check(tool, args).action == action


def test_the_default_action_applies_to_tools_no_rule_covers():
    decision = PermissionPolicy(default="deny").check("custom_tool", {})
    assert decision == Decision("deny", "no rule for `custom_tool`; the default is deny")


def test_without_the_default_rules_only_the_given_rules_and_the_default_decide():
    policy = PermissionPolicy(default="deny", use_default_rules=False)
    assert policy.check("read_file", ReadFileArgs(path="a")).action == "deny"


# Rules


def test_a_deny_rule_denies_naming_the_rule():
    policy = PermissionPolicy([PermissionRule("shell", "deny")])
    assert policy.check("shell", sh("ls")) == Decision("deny", "rule `deny shell`")


def test_the_first_matching_rule_wins_so_patterns_go_before_tool_wide_rules():
    policy = PermissionPolicy(
        [PermissionRule("shell", "allow", "git status"), PermissionRule("shell", "deny")]
    )
    assert policy.check("shell", sh("git status --short")) == Decision(
        "allow", "rule `allow shell 'git status'`"
    )
    assert policy.check("shell", sh("git push")).action == "deny"
    shadowed = PermissionPolicy(
        [PermissionRule("shell", "deny"), PermissionRule("shell", "allow", "git status")]
    )
    assert shadowed.check("shell", sh("git status")).action == "deny"


def test_a_command_prefix_matches_on_a_word_boundary():
    policy = PermissionPolicy([PermissionRule("shell", "allow", "git status")])
    assert policy.check("shell", sh("git status")).action == "allow"
    assert policy.check("shell", sh("git statusx")).action == "ask"


def test_a_prefix_allow_does_not_cover_a_compound_command():
    policy = PermissionPolicy([PermissionRule("shell", "allow", "git status")])
    for command in ("git status; rm -rf /", "git status && curl x", "git status > f", "git status $(rm x)"):
        assert policy.check("shell", sh(command)).action == "ask", command


def test_a_prefix_deny_matches_any_piece_of_a_compound_command():
    policy = PermissionPolicy([PermissionRule("shell", "deny", "rm")])
    assert policy.check("shell", sh("ls && rm -rf build")).action == "deny"
    assert policy.check("shell", sh("ls | grep rmdir")).action == "ask"


def test_a_path_glob_narrows_a_file_tool_rule(tmp_path):
    policy = PermissionPolicy([PermissionRule("write_file", "deny", "secrets/*")], workspace=tmp_path)
    for path in ("secrets/key.pem", "./secrets/a/b", str(tmp_path / "secrets" / "k")):
        assert policy.check("write_file", WriteFileArgs(path=path, content="")).action == "deny", path
    assert policy.check("write_file", WriteFileArgs(path="src/a.py", content="")).action == "ask"


def test_a_star_rule_covers_every_tool():
    policy = PermissionPolicy([PermissionRule("*", "deny")])
    assert policy.check("read_file", ReadFileArgs(path="a")).action == "deny"
    assert policy.check("anything", {}).action == "deny"


@pytest.mark.parametrize(
    "rule",
    [
        PermissionRule("custom_tool", "allow", "x*"),
        PermissionRule("shell", "allow", ""),
        PermissionRule("shell", "maybe"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_rule_is_refused(rule):
    with pytest.raises(PermissionConfigError):
        PermissionPolicy([rule])


# Session grants


def test_a_grant_allows_matching_calls_that_would_be_asked():
    policy = PermissionPolicy()
    policy.grant("shell", "pytest")
    assert policy.check("shell", sh("pytest -q")) == Decision(
        "allow", "granted for the session (`allow shell 'pytest'`)"
    )
    assert policy.check("shell", sh("make")).action == "ask"
    assert policy.grants == (PermissionRule("shell", "allow", "pytest"),)


def test_the_permission_mode_settles_only_what_would_be_asked():
    policy = PermissionPolicy(
        [PermissionRule("shell", "deny", "rm")], hooks=[lambda tool, _: "no" if tool == "edit_file" else None]
    )
    assert policy.mode == "ask"
    policy.set_mode("allow")
    allowed = policy.check("shell", sh("make"))
    assert allowed.action == "allow" and "permission mode allows" in allowed.reason
    assert policy.check("shell", sh("rm -rf x")).action == "deny", "a deny rule still denies"
    assert policy.check("edit_file", {"path": "a"}) == Decision("deny", "no"), "a hook still denies"
    policy.set_mode("deny")
    denied = policy.check("shell", sh("make"))
    assert denied.action == "deny" and "permission mode denies" in denied.reason
    assert policy.check("read_file", ReadFileArgs(path="a")).action == "allow", "an allow rule still allows"
    policy.grant("shell", "make")
    assert policy.check("shell", sh("make")).action == "allow", "a grant still allows"
    policy.set_mode("ask")
    assert policy.check("shell", sh("ls")).action == "ask"
    with pytest.raises(PermissionConfigError, match="ask, allow, deny"):
        policy.set_mode("sometimes")  # type: ignore[arg-type]
    assert policy.mode == "ask"


def test_a_grant_never_overrides_a_deny_rule():
    policy = PermissionPolicy([PermissionRule("shell", "deny", "rm")])
    policy.grant("shell")
    assert policy.check("shell", sh("rm -rf x")).action == "deny"
    assert policy.check("shell", sh("ls")).action == "allow"


def test_allow_always_from_the_host_becomes_a_grant_and_allow_once_does_not():
    policy = PermissionPolicy()
    once = policy.resolve("write_file", PermissionDecision("c1", "allow_once"))
    assert once == Decision("allow", "allowed once by the user")
    assert policy.check("write_file", WriteFileArgs(path="a", content="")).action == "ask"
    always = policy.resolve("write_file", PermissionDecision("c2", "allow_always", pattern="docs/*"))
    assert always == Decision("allow", "allowed for the session by the user")
    assert policy.check("write_file", WriteFileArgs(path="docs/x.md", content="")).action == "allow"
    assert policy.check("write_file", WriteFileArgs(path="src/x.py", content="")).action == "ask"


def test_a_deny_from_the_host_keeps_its_reason():
    policy = PermissionPolicy()
    assert policy.resolve("shell", PermissionDecision("c1", "deny", reason="not now")) == Decision(
        "deny", "not now"
    )
    assert policy.resolve("shell", PermissionDecision("c1", "deny")) == Decision(
        "deny", "refused by the user"
    )


# Pre-tool hooks


def test_a_hook_returning_a_reason_denies_even_an_allowed_call():
    seen = []

    def no_env_files(tool, args):
        seen.append((tool, args))
        return "reading .env files is not allowed" if args.path.endswith(".env") else None

    policy = PermissionPolicy(hooks=[no_env_files])
    args = ReadFileArgs(path="app/.env")
    assert policy.check("read_file", args) == Decision("deny", "reading .env files is not allowed")
    assert policy.check("read_file", ReadFileArgs(path="app/main.py")).action == "allow"
    assert seen[0] == ("read_file", args)


def test_a_hook_that_raises_denies_with_the_exception_as_reason():
    def broken(tool, args):
        raise RuntimeError("policy server down")

    policy = PermissionPolicy()
    policy.add_hook(broken)
    decision = policy.check("read_file", ReadFileArgs(path="a"))
    assert decision.action == "deny"
    assert decision.reason.endswith("broken failed: RuntimeError: policy server down")


def test_hooks_are_not_consulted_for_calls_a_rule_denies():
    calls = []
    policy = PermissionPolicy(
        [PermissionRule("shell", "deny")], hooks=[lambda tool, args: calls.append(tool)]
    )
    policy.check("shell", sh("ls"))
    assert calls == []


def test_a_denial_becomes_an_error_result_saying_denied():
    outcome = denied_outcome("c1", "shell", "no answer within 30 s")
    assert (outcome.call_id, outcome.tool, outcome.status) == ("c1", "shell", ToolStatus.DENIED)
    assert (outcome.is_error, outcome.content) == (True, "denied: no answer within 30 s")


# Waiting for the host's answer


@pytest.mark.trio
async def test_await_decision_returns_the_answer_delivered_to_the_slot(autojump_clock):
    slot = DecisionSlot("c1")
    answer = PermissionDecision("c1", "allow_once")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_later, slot, answer, 5)
        assert await await_decision(slot, timeout=30) is answer
    assert trio.current_time() == pytest.approx(5)


async def _answer_later(slot, answer, delay) -> None:
    await trio.sleep(delay)
    slot.answer(answer)


@pytest.mark.trio
async def test_await_decision_returns_a_deny_answer_too(autojump_clock):
    slot = DecisionSlot("c1")
    slot.answer(PermissionDecision("c1", "deny", reason="no"))
    assert (await await_decision(slot, timeout=30)).decision == "deny"


@pytest.mark.trio
async def test_without_an_answer_by_the_deadline_the_call_is_denied(autojump_clock):
    decision = await await_decision(DecisionSlot("c1"), timeout=30)
    assert decision == PermissionDecision("c1", "deny", reason="no answer within 30 s")
    assert trio.current_time() == pytest.approx(30)


@pytest.mark.trio
async def test_from_a_channel_answers_to_other_calls_are_skipped(autojump_clock):
    send, receive = trio.open_memory_channel[PermissionDecision](10)
    send.send_nowait(PermissionDecision("other", "allow_once"))
    send.send_nowait(PermissionDecision("c1", "allow_always"))
    assert (await await_decision(receive, call_id="c1", timeout=30)).decision == "allow_always"


@pytest.mark.trio
async def test_a_channel_closed_without_an_answer_denies(autojump_clock):
    send, receive = trio.open_memory_channel[PermissionDecision](10)
    await send.aclose()
    decision = await await_decision(receive, call_id="c1", timeout=30)
    assert (decision.decision, decision.reason) == ("deny", "the host stopped answering permission requests")
    assert trio.current_time() == 0


@pytest.mark.trio
async def test_a_channel_deadline_denies_too(autojump_clock):
    send, receive = trio.open_memory_channel[PermissionDecision](10)
    send.send_nowait(PermissionDecision("other", "allow_once"))
    decision = await await_decision(receive, call_id="c1", timeout=2.5)
    assert decision.reason == "no answer within 2.5 s"


@pytest.mark.trio
async def test_waiting_on_a_channel_needs_the_call_id():
    _send, receive = trio.open_memory_channel[PermissionDecision](1)
    with pytest.raises(ValueError):
        await await_decision(receive, timeout=1)


def test_a_slot_keeps_the_first_answer_and_refuses_answers_for_other_calls():
    slot = DecisionSlot("c1")
    assert slot.answer(PermissionDecision("c1", "deny")) is True
    assert slot.answer(PermissionDecision("c1", "allow_once")) is False
    with pytest.raises(ValueError):
        slot.answer(PermissionDecision("c2", "allow_once"))


def test_permission_messages_round_trip_through_json_with_their_tags():
    decoder = msgspec.json.Decoder(PermissionRequested | PermissionDecision)
    for message in (
        PermissionRequested("c1", "shell", '{"command": "ls"}', "rule `ask shell`"),
        PermissionDecision("c1", "allow_always", pattern="ls"),
    ):
        assert decoder.decode(msgspec.json.encode(message)) == message
