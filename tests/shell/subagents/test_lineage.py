"""What a child session is made of. A root session (no profile) runs with its options, chat options and
tools unchanged — the very objects, the base registry as it is when it gets no ``agent`` tool. A child runs
with its profile's model (priced from ``[pricing]``), step limit and instructions (its system prompt), and
only the tools of its allow list: ``agent`` is added when given unless the list leaves it out, and the list
is also what limits its MCP tools. ``lineage_of`` reads a session's family (its root) and depth from the
stored parent links, and a child whose profile is no longer configured runs as ``general``."""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest

from shell.config import GENERAL_PROFILE, AgentProfile, AgentsSettings, Settings
from shell.session import ChatStateOptions, SessionOptions
from shell.store import ParentLink, open_store
from shell.subagents import Lineage, child_chat, child_options, child_session_id, child_tools, lineage_of
from shell.usage import Price
from tool_bridge import Idempotency, Tool, ToolRegistry


class Args(msgspec.Struct):
    text: str = ""


async def _run(args: Args, context: object) -> str:
    return args.text


def tool(name: str) -> Tool[Args]:
    return Tool(name=name, description=f"The {name} tool.", args_type=Args, fn=_run)


AGENT = tool("agent")
REVIEWER = AgentProfile(
    description="Reviews.",
    model="big",
    instructions="You review code.",
    tools=("read_file", "agent"),
    max_steps=5,
    deadline=60.0,
)
SETTINGS = Settings(
    agents=AgentsSettings(max_depth=3, profiles={"reviewer": REVIEWER}),
    pricing={"big": Price(input=3.0, output=15.0), "parent-model": Price(input=1.0, output=2.0)},
)
OPTIONS = SessionOptions("s", "parent-model", max_steps_per_turn=100, price=Price(1.0, 2.0))
CHAT = ChatStateOptions("s", context_window=64_000, system_prompt="")
ROOT = Lineage("s")


def registry() -> ToolRegistry:
    return ToolRegistry(
        [tool("read_file"), tool("write_file"), tool("shell")],
        idempotency={"shell": Idempotency.IDEMPOTENT},
    )


def child(profile: AgentProfile, name: str = "custom") -> Lineage:
    return Lineage("root", 1, profile, name)


# --- a root session -----------------------------------------------------------------------------------


def test_a_root_session_runs_with_its_options_and_chat_options_unchanged() -> None:
    assert child_options(OPTIONS, ROOT, SETTINGS) is OPTIONS
    assert child_chat(CHAT, ROOT) is CHAT


def test_a_root_session_without_the_agent_tool_gets_the_base_registry_itself_and_every_mcp_tool() -> None:
    base = registry()
    own, only = child_tools(base, ROOT, None)
    assert own is base
    assert only is None


def test_a_root_session_given_the_agent_tool_gets_a_copy_of_the_base_with_it_added() -> None:
    base = registry()
    own, only = child_tools(base, ROOT, AGENT)
    assert own.names() == ["read_file", "write_file", "shell", "agent"]
    assert base.names() == ["read_file", "write_file", "shell"], "the base registry is left alone"
    assert own.idempotency_of("shell") is Idempotency.IDEMPOTENT, "overrides by name are kept"
    assert only is None


# --- a child with a profile ---------------------------------------------------------------------------


def test_a_child_runs_with_its_profile_s_model_priced_from_settings_and_its_step_limit() -> None:
    options = child_options(OPTIONS, child(REVIEWER, "reviewer"), SETTINGS)
    assert options.model == "big"
    assert options.max_steps_per_turn == 5
    assert options.price == Price(input=3.0, output=15.0)
    assert (options.session_id, options.compaction_threshold) == (
        OPTIONS.session_id,
        OPTIONS.compaction_threshold,
    )


def test_a_profile_without_model_or_step_limit_keeps_the_parent_s_and_its_price() -> None:
    options = child_options(OPTIONS, child(AgentProfile()), SETTINGS)
    assert options.model == "parent-model"
    assert options.max_steps_per_turn == 100
    assert options.price == Price(input=1.0, output=2.0)


def test_a_profile_s_model_without_a_configured_price_has_no_cost() -> None:
    options = child_options(OPTIONS, child(AgentProfile(model="unpriced")), SETTINGS)
    assert options.model == "unpriced"
    assert options.price is None


