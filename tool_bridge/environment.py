"""What environment a command started for a tool sees: a pure decision from the host's environment and
a policy.

The default keeps the host's variables except credentials: the variables the caller names as holding
secrets, and every variable whose name contains ``KEY``, ``SECRET``, ``TOKEN``, ``PASSWORD`` or
``CREDENTIAL`` in any case.  The ``shell`` tool uses it; so can anything else a session starts.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

__all__ = [
    "CORE_VARIABLES",
    "SECRET_NAME_PARTS",
    "EnvPolicy",
    "EnvPolicyError",
    "Inherit",
    "describe_env_policy",
    "is_secret_name",
    "tool_environment",
]

Inherit = Literal["all", "core", "none"]
"""Which host variables a policy starts from: all of them, the `CORE_VARIABLES`, or none."""

CORE_VARIABLES = ("PATH", "HOME", "LANG", "TERM", "USER", "SHELL", "TMPDIR")
"""The variables ``inherit = "core"`` keeps."""

SECRET_NAME_PARTS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")
"""A variable whose name contains one of these (in any case) is taken for a credential and never passed."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATTERN = re.compile(r"[A-Za-z0-9_*?\[\]!-]+")


class EnvPolicyError(ValueError):
    """An `EnvPolicy` value is invalid; ``field`` names the option (``inherit``, ``exclude``,
    ``include_only`` or ``set``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class EnvPolicy:
    """How a tool's environment is made from the host's.

    ``inherit`` picks the starting variables; credentials are then always removed (see `tool_environment`);
    ``exclude`` removes the variables matching any of its patterns; a non-empty ``include_only`` keeps
    only the variables matching one of its patterns; ``assign`` (the ``set`` option) sets variables last,
    so it is the one way to hand a command a variable that would otherwise be dropped.  Patterns are
    shell-style globs (``AWS_*``) matched case-insensitively.  Raises `EnvPolicyError` for an unknown
    ``inherit``, an empty or malformed pattern, an invalid variable name in ``assign``, or a value
    containing NUL.
    """

    inherit: Inherit = "all"
    exclude: tuple[str, ...] = ()
    include_only: tuple[str, ...] = ()
    assign: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.inherit not in get_args(Inherit):
            raise EnvPolicyError("inherit", f'must be "all", "core" or "none", got {self.inherit!r}')
        for name in ("exclude", "include_only"):
            patterns = getattr(self, name)
            if isinstance(patterns, str):
                raise EnvPolicyError(name, f"must be a list of name patterns, got the text {patterns!r}")
            for pattern in patterns:
                if not (isinstance(pattern, str) and _PATTERN.fullmatch(pattern)):
                    raise EnvPolicyError(
                        name, f"must hold variable names or globs such as AWS_*, got {pattern!r}"
                    )
            object.__setattr__(self, name, tuple(patterns))
        for variable, value in self.assign.items():
            if not (isinstance(variable, str) and _NAME.fullmatch(variable)):
                raise EnvPolicyError("set", f"{variable!r} is not a valid environment variable name")
            if not isinstance(value, str) or "\0" in value:
                # The value is not shown: it may be a credential handed to tools on purpose.
                raise EnvPolicyError("set", f"the value of {variable} must be text without NUL characters")
        object.__setattr__(self, "assign", dict(self.assign))


def is_secret_name(name: str) -> bool:
    """Whether ``name`` looks like a credential's variable: it contains one of `SECRET_NAME_PARTS`,
    in any case."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern.upper()) for pattern in patterns)


def tool_environment(
    host: Mapping[str, str], policy: EnvPolicy | None = None, *, secret_names: Iterable[str] = ()
) -> dict[str, str]:
    """The environment a tool's command gets, decided from ``host`` (the host's environment) by ``policy``.

    In order: start from ``host`` as ``policy.inherit`` says; drop every variable named in
    ``secret_names`` (the provider's credential variables, say) and every one `is_secret_name` flags;
    drop those matching ``exclude``; when ``include_only`` is given keep only those matching it; then
    apply ``set``.  The result is a new dict; ``host`` is not changed.
    """
    policy = policy or EnvPolicy()
    if policy.inherit == "all":
        env = dict(host)
    elif policy.inherit == "core":
        env = {name: host[name] for name in CORE_VARIABLES if name in host}
    else:
        env = {}
    named = {name.upper() for name in secret_names}
    env = {
        name: value for name, value in env.items() if name.upper() not in named and not is_secret_name(name)
    }
    env = {name: value for name, value in env.items() if not _matches(name, policy.exclude)}
    if policy.include_only:
        env = {name: value for name, value in env.items() if _matches(name, policy.include_only)}
    env.update(policy.assign)
    return env


def describe_env_policy(policy: EnvPolicy | None = None) -> str:
    """One line saying what ``policy`` passes, for a start-up notice; never shows a value of ``set``."""
    policy = policy or EnvPolicy()
    words = {"all": "the host's environment", "core": "core variables only", "none": "no host variables"}
    parts = [
        f"{words[policy.inherit]} minus credentials (*KEY*, *SECRET*, *TOKEN*, *PASSWORD*, *CREDENTIAL*)"
    ]
    if policy.exclude:
        parts.append("minus " + ", ".join(policy.exclude))
    if policy.include_only:
        parts.append("only " + ", ".join(policy.include_only))
    if policy.assign:
        parts.append("plus " + ", ".join(sorted(policy.assign)))
    return "; ".join(parts)
