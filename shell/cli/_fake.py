"""``--fake NAME``: a scenario's provider started in-process, and the host settings that point at it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgspec

from sampler.fake import FakeProvider, HostNeeds, Scenario, UnknownScenario, scenario

from ..config import Settings
from ..credentials import CredentialProvider, OAuthCredential
from ._settings import CliUsageError

__all__ = ["FakeRun", "fake_credentials", "fake_environ", "pointed", "scenario_named", "started"]

_CLEARED = ("TURNKEEP_PROVIDER__", "TURNKEEP_CONFIG")
"""Variables the fake run drops from the environment: the provider is the scenario's, nothing else."""


def scenario_named(name: str) -> Scenario:
    """The scenario called ``name``. Raises :class:`CliUsageError` naming every scenario otherwise."""
    try:
        return scenario(name)
    except UnknownScenario as error:
        raise CliUsageError(str(error)) from None


def fake_environ(needs: HostNeeds, base_url: str, store: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the ``TURNKEEP_*`` variables that point a host at a scenario's provider on
    ``base_url`` with the store ``store`` and the scenario's window and back-off.

    The provider variables of ``environ`` are dropped (no key is sent, none is needed); the options of the
    command line still beat what is returned here.
    """
    kept = {name: value for name, value in environ.items() if not name.startswith(_CLEARED)}
    values: dict[str, str] = {
        "TURNKEEP_PROVIDER__BASE_URL": base_url,
        "TURNKEEP_PROVIDER__MODEL": "fake-model",
        "TURNKEEP_STORE__PATH": str(store),
    }
    optional = {
        "TURNKEEP_WINDOW__CONTEXT_WINDOW": needs.context_window,
        "TURNKEEP_WINDOW__MAX_OUTPUT_TOKENS": needs.max_output_tokens,
        "TURNKEEP_COMPACTION__KEEP_RECENT_TURNS": needs.keep_recent_turns,
        "TURNKEEP_RETRY__BASE_DELAY": needs.retry_base_delay,
        "TURNKEEP_RETRY__MAX_DELAY": needs.retry_max_delay,
    }
    values.update({name: str(value) for name, value in optional.items() if value is not None})
    return {**kept, **values}


def pointed(settings: Settings, base_url: str) -> Settings:
    """``settings`` with the provider at ``base_url`` and none of the settings' own credentials: what a
    ``--config`` file says of the provider's place and key does not apply to a fake run (the rest does)."""
    provider = msgspec.structs.replace(
        settings.provider,
        base_url=base_url,
        api_key_env=None,
        api_key_file=None,
        oauth_token_url=None,
        refresh_token_env=None,
    )
    return settings.replace(provider=provider)


def fake_credentials(needs: HostNeeds, provider: FakeProvider) -> CredentialProvider | None:
    """The refreshable credential a scenario with a refresh token needs, else None (the host's own)."""
    if needs.refresh_token is None:
        return None
    return OAuthCredential(provider.token_url, needs.refresh_token, access_token="fake-access-0")


@dataclass(frozen=True)
class FakeRun:
    """A scenario's provider, running, and what a host needs to use it.

    ``environ`` holds the variables of :func:`fake_environ`; ``workspace`` is the directory for a new
    session; ``credentials`` is None unless the scenario refreshes tokens.
    """

    scenario: Scenario
    provider: FakeProvider
    environ: dict[str, str]
    workspace: Path
    credentials: CredentialProvider | None


@contextmanager
def started(
    name: str, environ: Mapping[str, str], *, store: str | None = None, workspace: str | None = None
) -> Iterator[FakeRun]:
    """Within: the scenario ``name`` served on 127.0.0.1 (a port of its own), a temporary store and
    workspace unless ``store`` or ``workspace`` are given. Afterwards the provider is stopped and the
    temporary directory removed. Raises :class:`CliUsageError` for an unknown scenario."""
    chosen = scenario_named(name)
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"turnkeep-{name}-")))
        provider = stack.enter_context(chosen.provider())
        store_path = Path(store) if store else root / "sessions.db"
        place = Path(workspace) if workspace else root / "workspace"
        place.mkdir(parents=True, exist_ok=True)
        yield FakeRun(
            chosen,
            provider,
            fake_environ(chosen.needs, provider.base_url, store_path, environ),
            place,
            fake_credentials(chosen.needs, provider),
        )
