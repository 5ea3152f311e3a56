"""What a host makes of its ``[tools]`` settings: the environment and the sandbox of its ``shell`` commands,
and the secrets it must never let out."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tool_bridge import (
    EnvPolicy,
    Sandbox,
    SandboxProbe,
    describe_env_policy,
    is_secret_name,
    probe_sandbox,
    tool_environment,
)

from ._secrets import KNOWN_SECRETS, SecretWatch
from .config import SERVE_TOKEN_ENV

if TYPE_CHECKING:
    from .config import Settings
    from .credentials import CredentialProvider

__all__ = [
    "ToolIsolation",
    "credential_variables",
    "tool_isolation",
    "watch_host_secrets",
]

logger = logging.getLogger("turnkeep.shell")

_SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")


def credential_variables(settings: Settings) -> tuple[str, ...]:
    """The variables holding the provider's credentials and the serve token, by the settings."""
    provider = settings.provider
    names = (provider.api_key_env, provider.refresh_token_env, SERVE_TOKEN_ENV)
    return tuple(name for name in names if name)


@dataclass(frozen=True)
class ToolIsolation:
    """What a host's ``shell`` commands run with: ``env`` (decided once, at start, by ``policy``) and
    ``sandbox``."""

    env: Mapping[str, str]
    policy: EnvPolicy
    sandbox: Sandbox

    def describe(self) -> str:
        """One line saying which sandbox and which environment policy are in force."""
        return f"tools: sandbox: {self.sandbox.describe()}; environment: {describe_env_policy(self.policy)}"


def tool_isolation(
    settings: Settings,
    environ: Mapping[str, str],
    *,
    store_path: Path | None,
    workspaces: Callable[[], Iterable[Path]],
    probe: SandboxProbe | None = None,
) -> ToolIsolation:
    """The isolation ``settings`` ask for, on this machine, for a host whose environment is ``environ``.

    Hidden in the sandbox besides what lies beside a workspace: the home (``HOME`` of ``environ``), the
    store's directory and files (``store_path``; ``None`` for a database server) and every workspace that
    ``workspaces`` gives at the time of a command (the host's sessions).  The sandbox is probed (once per
    process, see :func:`tool_bridge.probe_sandbox`) unless the mode is ``off`` or ``probe`` is given; when
    ``auto`` finds it unusable, a warning says so once per host.
    """
    tools = settings.tools
    policy = tools.env.policy()
    env = tool_environment(environ, policy, secret_names=credential_variables(settings))
    mode = tools.sandbox.mode
    if mode != "off" and probe is None:
        probe = probe_sandbox()
    home = environ.get("HOME") or os.path.expanduser("~")
    fixed: list[str] = [home]
    if store_path is not None:
        fixed.append(str(store_path.parent))
        fixed += [f"{store_path}{suffix}" for suffix in _SQLITE_SIDECARS]

    def hidden() -> list[str]:
        return fixed + [str(path) for path in workspaces()]

    sandbox = Sandbox(mode=mode, probe=probe, network=tools.sandbox.network, hidden=hidden)
    if mode == "auto" and sandbox.verdict == "unsandboxed":
        logger.warning("shell commands run without a sandbox: %s", probe.reason if probe else "not probed")
    return ToolIsolation(env, policy, sandbox)


def watch_host_secrets(
    settings: Settings, credentials: CredentialProvider, environ: Mapping[str, str]
) -> list[SecretWatch]:
    """Make every secret the host holds known to :data:`shell._secrets.KNOWN_SECRETS`, so that tool output,
    events, the store and the logs never show it: the values of the credential variables (named after
    them), the credential the provider uses now and after each refresh, and an OAuth refresh token
    (also after rotation), and the values of the other variables named like credentials (``*TOKEN*``...)
    that look like tokens (one word, not a path). Close the returned watches when the host stops."""
    provider = settings.provider
    for name in credential_variables(settings):
        KNOWN_SECRETS.add(name, environ.get(name))
    for name, value in environ.items():
        if is_secret_name(name) and _looks_like_a_token(value):
            KNOWN_SECRETS.add(name, value)
    label = provider.api_key_env or ("OAUTH_ACCESS_TOKEN" if provider.oauth_token_url else "API_KEY")
    watches = [KNOWN_SECRETS.watch(label, credentials.current)]
    refresh_token = getattr(credentials, "refresh_token", None)
    if callable(refresh_token):
        watches.append(
            KNOWN_SECRETS.watch(provider.refresh_token_env or "OAUTH_REFRESH_TOKEN", refresh_token)
        )
    return watches


def _looks_like_a_token(value: str) -> bool:
    # A path (SSH_KEY_PATH=/home/u/.ssh/id) or a sentence is not a credential, and redacting it everywhere
    # would mangle ordinary output.
    value = value.strip()
    return bool(value) and not value.startswith(("/", "~", ".")) and not any(c.isspace() for c in value)
