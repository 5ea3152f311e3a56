"""The settings a test host runs with: the embedded provider, a store in the test's folder, quick retries."""

from __future__ import annotations

from pathlib import Path

from sampler.fake import FakeProvider
from shell.config import Settings, load_settings

__all__ = ["settings_for"]


def settings_for(provider: FakeProvider, directory: Path, **env: str) -> Settings:
    """Settings for a host talking to ``provider`` with its store in ``directory``; ``env`` adds or
    overrides ``TURNKEEP_*`` variables."""
    return load_settings(
        environ={
            "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
            "TURNKEEP_PROVIDER__MODEL": "fake-model",
            "TURNKEEP_STORE__PATH": str(directory / "store.db"),
            "TURNKEEP_RETRY__BASE_DELAY": "0.01",
            "TURNKEEP_TIMEOUTS__IDLE": "10",
            **env,
        }
    )
