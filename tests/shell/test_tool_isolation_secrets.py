"""Known secrets never leave: every secret value the host holds is replaced by a marker naming it, in text,
in events, and in what the store writes — also after a credential is refreshed or rotated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sampler.fake import FakeProvider, Script, TokenExpiry
from shell import events as ev
from shell._secrets import (
    KNOWN_SECRETS,
    MIN_SECRET_LENGTH,
    KnownSecrets,
    redact,
    redact_known,
    redact_known_struct,
)
from shell._tool_isolation import watch_host_secrets
from shell.config import SERVE_TOKEN_ENV, load_settings
from shell.credentials import OAuthCredential, StaticKey, refresh_failure
from shell.store import SessionStore


def test_a_known_value_is_replaced_by_a_marker_naming_it() -> None:
    known = KnownSecrets()
    known.add("OPENAI_API_KEY", "plain-looking-value-123")
    assert known.redact("x plain-looking-value-123 y") == "x [redacted:OPENAI_API_KEY] y"
    assert known.redact("nothing here") == "nothing here"


def test_every_occurrence_goes_and_a_longer_secret_is_replaced_before_one_it_contains() -> None:
    known = KnownSecrets()
    known.add("SHORT", "abcdefgh12")
    known.add("LONG", "abcdefgh12-and-more")
    assert known.redact("abcdefgh12-and-more abcdefgh12 abcdefgh12") == (
        "[redacted:LONG] [redacted:SHORT] [redacted:SHORT]"
    )


def test_values_too_short_or_blank_are_not_treated_as_secrets() -> None:
    known = KnownSecrets()
    for value in (None, "", "   ", "x" * (MIN_SECRET_LENGTH - 1)):
        known.add("TINY", value)
    assert known.names() == []
    known.add("OK", "  " + "y" * MIN_SECRET_LENGTH + "\n")
    assert known.redact("y" * MIN_SECRET_LENGTH) == "[redacted:OK]"


def test_a_marker_name_keeps_json_valid() -> None:
    known = KnownSecrets()
    known.add('we"ird\\name', "secret-value-0001")
    text = json.dumps({"out": "secret-value-0001"})
    assert json.loads(known.redact(text)) == {"out": "[redacted:we_ird_name]"}


def test_a_watched_source_is_read_before_each_redaction_and_old_values_stay_secret() -> None:
    known = KnownSecrets()
    current = {"token": "access-token-0001"}
    watch = known.watch("ACCESS", lambda: current["token"])
    current["token"] = "access-token-0002"
    assert known.redact("access-token-0001 access-token-0002") == "[redacted:ACCESS] [redacted:ACCESS]"
    watch.close()
    current["token"] = "access-token-0003"
    assert known.redact("access-token-0003") == "access-token-0003"
    assert known.redact("access-token-0001") == "[redacted:ACCESS]"


def test_occurs_in_searches_text_and_bytes() -> None:
    known = KnownSecrets()
    known.add("K", "needle-in-bytes-42")
    assert known.occurs_in(b"..needle-in-bytes-42..") and known.occurs_in("needle-in-bytes-42")
    assert not known.occurs_in(b"hay") and not known.occurs_in("hay")


def test_redact_applies_the_known_secrets_then_the_patterns_and_is_idempotent() -> None:
    KNOWN_SECRETS.add("TEST_REDACT_KEY", "no-pattern-would-catch-this-9931")
    text = "no-pattern-would-catch-this-9931 and sk-abcdefghijklmnopqrstu"
    once = redact(text)
    assert once == "[redacted:TEST_REDACT_KEY] and [redacted]"
    assert redact(once) == once
    assert redact_known("api_key=abcdefgh1234") == "api_key=abcdefgh1234", "tool output keeps its shape"


def test_an_event_holding_a_known_secret_is_copied_with_it_redacted_and_a_clean_one_is_kept() -> None:
    KNOWN_SECRETS.add("TEST_EVENT_KEY", "event-secret-value-5521")
    clean = ev.ToolCallStarted("s", 1, "c1", "shell", '{"command": "ls"}')
    assert redact_known_struct(clean) is clean
    dirty = ev.ToolCallStarted("s", 1, "c1", "shell", '{"command": "echo event-secret-value-5521"}')
    cleaned = redact_known_struct(dirty)
    assert cleaned == ev.ToolCallStarted(
        "s", 1, "c1", "shell", '{"command": "echo [redacted:TEST_EVENT_KEY]"}'
    )


def test_a_value_that_is_not_an_event_is_passed_on_as_it_is() -> None:
    KNOWN_SECRETS.add("TEST_ODD_KEY", "odd-secret-value-1234")
    odd = object()
    assert redact_known_struct(odd) is odd
    assert redact_known_struct("odd-secret-value-1234") == "[redacted:TEST_ODD_KEY]"


def test_the_store_file_never_holds_a_known_secret(tmp_path: Path) -> None:
    KNOWN_SECRETS.add("TEST_STORE_KEY", "stored-secret-value-7781")
    path = tmp_path / "s.db"
    with SessionStore.open(path) as store:
        store.create_session("s1", workspace=str(tmp_path), model="m")
        store.append_event(
            "s1", 1, ev.ToolCallFinished("s1", 1, "c", "shell", False, "ok", "stored-secret-value-7781")
        )
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"stored-secret-value-7781" not in data
    assert b"[redacted:TEST_STORE_KEY]" in data


def test_the_host_knows_its_credential_variables_the_serve_token_and_token_like_variables() -> None:
    settings = load_settings(environ={"TURNKEEP_PROVIDER__API_KEY_ENV": "HOSTKEY_A"})
    environ = {
        "HOSTKEY_A": "host-api-key-value-1",
        SERVE_TOKEN_ENV: "serve-token-value-2",
        "SOME_SERVICE_TOKEN": "service-token-value-3",
        "SSH_KEY_PATH": "/home/u/.ssh/id_ed25519",
        "KEYBOARD_LAYOUT": "us intl",
    }
    watches = watch_host_secrets(settings, StaticKey("HOSTKEY_A", environ=environ), environ)
    try:
        text = " ".join(environ.values())
        assert redact_known(text) == (
            "[redacted:HOSTKEY_A] [redacted:TURNKEEP_SERVE_TOKEN] [redacted:SOME_SERVICE_TOKEN]"
            " /home/u/.ssh/id_ed25519 us intl"
        )
    finally:
        for watch in watches:
            watch.close()


@pytest.mark.trio
async def test_refreshed_and_rotated_oauth_tokens_are_known_as_soon_as_they_are_in_use() -> None:
    expiry = TokenExpiry(refresh_token="first-refresh-token-01", rotate_refresh_token=True)
    with FakeProvider(Script.echo(), token_expiry=expiry) as provider:
        settings = load_settings(
            environ={
                "TURNKEEP_PROVIDER__OAUTH_TOKEN_URL": provider.token_url,
                "TURNKEEP_PROVIDER__REFRESH_TOKEN_ENV": "HOST_REFRESH",
            }
        )
        credential = OAuthCredential(provider.token_url, "first-refresh-token-01")
        watches = watch_host_secrets(settings, credential, {"HOST_REFRESH": "first-refresh-token-01"})
        try:
            assert await refresh_failure(credential) is None
            access, rotated = credential.current(), credential.refresh_token()
            assert access and rotated != "first-refresh-token-01"
            text = f"{access} {rotated} first-refresh-token-01"
            assert redact_known(text) == (
                "[redacted:OAUTH_ACCESS_TOKEN] [redacted:HOST_REFRESH] [redacted:HOST_REFRESH]"
            )
        finally:
            for watch in watches:
                watch.close()
