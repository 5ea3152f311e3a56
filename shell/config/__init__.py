"""Typed, validated settings, read from a TOML file and ``TURNKEEP_*`` environment variables.

Every setting has a default, so an empty file (or none) is a valid configuration. A value from the
environment wins over the file. Anything wrong — an unknown key, a value of the wrong type or out of range,
malformed TOML — is refused by :func:`load_settings` with a :class:`ConfigError` naming the key as a dotted
path (``loop_control.max_steps_per_turn``), so a mistake shows at start, not in the middle of a turn.

The environment variable for a setting is ``TURNKEEP_<SECTION>__<KEY>``, upper case, with a double
underscore between section and key: ``TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN=5``; a key of a nested
table adds its own: ``TURNKEEP_TOOLS__SANDBOX__MODE=off`` for ``[tools.sandbox] mode``. Its value is parsed by
the setting's type: a whole number, a decimal number, ``true``/``false`` (also ``1``/``0``, ``yes``/``no``,
``on``/``off``), text; a list as comma-separated items; a table as comma-separated ``name=value`` pairs; an
empty value for an optional setting means none. Besides these, ``TURNKEEP_MAX_ATTEMPTS_PER_STEP`` sets
``retry.max_attempts``, ``TURNKEEP_CONFIG`` names the file to read when none is given and
``TURNKEEP_SERVE_TOKEN`` is the API token of ``turnkeep serve``; any other ``TURNKEEP_`` variable is an
error.
"""

from ._agents import GENERAL_PROFILE, MAX_AGENT_DEPTH, AgentProfile, AgentsSettings
from ._cluster import ClusterSettings
from ._errors import ConfigError
from ._gate import PRIORITIES, Priority, ProviderLimits
from ._loading import SERVE_TOKEN_ENV, environ_below_file, load_cluster_settings, load_settings
from ._sections import (
    CompactionSettings,
    DoomLoopRecoverySettings,
    HostSettings,
    LoopControlSettings,
    ProviderSettings,
    RetrySettings,
    ServeSettings,
    Settings,
    StoreSettings,
    TimeoutSettings,
    ToolSettings,
    WindowSettings,
)
from ._telemetry import TelemetrySettings
from ._tools import ToolEnvSettings, ToolSandboxSettings

__all__ = [
    "GENERAL_PROFILE",
    "MAX_AGENT_DEPTH",
    "PRIORITIES",
    "SERVE_TOKEN_ENV",
    "AgentProfile",
    "AgentsSettings",
    "ClusterSettings",
    "CompactionSettings",
    "ConfigError",
    "DoomLoopRecoverySettings",
    "HostSettings",
    "LoopControlSettings",
    "Priority",
    "ProviderLimits",
    "ProviderSettings",
    "RetrySettings",
    "ServeSettings",
    "Settings",
    "StoreSettings",
    "TelemetrySettings",
    "TimeoutSettings",
    "ToolEnvSettings",
    "ToolSandboxSettings",
    "ToolSettings",
    "WindowSettings",
    "environ_below_file",
    "load_cluster_settings",
    "load_settings",
]
