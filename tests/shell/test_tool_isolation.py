"""Whole turns against the embedded provider in which the model goes looking for secrets and for what lies
outside its workspace: it runs ``env``, reads the store, lists another session's workspace, reads
``~/.netrc``, opens a TCP connection to the host, and prints a file holding the API key.

With the sandbox it gets nothing secret and nothing outside its workspace; with the sandbox off the
environment policy and the redaction still keep every secret of the host out. Neither the model, the
events nor the store's database file (searched byte by byte) ever hold a secret value.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sampler.fake import Conversation, FakeProvider, FinalAnswer, Script, ToolStep
from shell import events as ev
from shell.config import Settings, load_settings
from shell.facade import Host
from tests.tool_bridge._sandbox import usable_sandbox

SECRETS = {
    "MY_PROVIDER_KEY": "zq7-provider-credential-8842-abcdef",
    "TURNKEEP_SERVE_TOKEN": "serve-token-5531-qwerty",
    "GITHUB_TOKEN": "gh-like-token-7719-zxcvb",
}
NETRC_PASSWORD = "netrc-password-3307"
THEIR_FILE = "another-session-file-6641"


@dataclass
class Site:
    """A host's files outside /tmp: a fake home, two sessions' workspaces and the store beside them."""

    base: Path
    home: Path
    ours: Path
    theirs: Path
    store: Path
    config: Path


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    cache = Path.home() / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="turnkeep-isolation-", dir=cache)).resolve()
    site = Site(base, base / "home", base / "ours", base / "theirs", base / "sessions.db", base / "tk.toml")
    for path in (site.home, site.ours, site.theirs):
        path.mkdir()
    (site.home / ".netrc").write_text(f"machine example.com login u password {NETRC_PASSWORD}\n")
    (site.theirs / "notes.txt").write_text(THEIR_FILE + "\n")
    key, serve = SECRETS["MY_PROVIDER_KEY"], SECRETS["TURNKEEP_SERVE_TOKEN"]
    (site.ours / "leaky.txt").write_text(f"key={key}\nserve {serve}\n")
    monkeypatch.setenv("HOME", str(site.home))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    try:
        yield site
    finally:
        shutil.rmtree(base, ignore_errors=True)


class Snoop:
    """A model that runs the snooping commands, then answers; it keeps the tool results it was sent."""

    def __init__(self, site: Site, port: int) -> None:
        self.seen: list[str] = []
        self.commands = [
            "env",
            f"cat {site.store}",
            f"ls -A {site.theirs}; cat {site.theirs}/notes.txt",
            "cat ~/.netrc",
            f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected-to-host",
            "cat leaky.txt",
        ]

    def script(self) -> Script:
        step = ToolStep([("shell", {"command": command}) for command in self.commands])

        def respond(conversation: Conversation) -> ToolStep | FinalAnswer:
            if conversation.tool_rounds == 0:
                return step
            self.seen.extend(conversation.tool_results)
            return FinalAnswer("looked around")

        return Script(respond, name="snoop")


def settings(site: Site, provider: FakeProvider, mode: str) -> Settings:
    site.config.write_text(
        f"""
[provider]
base_url = "{provider.base_url}"
model = "fake-model"
api_key_env = "MY_PROVIDER_KEY"
[store]
path = "{site.store}"
[retry]
base_delay = 0.01
[tools]
allow = ["shell"]
[tools.sandbox]
mode = "{mode}"
"""
    )
    return load_settings(site.config, environ={})


@dataclass
class Turn:
    results: list[str]
    """The tool results as the model was sent them."""
    events: list[Any]
    database: bytes
    connections: int


def snoop(site: Site, mode: str) -> Turn:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    model = Snoop(site, listener.getsockname()[1])
    with listener, FakeProvider(model.script()) as provider:
        with Host(settings(site, provider, mode)) as host:
            host.open(site.theirs, session_id="theirs")
            events = list(host.open(site.ours, session_id="ours").prompt("look around"))
        connections = 0
        try:
            while listener.accept():
                connections += 1
        except BlockingIOError:
            pass
    database = b"".join(
        path.read_bytes() for path in site.base.iterdir() if path.name.startswith("sessions.db")
    )
    return Turn(model.seen, events, database, connections)


def assert_no_secret_anywhere(turn: Turn) -> None:
    assert isinstance(turn.events[-1], ev.TurnCompleted), turn.events[-1]
    assert len(turn.results) == 6, turn.results
    shown = "\n".join(turn.results)
    events = msgspec.json.encode(turn.events).decode()
    for name, value in SECRETS.items():
        assert value not in shown, f"the model saw {name}"
        assert value not in events, f"an event holds {name}"
        assert value.encode() not in turn.database, f"the database holds {name}"
    # The file holding the key reached the model with each secret replaced by a marker naming it.
    leaky = turn.results[5]
    assert "key=[redacted:MY_PROVIDER_KEY]" in leaky and "serve [redacted:TURNKEEP_SERVE_TOKEN]" in leaky
    assert b"[redacted:MY_PROVIDER_KEY]" in turn.database
    env = turn.results[0]
    assert "PATH=" in env
    assert not any(f"{name}=" in env for name in SECRETS)


def test_in_the_sandbox_the_model_gets_nothing_secret_and_nothing_outside_its_workspace(site: Site) -> None:
    usable_sandbox()
    turn = snoop(site, "required")
    assert_no_secret_anywhere(turn)
    shown = "\n".join(turn.results)
    assert NETRC_PASSWORD not in shown and THEIR_FILE not in shown
    assert "SQLite format 3" not in shown
    store, theirs, netrc, tcp = turn.results[1:5]
    assert "sessions.db: No such file or directory" in store
    assert "No such file or directory" in theirs
    assert ".netrc: No such file or directory" in netrc
    assert "connected-to-host" not in tcp and turn.connections == 0
    assert NETRC_PASSWORD.encode() not in turn.database and THEIR_FILE.encode() not in turn.database


def test_with_the_sandbox_off_the_environment_policy_and_the_redaction_still_keep_every_secret_out(
    site: Site,
) -> None:
    turn = snoop(site, "off")
    assert_no_secret_anywhere(turn)
    # Unconfined, the command does reach beyond the workspace: only the secrets' values are kept out.
    assert NETRC_PASSWORD in turn.results[3]
    assert "connected-to-host" in turn.results[4]
