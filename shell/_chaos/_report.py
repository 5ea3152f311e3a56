"""The run's report: counts, dead letters with their explanations, violations, and how to replay it."""

from __future__ import annotations

import collections
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from sampler import LlmErrorKind
from sampler.fake import (
    ProviderStats,
)

from .. import events as ev
from ..session import MEMBERS
from ..store import SessionStore, StoreError
from ._bound import TurnBound
from ._driving import _SessionLog
from ._invariants import event_log_violations, history_violations
from ._tallies import _explain, _Tally

__all__ = ["ChaosReport", "DeadLetterCount", "print_report", "replay_command"]


class DeadLetterCount(msgspec.Struct, frozen=True):
    """Dead letters of one kind: where, what, why, how many, and what explains them."""

    actor: str
    message: str
    reason: str
    count: int
    explanation: str


class ChaosReport(msgspec.Struct, frozen=True):
    """Everything a run counted and every violation it found; ``ok`` when there is none."""

    seed: int
    sessions: int
    turns: int
    actor_crash_rate: float
    profile: str
    cancel_rate: float
    duration: float
    bound_seconds: float
    bound_formula: str
    outcomes: dict[str, int]
    slowest_turn: float
    faults: dict[str, int]
    rejections: dict[str, int]
    provider_requests: int
    token_refreshes: int
    retries_absorbed: int
    auth_refreshes: int
    compactions: int
    compactions_failed: int
    projection_fallbacks: int
    tool_calls: dict[str, int]
    cancels: dict[str, int]
    prompts_refused: int
    crashes: dict[str, int]
    other_crashes: dict[str, int]
    escalations: dict[str, int]
    killed: dict[str, int]
    runtime: dict[str, int]
    dead_letters: list[DeadLetterCount]
    violations: list[str]
    ok: bool
    """Whether the run found no violation."""
    replay: str
    rate_limit: float | None = None
    """Requests per second the embedded provider allowed (None: no limit)."""
    mcp_kills: int = 0
    children: int = 0
    """Child sessions the turns that fanned out ran (``--subagents``)."""
    """MCP server processes SIGKILLed by the run (``--mcp-crash-rate``)."""


def replay_command(
    *,
    seed: int,
    sessions: int,
    turns: int,
    actor_crash_rate: float,
    profile: str,
    as_json: bool = False,
    rate_limit: float | None = None,
    mcp_crash_rate: float = 0.0,
    subagents: bool = False,
) -> str:
    """The command line that runs the same workload with the same faults again."""
    command = (
        f"turnkeep chaos --seed {seed} --sessions {sessions} --turns {turns} "
        f"--actor-crash-rate {actor_crash_rate:g} --fault-profile {profile}"
    )
    if rate_limit is not None:
        command += f" --rate-limit {rate_limit:g}"
    if mcp_crash_rate:
        command += f" --mcp-crash-rate {mcp_crash_rate:g}"
    if subagents:
        command += " --subagents"
    return command + (" --json" if as_json else "")


