"""Fixtures of the group-commit specifications: a store target of each backend."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a store of each backend is: a new file, or a URL with a fresh schema."""
    if request.param == "sqlite":
        return tmp_path / "sessions.db"
    return str(request.getfixturevalue("postgres_store_url"))
