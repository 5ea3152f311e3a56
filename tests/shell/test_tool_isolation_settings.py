"""``[tools.env]`` and ``[tools.sandbox]``: read and checked with the rest of the configuration (file and
variables), and turned by a host into the environment and the sandbox of its shell commands."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from shell._tool_isolation import tool_isolation
from shell.config import SERVE_TOKEN_ENV, ConfigError, Settings, load_settings
from tool_bridge import EnvPolicy, SandboxProbe

UNUSABLE = SandboxProbe(False, None, "bwrap is not installed")


def settings_from(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "turnkeep.toml"
    path.write_text(text)
    return load_settings(path, environ={})


def test_by_default_credentials_are_dropped_and_the_sandbox_is_used_where_it_works() -> None:
    tools = load_settings(environ={}).tools
    assert tools.env.policy() == EnvPolicy()
    assert (tools.sandbox.mode, tools.sandbox.network) == ("auto", False)


def test_the_tables_are_read_into_an_environment_policy_and_a_sandbox(tmp_path: Path) -> None:
    settings = settings_from(
        tmp_path,
        """
[tools.env]
inherit = "core"
exclude = ["AWS_*"]
include_only = ["PATH", "HOME"]
set = { CI = "1" }
[tools.sandbox]
mode = "required"
network = true
""",
    )
    assert settings.tools.env.policy() == EnvPolicy("core", ("AWS_*",), ("PATH", "HOME"), {"CI": "1"})
    assert (settings.tools.sandbox.mode, settings.tools.sandbox.network) == ("required", True)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('[tools.env]\ninherit = "some"', "tools.env.inherit"),
        ('[tools.env]\nexclude = [""]', "tools.env.exclude"),
        ('[tools.env]\nset = { "1X" = "v" }', "tools.env.set"),
        ('[tools.env]\nunset = ["A"]', "tools.env.unset"),
        ('[tools.sandbox]\nmode = "sometimes"', "tools.sandbox.mode"),
        ('[tools.sandbox]\nnetwork = "yes"', "tools.sandbox.network"),
    ],
)
def test_a_wrong_value_is_refused_naming_the_key(tmp_path: Path, table: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from(tmp_path, table)
    assert caught.value.key == key
    assert key in str(caught.value)


def test_the_host_environment_for_tools_leaves_out_the_provider_credentials(tmp_path: Path) -> None:
    settings = settings_from(
        tmp_path, '[provider]\napi_key_env = "PROVIDER_CRED"\n[tools.sandbox]\nmode = "off"'
    )
    environ = {"PATH": "/bin", "PROVIDER_CRED": "c", SERVE_TOKEN_ENV: "s", "EDITOR": "vi"}
    isolation = tool_isolation(settings, environ, store_path=None, workspaces=list)
    assert isolation.env == {"PATH": "/bin", "EDITOR": "vi"}
    assert isolation.sandbox.verdict == "unsandboxed"


def test_the_home_the_store_and_the_other_workspaces_are_hidden(tmp_path: Path) -> None:
    settings = load_settings(environ={})
    store = tmp_path / "data" / "sessions.db"
    others = [tmp_path / "a", tmp_path / "b"]
    isolation = tool_isolation(
        settings, {"HOME": "/home/u"}, store_path=store, workspaces=lambda: others, probe=UNUSABLE
    )
    hidden = list(isolation.sandbox.hidden())
    assert hidden[:3] == ["/home/u", str(store.parent), str(store)]
    assert f"{store}-wal" in hidden and hidden[-2:] == [str(p) for p in others]


def test_auto_without_a_sandbox_warns_once_at_start_and_says_so_in_its_description(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="turnkeep.shell"):
        isolation = tool_isolation(
            load_settings(environ={}), {}, store_path=None, workspaces=list, probe=UNUSABLE
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["shell commands run without a sandbox: bwrap is not installed"]
    line = isolation.describe()
    assert line.startswith("tools: sandbox: none, shell commands run unconfined: bwrap is not installed")
    assert "environment: the host's environment minus credentials" in line


def test_the_nested_tables_are_set_by_variables_too() -> None:
    tools = load_settings(
        environ={
            "TURNKEEP_TOOLS__SANDBOX__MODE": "off",
            "TURNKEEP_TOOLS__SANDBOX__NETWORK": "yes",
            "TURNKEEP_TOOLS__ENV__INHERIT": "none",
            "TURNKEEP_TOOLS__ENV__EXCLUDE": "AWS_*, GCP_*",
            "TURNKEEP_TOOLS__ENV__SET": "CI=1,LANG=C",
        }
    ).tools
    assert (tools.sandbox.mode, tools.sandbox.network) == ("off", True)
    assert tools.env.policy() == EnvPolicy("none", ("AWS_*", "GCP_*"), (), {"CI": "1", "LANG": "C"})


@pytest.mark.parametrize(
    ("environ", "key", "words"),
    [
        ({"TURNKEEP_TOOLS__SANDBOX__MODE": "maybe"}, "tools.sandbox.mode", "expected one of 'auto'"),
        ({"TURNKEEP_TOOLS__SANDBOX__NOPE": "1"}, "tools.sandbox.nope", "no key tools.sandbox.nope"),
        ({"TURNKEEP_TOOLS__SHELL_TIMEOUT__X": "1"}, "tools.shell_timeout.x", "no key"),
        ({"TURNKEEP_TOOLS__SANDBOX": "off"}, "tools.sandbox", "expected table"),
        ({"TURNKEEP_TOOLS__ENV__INCLUDE_ONLY": "A B"}, "tools.env.include_only", "globs"),
    ],
)
def test_a_wrong_variable_for_a_nested_table_is_refused_naming_the_key(
    environ: dict[str, str], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=environ)
    assert caught.value.key == key and words in str(caught.value)
