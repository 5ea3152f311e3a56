"""What the command-line tests share: a store and the options that point a command at a provider."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sampler.fake import FakeProvider
from tests.shell.cli.test_cli import KEY_VAR

Options = Callable[[FakeProvider], list[str]]
"""Given the provider, the options that point a command at it, the store and a workspace."""


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def options(tmp_path: Path, store: Path) -> Options:
    """The options that point a command at the provider, a store and a workspace in tmp_path."""

    def make(provider: FakeProvider) -> list[str]:
        return [
            "--base-url",
            provider.base_url,
            "--api-key-env",
            KEY_VAR,
            "--store",
            str(store),
            "--workspace",
            str(tmp_path / "ws"),
        ]

    return make
