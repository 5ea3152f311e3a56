"""Specification of the configuration: defaults, the TOML file, environment overrides, and every error."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from sampler.retry import RetryPolicy
from shell.config import (
    ConfigError,
    DoomLoopRecoverySettings,
    LoopControlSettings,
    Settings,
    WindowSettings,
    load_settings,
)
from tool_bridge import Idempotency


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "turnkeep.toml"
    path.write_text(text)
    return path


def error_of(path: Path | None = None, **environ: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ)
    return caught.value


# --- Defaults ---------------------------------------------------------------------------------------------


def test_without_file_or_environment_every_setting_has_its_default():
    settings = load_settings(None, {})

    assert settings == Settings()
    assert settings.loop_control.max_steps_per_turn == 100
    assert settings.timeouts.connect == 10.0 and settings.timeouts.idle == 120.0
    assert (settings.provider.kind, settings.provider.base_url) == ("openai", "http://127.0.0.1:8765/v1")
    assert settings.provider.api_key_env is None and settings.provider.headers == {}
    assert (settings.window.context_window, settings.window.max_output_tokens) == (128000, 4096)
    assert settings.compaction.threshold == 0.85 and settings.compaction.max_cycles == 3
    assert settings.doom_loop == DoomLoopRecoverySettings(3, 3, 3, (), 12)
    assert (settings.tools.abort_grace, settings.tools.kill_after, settings.tools.output_cap) == (
        2.5,
        10.0,
        30000,
    )
    assert (settings.host.max_concurrent_turns, settings.host.sessions_default) == (16, 8)


def test_an_empty_file_is_the_defaults(tmp_path):
    assert load_settings(write(tmp_path, ""), {}) == Settings()


def test_the_store_path_has_the_home_directory_expanded():
    settings = load_settings(None, {})

    assert settings.store.path == os.path.expanduser("~/.local/share/turnkeep/sessions.db")
    assert not settings.store.path.startswith("~")
    assert settings.store.synchronous == "NORMAL"


# --- The file ---------------------------------------------------------------------------------------------


def test_values_from_the_file_are_used(tmp_path):
    path = write(
        tmp_path,
        """
        [loop_control]
        max_steps_per_turn = 7

        [provider]
        kind = "anthropic"
        base_url = "https://api.example.test"
        api_key_env = "EXAMPLE_API_KEY"
        headers = { "x-team" = "infra" }

        [tools]
        allow = ["read", "grep"]
        shell_timeout = 30

        [store]
        path = "/var/lib/turnkeep/s.db"
        synchronous = "FULL"
        """,
    )

    settings = load_settings(path, {})

    assert settings.loop_control.max_steps_per_turn == 7
    assert settings.provider.kind == "anthropic"
    assert settings.provider.api_key_env == "EXAMPLE_API_KEY"
    assert settings.provider.headers == {"x-team": "infra"}
    assert settings.tools.allow == ("read", "grep")
    assert settings.tools.shell_timeout == 30.0
    assert (settings.store.path, settings.store.synchronous) == ("/var/lib/turnkeep/s.db", "FULL")
    assert settings.store.group_commit is True
    assert settings.window == WindowSettings()


def test_the_file_can_be_named_by_turnkeep_config(tmp_path):
    path = write(tmp_path, "[host]\nsessions_default = 3\n")

    assert load_settings(None, {"TURNKEEP_CONFIG": str(path)}).host.sessions_default == 3


def test_a_missing_file_given_explicitly_is_an_error(tmp_path):
    error = error_of(tmp_path / "absent.toml")

    assert "absent.toml" in str(error) and "does not exist" in str(error)


def test_malformed_toml_is_an_error_giving_the_line(tmp_path):
    path = write(tmp_path, '[loop_control]\nmax_steps_per_turn = 5\n\nbroken = = "x"\n')

    error = error_of(path)

    assert "malformed TOML" in str(error)
    assert "line 4" in str(error)


# --- Errors name the key ----------------------------------------------------------------------------------


def test_a_value_of_the_wrong_type_names_the_key_and_the_expected_type(tmp_path):
    error = error_of(write(tmp_path, '[loop_control]\nmax_steps_per_turn = "many"\n'))

    assert error.key == "loop_control.max_steps_per_turn"
    assert "loop_control.max_steps_per_turn: expected int, got str" in str(error)
    assert "turnkeep.toml" in str(error)


def test_a_wrong_type_inside_a_list_names_the_item(tmp_path):
    error = error_of(write(tmp_path, "[tools]\nallow = [1]\n"))

    assert "tools.allow[0]: expected str, got int" in str(error)


def test_a_section_that_is_not_a_table_is_an_error(tmp_path):
    error = error_of(write(tmp_path, "retry = 3\n"))

    assert "retry: expected table, got int" in str(error)


def test_an_unknown_key_is_an_error_naming_it(tmp_path):
    error = error_of(write(tmp_path, "[loop_control]\nmax_step_per_turn = 5\n"))

    assert error.key == "loop_control.max_step_per_turn"
    assert "loop_control.max_step_per_turn: unknown key" in str(error)


def test_an_unknown_section_is_an_error_naming_it(tmp_path):
    error = error_of(write(tmp_path, "[loopcontrol]\nmax_steps_per_turn = 5\n"))

    assert "loopcontrol: unknown section" in str(error)


def test_an_invalid_choice_lists_the_choices(tmp_path):
    error = error_of(write(tmp_path, '[provider]\nkind = "gemini"\n'))

    assert "provider.kind: expected one of 'openai', 'anthropic', got 'gemini'" in str(error)


@pytest.mark.parametrize(
    ("toml", "key", "problem"),
    [
        ("[loop_control]\nmax_steps_per_turn = 0", "loop_control.max_steps_per_turn", ">= 1"),
        ("[retry]\njitter = 1.5", "retry.jitter", "<= 1"),
        ("[retry]\nretryable_statuses = [42]", "retry.retryable_statuses", "HTTP statuses"),
        ("[timeouts]\nidle = 0", "timeouts.idle", "> 0"),
        ("[compaction]\nthreshold = 0.0", "compaction.threshold", "> 0 and <= 1"),
        ("[compaction]\nthreshold = 1.2", "compaction.threshold", "> 0 and <= 1"),
        ("[compaction]\nmin_shrink = 1.0", "compaction.min_shrink", "< 1"),
        ("[doom_loop]\nhard_limit = 0", "doom_loop.hard_limit", "cannot be disabled"),
        (
            "[window]\nmax_output_tokens = 200000",
            "window.max_output_tokens",
            "less than window.context_window",
        ),
        ("[tools]\nshell_timeout = 900.0", "tools.shell_timeout", "tools.shell_max_timeout"),
        ("[tools]\nkill_after = 1.0", "tools.kill_after", "tools.abort_grace"),
        ('[tools]\ndeny = [""]', "tools.deny", "non-empty names"),
        ('[provider]\nbase_url = "ftp://x"', "provider.base_url", "http:// or https:// URL"),
        ("[host]\nmax_concurrent_turns = 0", "host.max_concurrent_turns", ">= 1"),
    ],
)
def test_a_value_out_of_range_is_an_error_naming_the_key(tmp_path, toml, key, problem):
    error = error_of(write(tmp_path, toml + "\n"))

    assert error.key == key
    assert f"{key}: " in str(error) and problem in str(error)


def test_a_key_pasted_where_an_environment_variable_name_belongs_is_refused_without_showing_it(tmp_path):
    key = "sk-ant-api03-Zx9Qm2Lk7Wv4Rt8Yp1Bn6Hc3Jd5Fg0Sa"

    error = error_of(write(tmp_path, f'[provider]\napi_key_env = "{key}"\n'))

    assert error.key == "provider.api_key_env"
    assert key not in str(error)


def test_direct_construction_validates_too():
    with pytest.raises(ValueError, match=r"loop_control\.max_steps_per_turn"):
        LoopControlSettings(max_steps_per_turn=-1)


# --- The environment --------------------------------------------------------------------------------------


def test_the_environment_overrides_the_file(tmp_path):
    path = write(tmp_path, '[loop_control]\nmax_steps_per_turn = 7\n[provider]\nmodel = "from-file"\n')

    settings = load_settings(
        path,
        {
            "TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN": "5",
            "TURNKEEP_PROVIDER__BASE_URL": "http://127.0.0.1:9000/v1",
            "PATH": "/usr/bin",
        },
    )

    assert settings.loop_control.max_steps_per_turn == 5
    assert settings.provider.base_url == "http://127.0.0.1:9000/v1"
    assert settings.provider.model == "from-file"


def test_environment_values_are_parsed_by_the_setting_type():
    settings = load_settings(
        None,
        {
            "TURNKEEP_COMPACTION__THRESHOLD": "0.5",
            "TURNKEEP_TOOLS__ALLOW": "read, grep,",
            "TURNKEEP_RETRY__RETRYABLE_STATUSES": "429,503",
            "TURNKEEP_PROVIDER__HEADERS": "x-team=infra,x-env=test",
            "TURNKEEP_PROVIDER__API_KEY_FILE": "",
            "TURNKEEP_STORE__SYNCHRONOUS": "FULL",
        },
    )

    assert settings.compaction.threshold == 0.5
    assert settings.tools.allow == ("read", "grep")
    assert settings.retry.retryable_statuses == (429, 503)
    assert settings.provider.headers == {"x-team": "infra", "x-env": "test"}
    assert settings.provider.api_key_file is None
    assert settings.store.synchronous == "FULL"


def test_a_bad_environment_value_names_the_key_the_variable_and_the_expected_type():
    error = error_of(TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN="lots")

    assert error.key == "loop_control.max_steps_per_turn"
    assert "TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN" in str(error)
    assert "expected int, got 'lots'" in str(error)


def test_an_environment_value_out_of_range_names_the_variable():
    error = error_of(TURNKEEP_DOOM_LOOP__HARD_LIMIT="0")

    assert error.key == "doom_loop.hard_limit"
    assert "TURNKEEP_DOOM_LOOP__HARD_LIMIT" in str(error)


@pytest.mark.parametrize(
    ("variable", "named"),
    [
        ("TURNKEEP_LOOPCONTROL__MAX_STEPS_PER_TURN", "no section 'loopcontrol'"),
        ("TURNKEEP_LOOP_CONTROL__MAX_STEPS", "no key loop_control.max_steps"),
        ("TURNKEEP_LOOP_CONTROL_MAX_STEPS_PER_TURN", "TURNKEEP_<SECTION>__<KEY>"),
    ],
)
def test_an_unknown_turnkeep_variable_is_an_error_naming_it(variable, named):
    with pytest.raises(ConfigError) as caught:
        load_settings(None, {variable: "5"})
    error = caught.value

    assert variable in str(error) and named in str(error)


def test_max_attempts_per_step_overrides_the_retry_attempts(tmp_path):
    path = write(tmp_path, "[retry]\nmax_attempts = 4\n")

    assert load_settings(path, {"TURNKEEP_MAX_ATTEMPTS_PER_STEP": "2"}).retry.max_attempts == 2
    assert load_settings(path, {"TURNKEEP_MAX_ATTEMPTS_PER_STEP": " "}).retry.max_attempts == 4


def test_one_setting_given_by_two_variables_is_an_error():
    error = error_of(TURNKEEP_MAX_ATTEMPTS_PER_STEP="2", TURNKEEP_RETRY__MAX_ATTEMPTS="3")

    assert error.key == "retry.max_attempts"
    assert "TURNKEEP_MAX_ATTEMPTS_PER_STEP" in str(error) and "TURNKEEP_RETRY__MAX_ATTEMPTS" in str(error)


def test_the_process_environment_is_read_by_default(monkeypatch):
    monkeypatch.setenv("TURNKEEP_HOST__PASSIVATE_AFTER", "30")

    assert load_settings().host.passivate_after == 30.0


# --- Using the settings -----------------------------------------------------------------------------------


def test_retry_policy_maps_the_retry_section():
    settings = load_settings(
        None,
        {
            "TURNKEEP_RETRY__BASE_DELAY": "0.1",
            "TURNKEEP_RETRY__RETRYABLE_STATUSES": "503",
            "TURNKEEP_MAX_ATTEMPTS_PER_STEP": "3",
        },
    )

    policy = settings.retry_policy()

    assert isinstance(policy, RetryPolicy)
    assert policy == RetryPolicy(max_attempts=3, base_delay=0.1, retryable_statuses=(503,))
    assert Settings().retry_policy() == RetryPolicy()


def test_settings_are_frozen_and_replacing_values_validates_them_again():
    settings = Settings()

    changed = settings.replace(loop_control=LoopControlSettings(max_steps_per_turn=3))

    assert changed.loop_control.max_steps_per_turn == 3
    assert settings.loop_control.max_steps_per_turn == 100
    with pytest.raises(AttributeError):
        settings.loop_control = LoopControlSettings()  # type: ignore[misc]
    assert msgspec.structs.replace(settings.window, context_window=10000).context_window == 10000
    with pytest.raises(ValueError, match=r"window\.max_output_tokens"):
        msgspec.structs.replace(settings.window, context_window=1000)


# --- The idempotency classes of tools ----------------------------------------------------------------------


def test_tools_idempotency_sets_classes_by_tool_name_even_of_tools_not_known_yet(tmp_path):
    path = write(
        tmp_path,
        '[tools.idempotency]\nshell = "read_only"\ngit__git_status = "idempotent"\n'
        'edit_file = "side_effecting"\n',
    )

    settings = load_settings(path, {})

    assert settings.tools.idempotency_classes() == {
        "shell": Idempotency.READ_ONLY,
        "git__git_status": Idempotency.IDEMPOTENT,
        "edit_file": Idempotency.SIDE_EFFECTING,
    }
    assert Settings().tools.idempotency_classes() == {}


def test_tools_idempotency_from_the_environment():
    settings = load_settings(None, {"TURNKEEP_TOOLS__IDEMPOTENCY": "shell=idempotent,fx__echo=read_only"})

    assert settings.tools.idempotency_classes() == {
        "shell": Idempotency.IDEMPOTENT,
        "fx__echo": Idempotency.READ_ONLY,
    }


def test_an_unknown_idempotency_class_names_the_key_and_the_allowed_values(tmp_path):
    error = error_of(write(tmp_path, '[tools.idempotency]\nfx__Echo-2 = "safe"\n'))

    assert error.key == "tools.idempotency.fx__Echo-2"
    assert (
        "tools.idempotency.fx__Echo-2: expected one of 'read_only', 'idempotent', 'side_effecting', "
        "got 'safe'"
    ) in str(error)


def test_an_unknown_idempotency_class_from_the_environment_names_the_variable():
    error = error_of(TURNKEEP_TOOLS__IDEMPOTENCY="shell=readonly")

    assert error.key == "tools.idempotency.shell"
    assert "got 'readonly'" in str(error) and "TURNKEEP_TOOLS__IDEMPOTENCY" in str(error)


@pytest.mark.parametrize(
    ("toml", "key", "problem"),
    [
        (
            '[tools.idempotency]\n"git.status" = "read_only"',
            "tools.idempotency.git.status",
            "not a tool name",
        ),
        (
            "[tools.idempotency]\nshell = true",
            "tools.idempotency.shell",
            "expected one of 'read_only', 'idempotent', 'side_effecting', got True",
        ),
        ('[tools]\nidempotency = "read_only"', "tools.idempotency", "expected table, got str"),
    ],
)
def test_a_tools_idempotency_entry_that_cannot_be_one_names_the_key(tmp_path, toml, key, problem):
    error = error_of(write(tmp_path, toml + "\n"))

    assert error.key == key
    assert f"{key}: {problem}" in str(error)


def test_the_models_a_session_may_switch_to_come_after_the_configured_one_each_once(tmp_path):
    settings = load_settings(write(tmp_path, '[provider]\nmodel = "a"\nmodels = ["b", "a", "c"]\n'), {})
    assert settings.provider.model_choices == ["a", "b", "c"]
    assert error_of(write(tmp_path, '[provider]\nmodels = [""]\n')).key == "provider.models"
