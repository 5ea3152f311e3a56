"""Specification of ``[agents]``: its defaults; each ``[agents.NAME]`` table of the file becomes a profile
(``general`` is built in and may be replaced); every mistake is refused naming the dotted key; the limits
may be set from the environment; and a session at a depth below ``max_depth`` is offered the ``agent``
tool when subagents are enabled."""

from __future__ import annotations

from pathlib import Path

import pytest

from shell.config import (
    GENERAL_PROFILE,
    MAX_AGENT_DEPTH,
    AgentProfile,
    AgentsSettings,
    ConfigError,
    load_settings,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "turnkeep.toml"
    path.write_text(text)
    return path


def error_of(path: Path | None, **environ: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ)
    return caught.value


# --- Defaults ---------------------------------------------------------------------------------------------


def test_by_default_subagents_are_enabled_one_level_deep_with_only_the_general_profile() -> None:
    agents = load_settings(None, {}).agents
    assert agents == AgentsSettings()
    assert agents.enabled is True
    assert (agents.max_depth, agents.max_children_at_once) == (1, 4)
    assert (agents.max_children_per_turn, agents.max_children_per_host) == (16, 32)
    assert agents.profiles == {}
    assert agents.profile_names() == ["general"]
    assert agents.profile("general") is GENERAL_PROFILE
    assert agents.profile("reviewer") is None


def test_the_built_in_general_profile_runs_with_its_parent_s_model_and_tools() -> None:
    assert GENERAL_PROFILE.model is None and GENERAL_PROFILE.tools is None
    assert GENERAL_PROFILE.max_steps is None and GENERAL_PROFILE.instructions == ""
    assert GENERAL_PROFILE.deadline == 600.0 and GENERAL_PROFILE.workspace == "shared"
    assert GENERAL_PROFILE.description


# --- The file ---------------------------------------------------------------------------------------------


def test_agents_tables_become_profiles_in_file_order_beside_the_limits(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[agents]
max_depth = 2
max_children_at_once = 3

[agents.reviewer]
description = "Reviews a change."
model = "big-model"
instructions = "You review code."
tools = ["read_file", "agent"]
max_steps = 12
deadline = 90

[agents.quick]
""",
    )
    agents = load_settings(path, {}).agents
    assert (agents.max_depth, agents.max_children_at_once) == (2, 3)
    assert agents.profiles == {
        "reviewer": AgentProfile(
            description="Reviews a change.",
            model="big-model",
            instructions="You review code.",
            tools=("read_file", "agent"),
            max_steps=12,
            deadline=90.0,
        ),
        "quick": AgentProfile(),
    }
    assert agents.profile_names() == ["general", "reviewer", "quick"]
    assert agents.profile("general") is GENERAL_PROFILE


def test_a_general_table_replaces_the_built_in_general_profile(tmp_path: Path) -> None:
    path = write(tmp_path, '[agents.zeta]\n[agents.general]\ndescription = "Mine."\nmax_steps = 3\n')
    agents = load_settings(path, {}).agents
    assert agents.profile("general") == AgentProfile(description="Mine.", max_steps=3)
    assert agents.profile_names() == ["general", "zeta"], "general is listed once, first"


# --- Errors name the dotted key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "problem"),
    [
        ('[agents.reviewer]\ndeadline = "soon"\n', "agents.reviewer.deadline", "expected float, got str"),
        ("[agents.reviewer]\ndeadline = 0\n", "agents.reviewer.deadline", "must be a number > 0"),
        ("[agents.reviewer]\nfoo = 1\n", "agents.reviewer.foo", "unknown key"),
        ("[agents.reviewer]\ntools = [1]\n", "agents.reviewer.tools[0]", "expected str, got int"),
        ('[agents.reviewer]\ntools = [""]\n', "agents.reviewer.tools", "non-empty names"),
        ("[agents.reviewer]\nmax_steps = 0\n", "agents.reviewer.max_steps", "whole number >= 1"),
        ('[agents.reviewer]\nmodel = " "\n', "agents.reviewer.model", "must be a model name"),
        ('[agents.reviewer]\nworkspace = "own"\n', "agents.reviewer.workspace", "'own'"),
        ("[agents]\nmax_depth = 4\n", "agents.max_depth", f"must be at most {MAX_AGENT_DEPTH}, got 4"),
        ("[agents]\nmax_depth = 0\n", "agents.max_depth", "whole number >= 1, got 0"),
        ("[agents]\nmax_children_at_once = 0\n", "agents.max_children_at_once", "whole number >= 1"),
        ("[agents]\nmax_children_per_turn = -1\n", "agents.max_children_per_turn", "whole number >= 1"),
        ("[agents]\nmax_children_per_host = 0\n", "agents.max_children_per_host", "whole number >= 1"),
        ('[agents]\nenabled = "maybe"\n', "agents.enabled", "expected bool"),
        ("[agents]\nreviewer = 3\n", "agents.reviewer", "unknown key"),
    ],
)
def test_a_mistake_in_agents_is_refused_naming_its_dotted_key(
    tmp_path: Path, toml: str, key: str, problem: str
) -> None:
    error = error_of(write(tmp_path, toml))
    assert error.key == key
    assert f"invalid setting {key}: " in str(error)
    assert problem in str(error)
    assert "turnkeep.toml" in str(error)


@pytest.mark.parametrize("name", ["bad.name", "x" * 65, "bad name", ""])
def test_a_profile_name_that_cannot_be_one_is_refused_naming_it(tmp_path: Path, name: str) -> None:
    error = error_of(write(tmp_path, f'[agents."{name}"]\n'))
    assert error.key == "agents.profiles"
    assert f"invalid setting agents.profiles: {name!r} is not a profile name" in str(error)
    assert "(letters, digits, '_' and '-', 1 to 64)" in str(error)


# --- The environment --------------------------------------------------------------------------------------


def test_the_limits_may_be_set_from_the_environment_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[agents]\nmax_depth = 1\n[agents.reviewer]\nmodel = "m"\n')
    agents = load_settings(
        path,
        {
            "TURNKEEP_AGENTS__MAX_DEPTH": "2",
            "TURNKEEP_AGENTS__ENABLED": "false",
            "TURNKEEP_AGENTS__MAX_CHILDREN_PER_HOST": "5",
        },
    ).agents
    assert (agents.max_depth, agents.enabled, agents.max_children_per_host) == (2, False, 5)
    assert agents.profiles == {"reviewer": AgentProfile(model="m")}, "the file's profiles stay"


def test_a_limit_out_of_range_from_the_environment_names_the_variable() -> None:
    error = error_of(None, TURNKEEP_AGENTS__MAX_DEPTH="9")
    assert error.key == "agents.max_depth"
    assert "(from TURNKEEP_AGENTS__MAX_DEPTH)" in str(error)


def test_a_bad_environment_value_names_the_key_and_the_expected_type() -> None:
    error = error_of(None, TURNKEEP_AGENTS__MAX_CHILDREN_AT_ONCE="many")
    assert error.key == "agents.max_children_at_once"
    assert "expected int" in str(error)


# --- may_spawn --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "depth", "offered"),
    [
        (AgentsSettings(), 0, True),
        (AgentsSettings(), 1, False),
        (AgentsSettings(max_depth=3), 2, True),
        (AgentsSettings(max_depth=3), 3, False),
        (AgentsSettings(enabled=False), 0, False),
    ],
)
def test_the_agent_tool_is_offered_below_max_depth_when_enabled(
    settings: AgentsSettings, depth: int, offered: bool
) -> None:
    assert settings.may_spawn(depth) is offered


def test_direct_construction_validates_the_limits_and_the_profiles() -> None:
    with pytest.raises(ValueError, match=r"agents\.max_depth: must be at most 3"):
        AgentsSettings(max_depth=4)
    with pytest.raises(ValueError, match=r"agents\.reviewer\.deadline"):
        AgentsSettings(profiles={"reviewer": AgentProfile(deadline=-1.0)})
    with pytest.raises(ValueError, match=r"agents\.profiles: 'a b' is not a profile name"):
        AgentsSettings(profiles={"a b": AgentProfile()})
