"""Command-line options that configure a host: the settings, the permissions and the session they give
(the options themselves are defined in :mod:`._args`).

What the command line says beats the environment: an option beats the file given with ``--config``,
which beats the ``TURNKEEP_*`` variables. (A file named only by ``TURNKEEP_CONFIG`` is environment
itself, and keeps :func:`shell.config.load_settings`' rule: a variable wins over it.)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from tool_bridge import DEFAULT_RULES, PermissionPolicy, PermissionRule
from tool_bridge.permissions import Action, Decision

from ..config import ConfigError, Settings, environ_below_file, load_settings
from ..credentials import CredentialProvider
from ..facade import Host, Session
from ..host import HostError
from ..session import SessionChaos
from ..store import StoreError
from ..subagents import AGENT_TOOL

__all__ = [
    "CliUsageError",
    "open_host",
    "open_session",
    "policy_factory",
    "settings_from",
]


class CliUsageError(Exception):
    """The command cannot run as given: a bad option, an unknown session, a missing key. Exit code 2."""


def settings_from(options: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings the options describe, over the ``--config`` file, over the environment.

    Raises :class:`~shell.config.ConfigError` for an invalid file, variable or option value, and
    :class:`CliUsageError` when the API key variable named is not set.
    """
    env = os.environ if environ is None else environ
    config = getattr(options, "config", None)
    settings = load_settings(config, environ_below_file(config, env))
    sections: dict[str, Any] = {}

    def change(section: str, flag: str, **values: Any) -> None:
        given = {key: value for key, value in values.items() if value is not None}
        if not given:
            return
        current = sections.get(section, getattr(settings, section))
        try:
            sections[section] = msgspec.structs.replace(current, **given)
        except ValueError as error:
            raise ConfigError(f"invalid option {flag}: {error}") from None

    store = getattr(options, "store", None)
    change("store", "--store", path=store)
    if hasattr(options, "base_url"):
        change("provider", "--base-url", base_url=options.base_url)
        change("provider", "--model", model=options.model)
        change("provider", "--provider", kind=options.provider)
        change("provider", "--api-key-env", api_key_env=options.api_key_env)
        change("retry", "--max-attempts", max_attempts=options.max_attempts)
        change("timeouts", "--idle-timeout", idle=options.idle_timeout)
        change("loop_control", "--max-steps", max_steps_per_turn=options.max_steps)
        change("window", "--context-window", context_window=options.context_window)
    result = settings.replace(**sections)
    if hasattr(options, "base_url"):
        _check_key(result, env)
    return result


def policy_factory(
    settings: Settings, *, allow: tuple[str, ...] = (), allow_all: bool = False, interactive: bool
) -> Callable[[], PermissionPolicy]:
    """A maker of each session's permission policy.

    ``allow`` tools run without asking, whatever the configuration says. The other rules are the
    configuration's (deny, then allow, then ask), ``agent`` allowed, and the built-in defaults. What they
    would ask about is allowed with ``allow_all``; otherwise it is asked when ``interactive``, and denied
    when not with a reason that says which option allows it.
    """
    fallback: Action = "allow" if allow_all else "ask"
    rules = [PermissionRule(tool, "allow") for tool in allow]
    rules += [PermissionRule(tool, "deny") for tool in settings.tools.deny]
    rules += [PermissionRule(tool, "allow") for tool in settings.tools.allow]
    rules += [PermissionRule(tool, fallback) for tool in settings.tools.ask]
    rules.append(PermissionRule(AGENT_TOOL, "allow"))  # a child's own tools are checked by its policy
    rules += [
        msgspec.structs.replace(rule, action=fallback) if rule.action == "ask" else rule
        for rule in DEFAULT_RULES
    ]
    policy = PermissionPolicy if interactive else _UnaskedPolicy
    return lambda: policy(rules, default=fallback, use_default_rules=False)


def open_host(
    settings: Settings,
    options: argparse.Namespace,
    *,
    interactive: bool,
    allow: tuple[str, ...] = (),
    credentials: CredentialProvider | None = None,
    chaos: SessionChaos | None = None,
) -> Host:
    """A host with the settings and the permissions the options give, ``allow`` tools also run without
    asking, ``credentials`` (when given) instead of those the settings describe, and ``chaos`` crashing
    its sessions' actors (when given). Raises :class:`CliUsageError` when the store cannot be used."""
    permissions = policy_factory(
        settings, allow=(*options.allow, *allow), allow_all=options.allow_all, interactive=interactive
    )
    extra: dict[str, Any] = {} if credentials is None else {"credentials": credentials}
    if chaos is not None:
        extra["chaos"] = chaos
    try:
        return Host(settings, permissions=permissions, **extra)
    except StoreError as error:
        raise CliUsageError(f"cannot use the session store {settings.store.path}: {error}") from None


def open_session(host: Host, options: argparse.Namespace, *, workspace: Path | None = None) -> Session:
    """The stored session ``--session`` names, or a new one in ``--workspace`` (default: ``workspace``,
    else the current directory). Raises :class:`CliUsageError` for an unknown or closed session or a
    workspace that is not a directory."""
    if options.session:
        # The host refuses a session the store does not have, or one that was closed.
        try:
            return host.resume(options.session)
        except HostError as error:
            raise CliUsageError(str(error)) from None
    workspace = Path(options.workspace) if options.workspace else workspace or Path(".")
    if workspace.exists() and not workspace.is_dir():
        raise CliUsageError(f"the workspace {workspace} is not a directory")
    return host.open(workspace)


class _UnaskedPolicy(PermissionPolicy):
    """A policy for a command that cannot ask: what would be asked about is denied, saying how to allow it."""

    def check(self, tool: str, args: object) -> Decision:
        decision = super().check(tool, args)
        if decision.action != "ask":
            return decision
        return Decision("deny", f"`{tool}` needs permission, which cannot be asked here; use --allow {tool}")


def _check_key(settings: Settings, env: Mapping[str, str]) -> None:
    provider = settings.provider
    if provider.api_key_env is None or provider.api_key_file is not None or provider.oauth_token_url:
        return
    if not env.get(provider.api_key_env, "").strip():
        raise CliUsageError(f"no API key: the environment variable ${provider.api_key_env} is not set")
