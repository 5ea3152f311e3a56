"""Whether a tool call may run: rules, session grants, pre-tool hooks, and the host's answer when asked.

A call is checked in this order, and the first step that decides wins:

1. The rules, in the order given, then (unless disabled) `DEFAULT_RULES`, then the policy's default
   action: the first rule whose tool and pattern match gives the action.  Put rules with a pattern
   before the tool-wide rule for the same tool, or the tool-wide one shadows them.
2. A ``deny`` is final.
3. Pre-tool hooks run in order; a hook returning a string denies the call with it as the reason, and a
   hook that raises denies it too.
4. An ``ask`` becomes ``allow`` when a session grant matches.
5. What is left to ask is settled by the session's `PermissionMode`: ``ask`` (the host must answer),
   ``allow`` (allowed without asking) or ``deny`` (denied without asking).

Grants and the mode answer questions; they never override a ``deny`` rule or a hook.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Literal, NamedTuple

import msgspec
import trio

from tool_bridge.results import ToolOutcome, ToolStatus

__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_SUBJECTS",
    "Action",
    "Decision",
    "DecisionSlot",
    "PermissionConfigError",
    "PermissionDecision",
    "PermissionMode",
    "PermissionPolicy",
    "PermissionRequested",
    "PermissionRule",
    "PreToolHook",
    "SetPermissionMode",
    "Subject",
    "await_decision",
    "denied_outcome",
]

Action = Literal["allow", "deny", "ask"]
_ACTIONS: frozenset[str] = frozenset({"allow", "deny", "ask"})

PermissionMode = Literal["ask", "allow", "deny"]
"""What becomes of a call that no rule, hook or grant settled: asked about, allowed, or denied."""
PERMISSION_MODES: tuple[PermissionMode, ...] = ("ask", "allow", "deny")

PreToolHook = Callable[[str, object], str | None]
"""Called with ``(tool_name, args)`` before a call runs: a returned string denies it with that reason."""


class PermissionConfigError(ValueError):
    """A rule or grant is malformed: unknown action, empty pattern, or a pattern for a tool whose
    arguments the policy does not know how to match."""


class PermissionRule(msgspec.Struct, frozen=True):
    """Allow, deny or ask for calls to ``tool`` (a tool name, or ``"*"`` for every tool).

    ``pattern`` narrows the rule to some arguments, matched against the tool's `Subject`: for
    ``shell`` a command prefix on a word boundary (``"git status"`` matches ``git status --short``,
    not ``git statusx``), for file tools a glob on the workspace-relative path (``*`` also crosses
    ``/``).  A prefix ``allow`` matches only a simple command: one with ``;``, ``&``, ``|``, ``<``,
    ``>``, a backquote, ``$(`` or a newline is not allowed by prefix.  A prefix ``deny`` or ``ask``
    matches when any piece of the command, split at those characters, starts with the prefix.
    """

    tool: str
    action: Action
    pattern: str | None = None


class Subject(NamedTuple):
    """Which argument of a tool a rule's pattern is matched against, and how."""

    field: str
    match: Literal["prefix", "glob"]


DEFAULT_SUBJECTS: Mapping[str, Subject] = {
    "shell": Subject("command", "prefix"),
    "read_file": Subject("path", "glob"),
    "write_file": Subject("path", "glob"),
    "edit_file": Subject("path", "glob"),
    "list_dir": Subject("path", "glob"),
}
"""The subjects of the built-in tools."""

DEFAULT_RULES: tuple[PermissionRule, ...] = (
    PermissionRule("read_file", "allow"),
    PermissionRule("list_dir", "allow"),
    PermissionRule("write_file", "ask"),
    PermissionRule("edit_file", "ask"),
    PermissionRule("shell", "ask"),
)
"""Reading is allowed; writing, editing and running commands are asked."""


class Decision(msgspec.Struct, frozen=True):
    """The verdict on one call: ``allow``, ``deny``, or ``ask`` (the host must answer), and why."""

    action: Action
    reason: str


class PermissionRequested(msgspec.Struct, frozen=True, tag=True):
    """Sent to the host when a call needs its answer; ``arguments`` is the call's JSON text."""

    call_id: str
    tool: str
    arguments: str
    reason: str


class SetPermissionMode(msgspec.Struct, frozen=True, tag=True):
    """Told to a session (and by it to its tools): settle the calls that would be asked about as ``mode``
    says, from the next call checked on. Calls already waiting for an answer still wait for it."""

    mode: PermissionMode


class PermissionDecision(msgspec.Struct, frozen=True, tag=True):
    """The host's answer to a `PermissionRequested`.

    ``allow_always`` also grants the tool for the rest of the session, narrowed to ``pattern`` when
    one is given.  ``reason`` says why a call was denied.
    """

    call_id: str
    decision: Literal["allow_once", "allow_always", "deny"]
    reason: str = ""
    pattern: str | None = None


def denied_outcome(call_id: str, tool: str, reason: str, *, duration: float = 0.0) -> ToolOutcome:
    """The result the model gets for a call that was not allowed to run: ``"denied: <reason>"``."""
    return ToolOutcome(
        call_id=call_id,
        tool=tool,
        content=f"denied: {reason}",
        is_error=True,
        status=ToolStatus.DENIED,
        duration=duration,
    )


_SHELL_CONTROL = re.compile(r"[;&|<>`\n]|\$\(")


class PermissionPolicy:
    """Decides allow / deny / ask for each call; see the module documentation for the order.

    ``default`` is the action when no rule matches.  ``subjects`` (default `DEFAULT_SUBJECTS`) says
    how patterns apply to each tool; ``workspace``, when given, lets absolute paths inside it match
    path globs.  Raises `PermissionConfigError` for a malformed rule.  Not thread-safe: one owner
    checks and grants.
    """

    def __init__(
        self,
        rules: Iterable[PermissionRule] = (),
        *,
        default: Action = "ask",
        use_default_rules: bool = True,
        subjects: Mapping[str, Subject] = DEFAULT_SUBJECTS,
        hooks: Iterable[PreToolHook] = (),
        workspace: Path | None = None,
    ) -> None:
        if default not in _ACTIONS:
            raise PermissionConfigError(f"default must be one of allow, deny, ask; got {default!r}")
        self._subjects = dict(subjects)
        self._rules = [*rules, *(DEFAULT_RULES if use_default_rules else ())]
        for rule in self._rules:
            self._validate(rule)
        self._default: Action = default
        self._hooks = list(hooks)
        self._workspace = None if workspace is None else os.path.realpath(workspace)
        self._grants: list[PermissionRule] = []
        self._mode: PermissionMode = "ask"

    @property
    def mode(self) -> PermissionMode:
        """What becomes of the calls that would be asked about (``ask`` until :meth:`set_mode`)."""
        return self._mode

    def set_mode(self, mode: PermissionMode) -> None:
        """Settle the calls that would be asked about as ``mode`` says. Raises `PermissionConfigError`
        for a mode that is not one of ``ask``, ``allow``, ``deny``."""
        if mode not in PERMISSION_MODES:
            raise PermissionConfigError(f"the permission mode is one of ask, allow, deny; got {mode!r}")
        self._mode = mode

    @property
    def rules(self) -> tuple[PermissionRule, ...]:
        """Every rule, in the order they are tried (the default rules last)."""
        return tuple(self._rules)

    @property
    def grants(self) -> tuple[PermissionRule, ...]:
        """The session grants made so far."""
        return tuple(self._grants)

    def add_hook(self, hook: PreToolHook) -> None:
        """Run ``hook`` after the hooks already added, for every call not denied by a rule."""
        self._hooks.append(hook)

    def grant(self, tool: str, pattern: str | None = None) -> None:
        """Allow, for the rest of the session, the calls to ``tool`` that would be asked about and
        match ``pattern`` (None: all of them).  Raises `PermissionConfigError` for a bad pattern."""
        rule = PermissionRule(tool, "allow", pattern)
        self._validate(rule)
        self._grants.append(rule)

    def check(self, tool: str, args: object) -> Decision:
        """The decision for a call to ``tool`` with ``args`` (a decoded arguments Struct or a mapping)."""
        rule = next((each for each in self._rules if self._matches(each, tool, args)), None)
        if rule is None:
            action: Action = self._default
            reason = f"no rule for `{tool}`; the default is {self._default}"
        else:
            action, reason = rule.action, f"rule `{_rule_text(rule)}`"
        if action == "deny":
            return Decision("deny", reason)
        for hook in self._hooks:
            try:
                verdict = hook(tool, args)
            except Exception as exc:
                name = getattr(hook, "__qualname__", repr(hook))
                return Decision("deny", f"pre-tool hook {name} failed: {type(exc).__name__}: {exc}")
            if verdict is not None:
                return Decision("deny", verdict)
        if action == "ask":
            grant = next((each for each in self._grants if self._matches(each, tool, args)), None)
            if grant is not None:
                return Decision("allow", f"granted for the session (`{_rule_text(grant)}`)")
            if self._mode == "allow":
                return Decision("allow", f"{reason}; the session's permission mode allows it without asking")
            if self._mode == "deny":
                return Decision("deny", f"{reason}; the session's permission mode denies it without asking")
        return Decision(action, reason)

    def resolve(self, tool: str, answer: PermissionDecision) -> Decision:
        """Turn the host's answer about a call to ``tool`` into a decision, recording an
        ``allow_always`` as a session grant.  Raises `PermissionConfigError` for a bad pattern."""
        if answer.decision == "allow_always":
            self.grant(tool, answer.pattern)
            return Decision("allow", "allowed for the session by the user")
        if answer.decision == "allow_once":
            return Decision("allow", "allowed once by the user")
        return Decision("deny", answer.reason or "refused by the user")

    def _validate(self, rule: PermissionRule) -> None:
        if rule.action not in _ACTIONS:
            raise PermissionConfigError(f"rule action must be one of allow, deny, ask; got {rule.action!r}")
        if rule.pattern is None:
            return
        if not rule.pattern:
            raise PermissionConfigError(
                f"rule for `{rule.tool}` has an empty pattern; use None for every call"
            )
        if rule.tool != "*" and rule.tool not in self._subjects:
            raise PermissionConfigError(
                f"rule for `{rule.tool}` has a pattern, but no subject says which argument it matches"
            )

    def _matches(self, rule: PermissionRule, tool: str, args: object) -> bool:
        if rule.tool not in ("*", tool):
            return False
        if rule.pattern is None:
            return True
        subject = self._subjects.get(tool)
        if subject is None:
            return False
        value = args.get(subject.field) if isinstance(args, Mapping) else getattr(args, subject.field, None)
        if not isinstance(value, str):
            return False
        if subject.match == "prefix":
            return _command_matches(rule.pattern, value, simple_only=rule.action == "allow")
        return fnmatch.fnmatchcase(self._relative(value), rule.pattern)

    def _relative(self, path: str) -> str:
        if self._workspace is not None and os.path.isabs(path):
            normal = os.path.normpath(path)
            if normal == self._workspace or normal.startswith(self._workspace + os.sep):
                path = os.path.relpath(normal, self._workspace)
        return posixpath.normpath(path.replace(os.sep, "/"))


def _command_matches(prefix: str, command: str, *, simple_only: bool) -> bool:
    if simple_only:
        return not _SHELL_CONTROL.search(command) and _starts_with_words(command.strip(), prefix)
    return any(_starts_with_words(piece.strip(), prefix) for piece in _SHELL_CONTROL.split(command))


def _starts_with_words(command: str, prefix: str) -> bool:
    if not command.startswith(prefix):
        return False
    return len(command) == len(prefix) or prefix[-1].isspace() or command[len(prefix)].isspace()


def _rule_text(rule: PermissionRule) -> str:
    text = f"{rule.action} {rule.tool}"
    return f"{text} {rule.pattern!r}" if rule.pattern is not None else text


class DecisionSlot:
    """Where the host's answer to one permission request is delivered, once.

    Use it from the trio thread (another thread reaches it with `trio.from_thread.run_sync`).
    """

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self._answer: PermissionDecision | None = None
        self._answered = trio.Event()

    def answer(self, decision: PermissionDecision) -> bool:
        """Deliver ``decision``; False if an answer was already delivered (the first one stands).
        Raises `ValueError` when it answers another call."""
        if decision.call_id != self.call_id:
            raise ValueError(f"decision for call {decision.call_id!r} given to the slot of {self.call_id!r}")
        if self._answer is not None:
            return False
        self._answer = decision
        self._answered.set()
        return True

    async def wait(self) -> PermissionDecision:
        """The answer, once delivered."""
        await self._answered.wait()
        assert self._answer is not None
        return self._answer


async def await_decision(
    source: DecisionSlot | trio.abc.ReceiveChannel[PermissionDecision],
    *,
    timeout: float,
    call_id: str | None = None,
) -> PermissionDecision:
    """Wait at most ``timeout`` seconds for the host's answer to the call ``call_id``.

    ``call_id`` defaults to the slot's own; it is required with a channel, from which answers to
    other calls are discarded (`ValueError` without it).  Past the deadline the answer is a
    ``deny`` with reason ``"no answer within N s"``; a channel closed before answering gives a
    ``deny`` saying so.  Never raises for a missing answer.
    """
    if call_id is None:
        if not isinstance(source, DecisionSlot):
            raise ValueError("await_decision on a channel needs the call_id awaited")
        call_id = source.call_id
    with trio.move_on_after(timeout):
        if isinstance(source, DecisionSlot):
            return await source.wait()
        try:
            async for decision in source:
                if decision.call_id == call_id:
                    return decision
        except trio.ClosedResourceError:
            pass
        return PermissionDecision(call_id, "deny", reason="the host stopped answering permission requests")
    return PermissionDecision(call_id, "deny", reason=f"no answer within {timeout:g} s")
