"""Reading the configuration: a TOML file, then ``TURNKEEP_*`` variables over it, into validated settings."""

from __future__ import annotations

import os
import re
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import msgspec

from ._agents import AgentProfile
from ._cluster import ClusterSettings
from ._errors import ConfigError
from ._sections import SECTIONS, Settings

__all__ = ["SERVE_TOKEN_ENV", "environ_below_file", "load_cluster_settings", "load_settings"]

_PREFIX = "TURNKEEP_"
_CONFIG_ENV = "TURNKEEP_CONFIG"
_MAX_ATTEMPTS_ENV = "TURNKEEP_MAX_ATTEMPTS_PER_STEP"
SERVE_TOKEN_ENV = "TURNKEEP_SERVE_TOKEN"
"""The variable holding the token that clients of ``turnkeep serve`` present: a secret like the API key,
read by ``serve`` only, not a setting."""
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


# --- Loading ----------------------------------------------------------------------------------------------


def load_settings(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from the TOML file ``path`` (if any) and the ``TURNKEEP_*`` variables of ``environ``.

    Without ``path``, the file named by ``TURNKEEP_CONFIG`` is read, or none. ``environ`` defaults to
    ``os.environ``. Raises :class:`ConfigError` if a file given is missing or unreadable, its TOML is
    malformed (the message gives the line), or a key or value from either source is invalid (the message
    names the dotted key and what was expected).
    """
    env = os.environ if environ is None else environ
    if path is None and env.get(_CONFIG_ENV, "").strip():
        path = env[_CONFIG_ENV].strip()
    raw: dict[str, Any] = {} if path is None else _read_file(Path(path).expanduser())
    origin = "" if path is None else f" (in {path})"
    overrides = _env_overrides(env)
    for (section, key), (_, value) in overrides.items():
        table = raw.setdefault(section, {})
        *tables, last = key.split(".")
        for name in tables:
            table = table.setdefault(name, {}) if isinstance(table, dict) else table
        if isinstance(table, dict):
            table[last] = value
    raw = _profiles_apart(raw)
    try:
        _check_profiles(raw)
        return msgspec.convert(raw, Settings)
    except msgspec.ValidationError as error:
        dotted, problem = _explain(str(error))
        source = next(
            (
                f" (from {variable})"
                for (s, k), (variable, _) in overrides.items()
                if _covers(f"{s}.{k}", dotted)
            ),
            origin,
        )
        raise ConfigError(f"invalid setting {dotted}: {problem}{source}", key=dotted) from None


def _profiles_apart(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with its ``[agents.NAME]`` tables moved to ``agents.profiles``, where the settings are."""
    agents = raw.get("agents")
    if not isinstance(agents, dict):
        return raw
    profiles = {name: table for name, table in agents.items() if isinstance(table, dict)}
    limits = {key: value for key, value in agents.items() if key not in profiles}
    return {**raw, "agents": {**limits, "profiles": profiles}}


def _check_profiles(raw: dict[str, Any]) -> None:
    """Convert each ``[agents.NAME]`` table on its own, so that an error names its profile."""
    for name, table in raw.get("agents", {}).get("profiles", {}).items():
        try:
            msgspec.convert(table, AgentProfile)
        except msgspec.ValidationError as error:
            match = _PATH_SUFFIX.match(str(error))
            assert match is not None  # the pattern matches any text
            where = f"agents.{name}{match['path'] or ''}"
            raise msgspec.ValidationError(f"{match['message']} - at `$.{where}`") from None


def environ_below_file(path: str | Path | None, environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ`` without the ``TURNKEEP_*`` variables of the settings the TOML file ``path`` sets, for a
    caller whose file must win over the environment (the command line's ``--config``). Without a file, or
    with one that cannot be read, ``environ`` is returned as it is: :func:`load_settings` reports the
    problem."""
    if path is None:
        return environ
    try:
        raw = _read_file(Path(path).expanduser())
    except ConfigError:
        return environ
    keys = {
        f"{section}__{key}".lower()
        for section, table in raw.items()
        if isinstance(table, dict)
        for key in table
    }
    if "retry__max_attempts" in keys:
        keys.add(_MAX_ATTEMPTS_ENV[len(_PREFIX) :].lower())
    return {
        name: value
        for name, value in environ.items()
        if not (name.startswith(_PREFIX) and name[len(_PREFIX) :].lower() in keys)
    }


class _ClusterFile(msgspec.Struct):
    cluster: ClusterSettings = msgspec.field(default_factory=ClusterSettings)


def load_cluster_settings(path: str | Path) -> ClusterSettings:
    """The ``[cluster]`` table of the TOML file ``path`` (defaults when it has none; other tables are
    ignored). Raises :class:`ConfigError` (a :class:`ValueError`) if the file is missing or unreadable,
    its TOML is malformed, or a value of the table is invalid (the message names the dotted key)."""
    raw = _read_file(Path(path).expanduser())
    try:
        return msgspec.convert(raw, _ClusterFile).cluster
    except msgspec.ValidationError as error:
        dotted, problem = _explain(str(error))
        raise ConfigError(f"invalid setting {dotted}: {problem} (in {path})", key=dotted) from None


def _covers(key: str, dotted: str) -> bool:
    return dotted == key or dotted.startswith((f"{key}[", f"{key}."))


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    except OSError as error:
        raise ConfigError(f"cannot read configuration file {path}: {error}") from None
    try:
        raw = msgspec.toml.decode(data)
    except msgspec.DecodeError as error:
        raise ConfigError(f"malformed TOML in {path}: {error}") from None
    if not isinstance(raw, dict):  # pragma: no cover - a TOML document is always a table
        raise ConfigError(f"malformed TOML in {path}: not a table")
    return raw


_PATH_SUFFIX = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(?P<field>[^`]*)`")
# A key's last parts may be names (of tools: ``tools.idempotency.git__status``).
_OWN_MESSAGE = re.compile(r"^(?P<key>[a-z_]+(?:\.[A-Za-z0-9_-]+)+): (?P<problem>.*)$", re.DOTALL)


def _explain(text: str) -> tuple[str, str]:
    """(dotted key, problem) from a msgspec validation message."""
    match = _PATH_SUFFIX.match(text)
    assert match is not None  # the pattern matches any text
    message, path = match["message"], (match["path"] or "").lstrip(".")
    own = _OWN_MESSAGE.match(message)
    if own:
        return own["key"], own["problem"]
    unknown = _UNKNOWN_FIELD.fullmatch(message)
    if unknown:
        dotted = f"{path}.{unknown['field']}" if path else unknown["field"]
        return dotted, "unknown key" if path else "unknown section"
    problem = message.replace("`", "").replace(" | null", "").replace("object", "table")
    problem = problem[:1].lower() + problem[1:]
    choices = _choices(path)
    if choices and problem.startswith("invalid enum value"):
        problem = f"expected one of {choices}, got {problem.removeprefix('invalid enum value ')}"
    return path or "(top level)", problem


def _choices(dotted: str) -> str | None:
    """The allowed values of the setting ``dotted`` if it is a choice among fixed values."""
    section, _, key = dotted.partition(".")
    if section not in SECTIONS:
        return None
    field_type = _field_type(SECTIONS[section], key)
    if get_origin(field_type) is not Literal:
        return None
    return ", ".join(repr(choice) for choice in get_args(field_type))


def _env_overrides(env: Mapping[str, str]) -> dict[tuple[str, str], tuple[str, Any]]:
    """{(section, key): (variable, parsed value)} for every ``TURNKEEP_`` variable of ``env``."""
    overrides: dict[tuple[str, str], tuple[str, Any]] = {}
    for variable in sorted(env):
        if not variable.startswith(_PREFIX) or variable in (_CONFIG_ENV, SERVE_TOKEN_ENV):
            continue
        raw = env[variable]
        if variable == _MAX_ATTEMPTS_ENV:
            if not raw.strip():
                continue  # blank means unset, as for RetryPolicy.from_env
            section, key = "retry", "max_attempts"
        else:
            section, sep, key = variable[len(_PREFIX) :].lower().partition("__")
            if not sep:
                raise ConfigError(
                    f"unknown setting {variable}: settings are TURNKEEP_<SECTION>__<KEY>", key=section
                )
            if section not in SECTIONS:
                raise ConfigError(f"unknown setting {variable}: no section {section!r}", key=section)
            key = key.replace("__", ".")
            if _field_type(SECTIONS[section], key) is None:
                raise ConfigError(
                    f"unknown setting {variable}: no key {section}.{key}", key=f"{section}.{key}"
                )
        if (section, key) in overrides:
            other = overrides[section, key][0]
            raise ConfigError(
                f"{section}.{key} is set by both {other} and {variable}", key=f"{section}.{key}"
            )
        field_type = _field_type(SECTIONS[section], key)
        try:
            value = _parse(raw, field_type)
        except ValueError as error:
            raise ConfigError(
                f"invalid setting {section}.{key} (from {variable}): {error}", key=f"{section}.{key}"
            ) from None
        overrides[section, key] = (variable, value)
    return overrides


def _field_type(table: type[msgspec.Struct], key: str) -> Any:
    """The type of the setting ``key`` of ``table``, dotted into nested tables (``sandbox.mode`` of
    ``tools``), or None when there is no such setting."""
    name, _, rest = key.partition(".")
    field = next((f for f in msgspec.structs.fields(table) if f.encode_name == name), None)
    if field is None or not rest:
        return None if field is None else field.type
    nested = field.type
    return (
        _field_type(nested, rest) if isinstance(nested, type) and issubclass(nested, msgspec.Struct) else None
    )


def _parse(raw: str, field_type: Any) -> Any:
    """``raw`` (an environment value) as a value of ``field_type``; ValueError says what was expected."""
    text = raw.strip()
    origin, args = get_origin(field_type), get_args(field_type)
    if origin in (Union, types.UnionType):
        if not text:
            return None
        (field_type,) = (arg for arg in args if arg is not type(None))
        return _parse(raw, field_type)
    if origin in (tuple, list):
        return [_parse(item, args[0]) for item in text.split(",") if item.strip()]
    if origin is dict:
        pairs = {}
        for item in (item for item in text.split(",") if item.strip()):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"expected name=value pairs, got {item.strip()!r}")
            pairs[name.strip()] = value.strip()
        return pairs
    if field_type is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"expected bool, got {raw!r}")
    if field_type is int:
        if re.fullmatch(r"[+-]?[0-9]+", text):
            return int(text)
        raise ValueError(f"expected int, got {raw!r}")
    if field_type is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected float, got {raw!r}") from None
    return text