def _count_outcomes(logs: Sequence[_SessionLog]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for log in logs:
        for turn in log.turns:
            counts[
                f"{turn.outcome}: {turn.detail}" if turn.outcome in ("failed", "cancelled") else turn.outcome
            ] += 1
    return dict(sorted(counts.items()))


_KNOWN_KINDS = frozenset(
    {str(kind) for kind in LlmErrorKind}
    | {"max_steps", "doom_loop", "context_overflow", "auth", "provider_filtered", "store", "internal"}
)
"""The kinds a failed turn may name: a provider error's kind, or one of the session's own."""


def _turn_violations(
    logs: Sequence[_SessionLog], bound: TurnBound, crashed_on: Mapping[str, list[str]]
) -> list[str]:
    problems: list[str] = []
    for log in logs:
        problems += log.problems
        for turn in log.turns:
            where = f"{log.plan.label} ({log.plan.session_id}) turn {turn.number or '?'}"
            if turn.outcome == "hung":
                crashes = ", ".join(crashed_on.get(log.plan.session_id, [])) or "none"
                problems.append(
                    f"{where}: did not converge within {bound.seconds:.0f} s ({turn.detail}; the session's "
                    f"actors crashed on: {crashes})"
                )
            elif turn.outcome == "refused":
                problems.append(f"{where}: the prompt was refused {len(turn.refusals)} times ({turn.detail})")
            elif turn.outcome == "failed" and turn.detail not in _KNOWN_KINDS:
                problems.append(f"{where}: failed with the undocumented kind {turn.detail!r}")
            elif turn.outcome in ("completed", "failed", "cancelled") and turn.elapsed > bound.seconds:
                problems.append(
                    f"{where}: took {turn.elapsed:.1f} s, beyond the bound of {bound.seconds:.0f} s"
                )
            if turn.outcome in ("completed", "failed", "cancelled"):
                ends = sum(turn.events[cls] for cls in ev.TERMINAL_EVENTS)
                if turn.events[ev.TurnStarted] != 1 or ends != 1:
                    problems.append(
                        f"{where}: published {turn.events[ev.TurnStarted]} starts and {ends} ends, "
                        "not one each"
                    )
    return problems


def _store_violations(path: Path, logs: Sequence[_SessionLog]) -> list[str]:
    problems: list[str] = []
    with SessionStore.open(path) as store:
        for log in logs:
            if log.problems and not any(t.number for t in log.turns):
                continue
            acknowledged = {t.number: t.text for t in log.turns if t.number is not None}
            refused = [text for t in log.turns for text in t.refusals]
            seen = {t.number: _END_NAMES.get(t.outcome, "") for t in log.turns if t.number is not None}
            try:
                found = history_violations(store, log.plan.session_id, acknowledged, refused)
                found += event_log_violations(store, log.plan.session_id, seen)
            except StoreError as exc:
                found = [f"the store cannot be read: {exc}"]
            problems += [f"{log.plan.label} ({log.plan.session_id}): {p}" for p in found]
    return problems


_END_NAMES = {"completed": "TurnCompleted", "failed": "TurnFailed", "cancelled": "TurnCancelled"}


def _build_report(
    *,
    options: dict[str, Any],
    duration: float,
    bound: TurnBound,
    logs: Sequence[_SessionLog],
    stats: ProviderStats,
    tally: _Tally,
    runtime: dict[str, int],
    violations: list[str],
    mcp_kills: int = 0,
    children: int = 0,
) -> ChaosReport:
    turns = [t for log in logs for t in log.turns]
    events: collections.Counter[type] = collections.Counter()
    tools: collections.Counter[str] = collections.Counter()
    cancels: collections.Counter[str] = collections.Counter()
    for turn in turns:
        events.update(turn.events)
        tools.update(turn.tool_status)
        if turn.plan.cancel is not None and turn.number is not None:
            cancels[turn.cancel or "turn ended first"] += 1
    compactions = sum(t.compactions_ok for t in turns)
    watched = (*MEMBERS, "session_supervisor", "provider_gate", "mcp")
    crashes = {kind: tally.injected[kind] for kind in watched if tally.injected[kind]}
    # Tool actors are the only other actors with a chaos policy, and they are not watched.
    crashes["tool actor"] = runtime.get("chaos_crashes", 0) - sum(tally.injected.values())
    dead = [
        DeadLetterCount(actor, message, reason, count, _explain(message, reason) or "unexplained")
        for (actor, message, reason), count in sorted(tally.dead.items(), key=lambda item: -item[1])
    ]
    violations += [
        f"{d.count} dead letters to the {d.actor} ({d.message}, {d.reason}) that nothing explains"
        for d in dead
        if d.explanation == "unexplained"
    ]
    return ChaosReport(
        seed=options["seed"],
        sessions=options["sessions"],
        turns=options["turns"],
        actor_crash_rate=options["actor_crash_rate"],
        profile=options["profile"],
        cancel_rate=options["cancel_rate"],
        duration=round(duration, 2),
        bound_seconds=round(bound.seconds, 1),
        bound_formula=bound.formula,
        outcomes=_count_outcomes(logs),
        slowest_turn=round(max((t.elapsed for t in turns if t.outcome in _END_NAMES), default=0.0), 2),
        faults=dict(sorted(stats.faults.items())),
        rejections=dict(sorted(stats.rejections.items())),
        provider_requests=stats.requests,
        token_refreshes=stats.token_refreshes,
        retries_absorbed=events[ev.Retrying],
        auth_refreshes=events[ev.AuthRefreshed],
        compactions=compactions,
        compactions_failed=events[ev.CompactionFinished] - compactions,
        projection_fallbacks=events[ev.ProjectionFallback],
        tool_calls=dict(sorted(tools.items())),
        cancels=dict(sorted(cancels.items())),
        prompts_refused=sum(len(t.refusals) for t in turns),
        crashes=crashes,
        other_crashes=dict(tally.other),
        escalations=dict(tally.escalated),
        killed=dict(tally.killed),
        runtime=dict(sorted(runtime.items())),
        dead_letters=dead,
        violations=violations,
        ok=not violations,
        replay=replay_command(
            seed=options["seed"],
            sessions=options["sessions"],
            turns=options["turns"],
            actor_crash_rate=options["actor_crash_rate"],
            profile=options["profile"],
            rate_limit=options.get("rate_limit"),
            mcp_crash_rate=options.get("mcp_crash_rate", 0.0),
            subagents=options.get("subagents", False),
        ),
        rate_limit=options.get("rate_limit"),
        mcp_kills=mcp_kills,
        children=children,
    )


def print_report(report: ChaosReport) -> None:
    """Print ``report`` as tables, then its violations (or that there is none) and how to replay it."""
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=130)

    def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        t = Table(title=title, title_justify="left")
        for column in columns:
            t.add_column(column)
        for row in rows:
            t.add_row(*(str(cell) for cell in row))
        console.print(t)

    total = sum(report.outcomes.values())
    table("turns", ("outcome", "turns"), [*report.outcomes.items(), ("all", total)])
    recoveries = [
        ("provider requests", report.provider_requests),
        *((f"fault injected: {kind}", n) for kind, n in report.faults.items()),
        *((f"request refused: {why}", n) for why, n in report.rejections.items()),
        ("retries absorbed", report.retries_absorbed),
        ("auth refreshes", report.auth_refreshes),
        ("tokens issued by the provider", report.token_refreshes),
        ("compactions", report.compactions),
        ("compactions that did not help", report.compactions_failed),
        ("projection fallbacks", report.projection_fallbacks),
        *((f"tool calls: {status}", n) for status, n in report.tool_calls.items()),
        *((f"cancel: {result}", n) for result, n in report.cancels.items()),
        ("prompts refused (sent again)", report.prompts_refused),
        *((("MCP server processes killed", report.mcp_kills),) if report.mcp_kills else ()),
        *((("child sessions run", report.children),) if report.children else ()),
    ]
    table("faults and recoveries", ("what", "count"), recoveries)
    kinds = [*report.crashes, *report.other_crashes, *report.escalations, *report.killed]
    crash_rows = [
        (
            kind,
            report.crashes.get(kind, 0),
            report.other_crashes.get(kind, 0),
            report.escalations.get(kind, 0),
            report.killed.get(kind, 0),
        )
        for kind in dict.fromkeys(kinds)
    ]
    table(
        "actor incarnations that ended badly (tool actors are temporary, the others are restarted)",
        ("actor", "injected crashes", "other crashes", "escalations", "killed"),
        crash_rows,
    )
    table("runtime counters", ("counter", "value"), report.runtime.items())
    table(
        "dead letters",
        ("actor", "message", "reason", "count", "explanation"),
        [(d.actor, d.message, d.reason, d.count, d.explanation) for d in report.dead_letters],
    )
    console.print(f"turn bound: {report.bound_formula}; slowest turn {report.slowest_turn:.2f} s")
    if report.violations:
        console.print(f"[bold red]{len(report.violations)} violations[/bold red]:")
        for violation in report.violations:
            console.print(f"  - {violation}", markup=False, soft_wrap=True)
    else:
        console.print(
            f"[bold green]no violations[/bold green]: {total} turns converged, nothing lost, "
            "nothing left behind"
        )
    console.print(f"seed {report.seed}, {report.duration:.1f} s; replay with:", markup=False)
    console.print(report.replay, markup=False, soft_wrap=True)
