"""The environment of a tool's command: the host's minus every credential, shaped by the policy."""

from __future__ import annotations

import pytest

from tool_bridge.environment import (
    CORE_VARIABLES,
    EnvPolicy,
    EnvPolicyError,
    describe_env_policy,
    is_secret_name,
    tool_environment,
)

HOST = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "LANG": "C.UTF-8",
    "TERM": "xterm",
    "USER": "u",
    "SHELL": "/bin/bash",
    "TMPDIR": "/tmp",
    "EDITOR": "vi",
    "AWS_REGION": "eu-west-1",
    "AWS_PROFILE": "dev",
    "OPENAI_API_KEY": "sk-live-1",
    "MY_PROVIDER_CRED": "named-by-the-provider",
    "github_token": "ghp-2",
    "DB_PASSWORD": "pw",
    "Client_Secret": "s",
    "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
    "SSH_AUTH_SOCK": "/run/agent",
    "KEYBOARD": "us",
}


def test_the_default_keeps_the_host_environment_minus_every_credential() -> None:
    env = tool_environment(HOST, secret_names=["MY_PROVIDER_CRED"])
    assert env == {
        name: value
        for name, value in HOST.items()
        if name
        not in {
            "OPENAI_API_KEY",
            "MY_PROVIDER_CRED",
            "github_token",
            "DB_PASSWORD",
            "Client_Secret",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "KEYBOARD",
        }
    }


@pytest.mark.parametrize(
    "name", ["API_KEY", "api_key", "X_SECRET_Y", "Token", "PGPASSWORD", "AZURE_CREDENTIALS", "KEYRING"]
)
def test_a_name_containing_a_credential_word_in_any_case_is_a_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "AWS_REGION", "EDITOR", "PASS", "SEC"])
def test_ordinary_names_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


def test_the_provider_variables_are_dropped_whatever_they_are_called_and_in_any_case() -> None:
    env = tool_environment({"PROVIDER_AUTH": "x", "EDITOR": "vi"}, secret_names=["provider_auth"])
    assert env == {"EDITOR": "vi"}


def test_core_keeps_only_the_core_variables() -> None:
    env = tool_environment(HOST, EnvPolicy(inherit="core"))
    assert env == {name: HOST[name] for name in CORE_VARIABLES}


def test_none_starts_empty_and_set_still_applies() -> None:
    assert tool_environment(HOST, EnvPolicy(inherit="none")) == {}
    assert tool_environment(HOST, EnvPolicy(inherit="none", assign={"CI": "1"})) == {"CI": "1"}


def test_exclude_drops_the_variables_matching_its_globs_case_insensitively() -> None:
    env = tool_environment(HOST, EnvPolicy(exclude=("aws_*", "EDITOR")))
    assert not {"AWS_REGION", "AWS_PROFILE", "EDITOR"} & set(env)
    assert "PATH" in env


def test_include_only_keeps_the_matching_variables_but_never_a_credential() -> None:
    env = tool_environment(HOST, EnvPolicy(include_only=("PATH", "AWS_*", "OPENAI_*")))
    assert env == {"PATH": HOST["PATH"], "AWS_REGION": "eu-west-1", "AWS_PROFILE": "dev"}


def test_set_comes_last_so_it_can_hand_a_command_a_variable_on_purpose() -> None:
    policy = EnvPolicy(inherit="core", exclude=("PATH",), assign={"PATH": "/opt/bin", "GH_TOKEN": "for-gh"})
    env = tool_environment(HOST, policy)
    assert env["PATH"] == "/opt/bin" and env["GH_TOKEN"] == "for-gh"


def test_the_host_mapping_is_not_changed() -> None:
    host = dict(HOST)
    tool_environment(host, EnvPolicy(assign={"NEW": "1"}))
    assert host == HOST


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"inherit": "some"}, "inherit"),
        ({"exclude": ("",)}, "exclude"),
        ({"exclude": "AWS_*"}, "exclude"),
        ({"include_only": ("A B",)}, "include_only"),
        ({"assign": {"1BAD": "x"}}, "set"),
        ({"assign": {"A=B": "x"}}, "set"),
        ({"assign": {"OK": "nul\0inside"}}, "set"),
    ],
)
def test_an_invalid_policy_is_refused_naming_the_option(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(EnvPolicyError) as caught:
        EnvPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_a_refused_set_value_is_not_shown() -> None:
    with pytest.raises(EnvPolicyError) as caught:
        EnvPolicy(assign={"TOKEN": "hunter2-secret\0"})
    assert "hunter2" not in str(caught.value)


def test_the_description_names_the_options_but_no_value() -> None:
    text = describe_env_policy(EnvPolicy(inherit="core", exclude=("AWS_*",), assign={"GH_TOKEN": "v-123"}))
    assert "core variables only" in text and "*KEY*" in text and "AWS_*" in text and "GH_TOKEN" in text
    assert "v-123" not in text
    assert describe_env_policy().startswith("the host's environment minus credentials")
