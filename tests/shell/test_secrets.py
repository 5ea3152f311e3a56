"""Specification of secret redaction: what counts as a secret, what is left alone, and log records."""

from __future__ import annotations

import json
import logging
import sys

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shell._secrets import KNOWN_SECRETS, REDACTED, RedactingFilter, may_hold_secret, redact

ANTHROPIC_KEY = "sk-ant-api03-Zx9Qm2Lk7Wv4Rt8Yp1Bn6Hc3Jd5Fg0Sa"
OPENAI_KEY = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"my key is {ANTHROPIC_KEY}, thanks", ANTHROPIC_KEY),
        (f"OPENAI_API_KEY={OPENAI_KEY}", OPENAI_KEY),
        ("Authorization: Bearer 4f9c2e1ab77d4c0e9a31", "4f9c2e1ab77d4c0e9a31"),
        ("curl -H 'x-api-key: k3y-5f1e-77aa-91bc' https://api", "k3y-5f1e-77aa-91bc"),
        ("client = Client(api_key=hunter2hunter2)", "hunter2hunter2"),
        ('{"access_token": "ya29.a0AfH6SMBx123"}', "ya29.a0AfH6SMBx123"),
        (f"token: {JWT}", JWT),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("push with ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ],
)
def test_a_recognised_secret_is_replaced(text, secret):
    redacted = redact(text)

    assert secret not in redacted
    assert REDACTED in redacted


def test_the_name_of_what_was_redacted_is_kept():
    assert redact("x-api-key: k3y-5f1e-77aa-91bc") == "x-api-key: [redacted]"
    assert redact("Authorization: Bearer 4f9c2e1ab77d4c0e9a31") == "Authorization: Bearer [redacted]"
    assert redact("api_key=hunter2hunter2&page=2") == "api_key=[redacted]&page=2"


@pytest.mark.parametrize(
    "text",
    [
        "import sklearn; sk-learn is a library",
        "api_key = os.environ",
        "api_key: $OPENAI_API_KEY",
        "send a Bearer token in the header",
        "The API key is needed to call the model",
        "def bearer(): return 42",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_redaction_is_idempotent():
    text = f"x-api-key: {ANTHROPIC_KEY} and Bearer 4f9c2e1ab77d4c0e9a31 and {JWT}"

    once = redact(text)

    assert redact(once) == once


def test_redacting_json_text_keeps_it_valid_json():
    document = json.dumps({"args": json.dumps({"headers": {"x-api-key": OPENAI_KEY}}), "key": ANTHROPIC_KEY})

    redacted = redact(document)

    decoded = json.loads(redacted)
    assert OPENAI_KEY not in redacted and ANTHROPIC_KEY not in redacted
    assert decoded["key"] == REDACTED


def make_record(msg: str, *args: object, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("t", logging.INFO, __file__, 1, msg, args or None, exc_info)


def test_the_logging_filter_redacts_the_formatted_message_and_keeps_the_record():
    record = make_record("calling with %s and %d retries", f"Bearer {OPENAI_KEY}", 3)

    kept = RedactingFilter().filter(record)

    assert kept is True
    assert record.getMessage() == "calling with Bearer [redacted] and 3 retries"


def test_the_logging_filter_redacts_a_traceback():
    try:
        raise RuntimeError(f"rejected key {ANTHROPIC_KEY}")
    except RuntimeError:
        record = make_record("request failed", exc_info=sys.exc_info())

    RedactingFilter().filter(record)
    output = logging.Formatter().format(record)

    assert ANTHROPIC_KEY not in output
    assert "rejected key [redacted]" in output


def test_a_handler_with_the_filter_never_emits_a_secret(caplog):
    logger = logging.getLogger("tests.shell.secrets")
    caplog.handler.addFilter(RedactingFilter())
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            logger.info("retrying with x-api-key: %s", ANTHROPIC_KEY)
    finally:
        caplog.handler.filters.clear()

    assert ANTHROPIC_KEY not in caplog.text
    assert "x-api-key: [redacted]" in caplog.text


# -- may_hold_secret: the store's check that lets a document be kept as it is ------------------------------

_SECRETISH = [
    ANTHROPIC_KEY,
    OPENAI_KEY,
    JWT,
    "Authorization: Bearer 4f9c2e1ab77d4c0e9a31",
    "x-api-key: k3y-5f1e-77aa-91bc",
    'api_key="hunter2hunter2"',
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abc",
    "AIza" + "x" * 35,
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "api_\u212aey=hunter2hunter2",
    "bearer\n4f9c2e1ab77d4c0e9a31",
    "\u017fession_token: abcdef123456",
    "\u0130d_token=abcd12345678",
    "\u0131d-token=abcd12345678",
    "Client-Secret: s3cr3tvalue99",
]


@pytest.mark.parametrize("secret", _SECRETISH)
def test_a_document_holding_a_recognised_secret_anywhere_may_hold_one(secret):
    document = {"role": "tool", "content": ["ok", {"nested": f'say "{secret}"\\ then'}]}
    assert redact(f'say "{secret}"\\ then') != f'say "{secret}"\\ then'
    assert may_hold_secret(msgspec.json.encode(document))


def test_a_known_secret_with_quotes_and_backslashes_is_found_as_json_writes_it():
    KNOWN_SECRETS.add("ODD_TOKEN", 'pa"ss\\word-1234')
    try:
        assert may_hold_secret(msgspec.json.encode({"text": 'the token pa"ss\\word-1234 leaked'}))
    finally:
        KNOWN_SECRETS.clear()


@given(
    st.recursive(
        st.text(
            alphabet=st.sampled_from(
                list('abkeyAPI_-:= "\\\n\u212a\u0130\u0131\u017fBearskKxotenIzaghpdcs0123456789')
            ),
            max_size=40,
        ),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=12,
    )
)
@settings(max_examples=400, deadline=None)
def test_a_document_said_not_to_hold_a_secret_is_left_alone_by_redaction(document):
    if may_hold_secret(msgspec.json.encode(document)):
        return
    assert all(redact(text) == text for text in _strings(document))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
