"""What a host builds from its settings: the provider's credentials, the tools' permission policy, and the
settings of each part of a session. Pure functions of the settings."""

from __future__ import annotations

import os

from sampler import SamplerSettings
from tool_bridge import PermissionPolicy, PermissionRule, ToolBridgeSettings

from .config import Settings
from .credentials import CredentialProvider, NoCredentials, OAuthCredential, StaticKey
from .session import ChatStateOptions, SessionOptions
from .subagents import AGENT_TOOL

__all__ = [
    "chat_options",
    "credentials_from_settings",
    "policy_from_settings",
    "sampler_settings",
    "session_options",
    "tool_bridge_settings",
]


def credentials_from_settings(
    settings: Settings, environ: dict[str, str] | None = None
) -> CredentialProvider:
    """The credential provider the provider settings describe (env var, file, OAuth refresh, or none)."""
    env = dict(os.environ if environ is None else environ)
    provider = settings.provider
    if provider.oauth_token_url and provider.refresh_token_env:
        refresh = env.get(provider.refresh_token_env)
        if refresh:
            access = env.get(provider.api_key_env) if provider.api_key_env else None
            return OAuthCredential(provider.oauth_token_url, refresh, access_token=access)
    if provider.api_key_env or provider.api_key_file:
        return StaticKey(env_var=provider.api_key_env, file=provider.api_key_file, environ=env)
    return NoCredentials()


def policy_from_settings(settings: Settings) -> PermissionPolicy:
    """The permission policy of ``[tools]``: its ``deny`` rules first, then ``allow``, then ``ask``; then
    ``agent`` allowed (a child's own tools are checked by its own policy), then the default rules."""
    rules = [PermissionRule(name, "deny") for name in settings.tools.deny]
    rules += [PermissionRule(name, "allow") for name in settings.tools.allow]
    rules += [PermissionRule(name, "ask") for name in settings.tools.ask]
    rules.append(PermissionRule(AGENT_TOOL, "allow"))
    return PermissionPolicy(rules)


def session_options(settings: Settings, session_id: str) -> SessionOptions:
    """How the session ``session_id`` runs its turns."""
    s = settings
    return SessionOptions(
        session_id,
        s.provider.model,
        max_steps_per_turn=s.loop_control.max_steps_per_turn,
        max_output_tokens=s.window.max_output_tokens,
        compaction_threshold=s.compaction.threshold,
        max_compactions=s.compaction.max_cycles,
        min_shrink=s.compaction.min_shrink,
        step_probe_after=s.timeouts.connect + s.timeouts.idle,
        price=s.pricing.get(s.provider.model),
        prices=s.pricing,
        resume_interrupted_turns=s.host.resume_interrupted_turns,
        max_resumes_per_turn=s.host.max_resumes_per_turn,
    )


def chat_options(settings: Settings, session_id: str) -> ChatStateOptions:
    """How the session's chat state keeps its history."""
    return ChatStateOptions(
        session_id,
        context_window=settings.window.context_window,
        keep_recent_turns=settings.compaction.keep_recent_turns,
    )


def sampler_settings(settings: Settings) -> SamplerSettings:
    """Where and how the session's sampler calls the model."""
    s = settings
    return SamplerSettings(
        base_url=s.provider.base_url,
        provider=s.provider.kind,
        headers=dict(s.provider.headers),
        connect_timeout=s.timeouts.connect,
        idle_timeout=s.timeouts.idle,
        policy=s.retry_policy(),
    )


def tool_bridge_settings(settings: Settings) -> ToolBridgeSettings:
    """How long the session's tool runner waits, and how much output a call keeps."""
    tools = settings.tools
    return ToolBridgeSettings(
        abort_grace=tools.abort_grace,
        kill_after=tools.kill_after,
        permission_timeout=tools.permission_timeout,
        output_cap=tools.output_cap,
    )