def test_a_child_s_system_prompt_is_its_profile_s_instructions() -> None:
    chat = child_chat(CHAT, child(REVIEWER))
    assert chat.system_prompt == "You review code."
    assert chat.context_window == CHAT.context_window
    assert child_chat(CHAT, child(AgentProfile())) is CHAT, "no instructions: the chat options as they are"


def test_a_child_is_offered_only_the_tools_of_its_allow_list_and_the_list_limits_its_mcp_tools() -> None:
    own, only = child_tools(registry(), child(AgentProfile(tools=("read_file", "some_mcp_tool"))), None)
    assert own.names() == ["read_file"]
    assert only == frozenset({"read_file", "some_mcp_tool"})


def test_the_agent_tool_is_added_to_a_child_when_given_and_its_allow_list_names_it() -> None:
    own, only = child_tools(registry(), child(REVIEWER), AGENT)
    assert own.names() == ["read_file", "agent"]
    assert own.get("agent") is AGENT
    assert only == frozenset({"read_file", "agent"})


def test_the_agent_tool_is_left_out_when_the_allow_list_does_not_name_it() -> None:
    own, _ = child_tools(registry(), child(AgentProfile(tools=("read_file", "shell"))), AGENT)
    assert own.names() == ["read_file", "shell"]
    assert own.idempotency_of("shell") is Idempotency.IDEMPOTENT


def test_the_agent_tool_is_not_added_when_not_given_even_if_the_allow_list_names_it() -> None:
    own, _ = child_tools(registry(), child(REVIEWER), None)
    assert "agent" not in own


def test_a_child_without_an_allow_list_gets_all_its_parent_s_tools() -> None:
    base = registry()
    own, only = child_tools(base, child(AgentProfile()), None)
    assert own is base and only is None
    own, only = child_tools(base, child(AgentProfile()), AGENT)
    assert own.names() == ["read_file", "write_file", "shell", "agent"] and only is None


def test_an_empty_allow_list_offers_no_tool_and_no_mcp_tool() -> None:
    own, only = child_tools(registry(), child(AgentProfile(tools=())), AGENT)
    assert len(own) == 0
    assert only == frozenset()


# --- lineage_of, from the store -----------------------------------------------------------------------


@pytest.fixture
def family(tmp_path: Path):
    """A root ``root``, its child (profile ``reviewer``) and grandchild (profile ``general``)."""
    with open_store(tmp_path / "s.db") as store:
        store.create_session("root", workspace=str(tmp_path), model="m")
        son = child_session_id("root", 1, "c1")
        store.create_session(
            son, workspace=str(tmp_path), model="m", parent=ParentLink("root", 1, "c1", "reviewer")
        )
        grandson = child_session_id(son, 1, "c2")
        store.create_session(
            grandson, workspace=str(tmp_path), model="m", parent=ParentLink(son, 1, "c2", "general")
        )
        yield store, son, grandson


def test_a_root_session_is_its_own_family_at_depth_0_without_a_profile(family) -> None:
    store, _, _ = family
    assert lineage_of(store, "root", SETTINGS) == Lineage("root", 0, None, "")


def test_a_child_is_in_its_root_s_family_at_depth_1_with_its_profile(family) -> None:
    store, son, _ = family
    assert lineage_of(store, son, SETTINGS) == Lineage("root", 1, REVIEWER, "reviewer")


def test_a_grandchild_is_in_the_root_s_family_at_depth_2(family) -> None:
    store, _, grandson = family
    assert lineage_of(store, grandson, SETTINGS) == Lineage("root", 2, GENERAL_PROFILE, "general")


def test_a_child_whose_profile_is_no_longer_configured_runs_as_general_and_the_log_says_so(
    family, caplog: pytest.LogCaptureFixture
) -> None:
    store, son, _ = family
    unconfigured = Settings(agents=AgentsSettings(max_depth=3))
    with caplog.at_level(logging.WARNING, logger="turnkeep.shell"):
        lineage = lineage_of(store, son, unconfigured)
    assert lineage == Lineage("root", 1, GENERAL_PROFILE, "reviewer")
    assert any("'reviewer' is not configured" in record.getMessage() for record in caplog.records)


def test_a_configured_general_profile_replaces_the_built_in_one_for_a_child(family) -> None:
    store, _, grandson = family
    mine = AgentProfile(description="Mine.", max_steps=7)
    settings = Settings(agents=AgentsSettings(max_depth=3, profiles={"general": mine}))
    assert lineage_of(store, grandson, settings).profile == mine
