"""The ``[serve]`` section: defaults, the file and the environment, and values refused at start."""

from __future__ import annotations

import pytest

from shell.config import ConfigError, ServeSettings, load_settings


def test_the_defaults_listen_on_loopback_with_bounded_streams():
    serve = load_settings(environ={}).serve
    assert serve == ServeSettings()
    assert (serve.host, serve.port, serve.workspace_root, serve.cors_origins) == ("127.0.0.1", 8787, None, [])
    assert serve.max_body_bytes > 0 and serve.stream_buffer_bytes > 0 and serve.write_timeout > 0


def test_the_file_and_the_environment_set_it(tmp_path):
    config = tmp_path / "turnkeep.toml"
    config.write_text('[serve]\nport = 9000\nworkspace_root = "/srv/work"\ncors_origins = ["http://a"]\n')
    serve = load_settings(config, environ={"TURNKEEP_SERVE__WRITE_TIMEOUT": "2.5"}).serve
    assert (serve.port, serve.workspace_root, serve.cors_origins, serve.write_timeout) == (
        9000,
        "/srv/work",
        ["http://a"],
        2.5,
    )


def test_the_token_variable_is_not_a_setting_and_is_not_refused():
    assert load_settings(environ={"TURNKEEP_SERVE_TOKEN": "x" * 20}).serve == ServeSettings()


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("TURNKEEP_SERVE__PORT", "70000", "serve.port"),
        ("TURNKEEP_SERVE__PORT", "-1", "serve.port"),
        ("TURNKEEP_SERVE__MAX_BODY_BYTES", "0", "serve.max_body_bytes"),
        ("TURNKEEP_SERVE__STREAM_BUFFER_BYTES", "10", "serve.stream_buffer_bytes"),
        ("TURNKEEP_SERVE__WRITE_TIMEOUT", "0", "serve.write_timeout"),
        ("TURNKEEP_SERVE__COLOUR", "red", "serve.colour"),
    ],
)
def test_wrong_values_are_refused_naming_the_key(variable, value, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(environ={variable: value})
