"""Running it all: the embedded provider, the host under chaos, the drivers, the checks and the report."""

from __future__ import annotations

import math
import os
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from actors import (
    ActorSystem,
    Address,
    ChaosPolicy,
    ChildSpec,
)
from sampler.fake import (
    DEFAULT_REFRESH_TOKEN,
    FakeProvider,
    FaultPlan,
    RateLimit,
    TokenExpiry,
)
from tool_bridge.mcp import MCP_CHILD

from ..config import AgentProfile, AgentsSettings, Settings
from ..credentials import OAuthCredential
from ..host import AgentHost
from ..session import MEMBERS, SessionChaos, SessionPath
from ..store import SessionStore
from ._bound import TurnBound, turn_bound
from ._driving import _drive, _Limits, _SessionLog
from ._families import family_violations
from ._mcp import MCP_NAME, MCP_SCRIPT, McpKiller, mcp_settings
from ._report import ChaosReport, _build_report, _store_violations, _turn_violations, print_report
from ._resources import Resources, _settle, leaks
from ._tallies import _Tally, _Watcher
from ._workload import (
    _MARK,
    _MAX_BODY_BYTES,
    _MODEL_CALLS,
    _PROVIDER_WINDOW,
    _REQUESTS_PER_TOKEN,
    _SCRIPTS,
    _SHUTDOWN_TIMEOUT,
    _TOOL_ROUNDS,
    _plan,
    _registry,
    _settings,
)

__all__ = ["chaos_run", "run"]


def run(
    *,
    seed: int,
    sessions: int,
    turns: int,
    actor_crash_rate: float = 0.0,
    profile: str = "light",
    as_json: bool = False,
    cancel_rate: float = 0.1,
    rate_limit: float | None = None,
    mcp_crash_rate: float = 0.0,
    subagents: bool = False,
) -> int:
    """Run the chaos workload, print the report (a table, or JSON with ``as_json``), and return the exit
    code: 0 when no invariant was violated, 1 otherwise. Raises ValueError for an unknown ``profile`` or
    out-of-range numbers."""
    report = chaos_run(
        seed=seed,
        sessions=sessions,
        turns=turns,
        actor_crash_rate=actor_crash_rate,
        profile=profile,
        cancel_rate=cancel_rate,
        rate_limit=rate_limit,
        mcp_crash_rate=mcp_crash_rate,
        subagents=subagents,
    )
    if as_json:
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        print_report(report)
    return 0 if report.ok else 1


def chaos_run(
    *,
    seed: int,
    sessions: int,
    turns: int,
    actor_crash_rate: float = 0.0,
    profile: str = "light",
    cancel_rate: float = 0.1,
    rate_limit: float | None = None,
    mcp_crash_rate: float = 0.0,
    subagents: bool = False,
) -> ChaosReport:
    """Run the chaos workload and return its report; see :func:`run`. With ``rate_limit`` (requests per
    second), the embedded provider allows no more, in a bucket of one second's worth, answering 429 with
    Retry-After and rate-limit headers beyond it: every session's requests pass the host's provider gate.
    With ``mcp_crash_rate`` > 0 every session also has a stdio MCP server (half of the turns call it) whose
    actor crashes with that probability per message and whose process is SIGKILLed with it every quarter
    second. With ``subagents``, about 2 turns in 5 fan out to three children (each running one of the
    other scripts) and the families are checked too (:func:`._families.family_violations`)."""
    _check_options(sessions, turns, actor_crash_rate, cancel_rate, mcp_crash_rate, rate_limit)
    faults = FaultPlan.profile(profile, seed=seed, stall_hangs=True)
    options = {
        "seed": seed,
        "sessions": sessions,
        "turns": turns,
        "actor_crash_rate": actor_crash_rate,
        "profile": profile,
        "cancel_rate": cancel_rate,
        "rate_limit": rate_limit,
        **({"mcp_crash_rate": mcp_crash_rate} if mcp_crash_rate else {}),
        **({"subagents": True} if subagents else {}),
    }
    plans = _plan(seed, sessions, turns, cancel_rate, mcp=mcp_crash_rate > 0, subagents=subagents)
    workers = min(sessions, 16)
    slots = max(1, workers // 2)
    mark = f"{os.getpid()}-{seed}-{time.time_ns()}"
    before = Resources.take(mark)
    started = time.monotonic()
    tally = _Tally()
    logs = [_SessionLog(plan) for plan in plans]
    with tempfile.TemporaryDirectory(prefix="turnkeep-chaos-") as tmp:
        root = Path(tmp)
        provider = _provider(faults, slots, rate_limit)
        provider.start()
        try:
            settings = _settings(provider.base_url, root / "sessions.db", slots)
            if mcp_crash_rate > 0:
                settings = _with_mcp(settings, mark)
            system = ActorSystem(ask_timeout=settings.timeouts.ask)
            # A parent's tool round holds its children's whole turns (run side by side).
            family = 2 if subagents else 1
            bound = turn_bound(
                settings,
                model_calls=_MODEL_CALLS * family,
                tool_rounds=_TOOL_ROUNDS * family + family - 1,
                retry_after=(faults.retry_after_ms or 0) / 1000,
                restart_wait=system.restart_wait,
                # Every turn running may have a request ahead of this one at the gate.
                gate_wait=0.0 if rate_limit is None else slots / rate_limit,
            )
            if subagents:
                settings = _with_subagents(settings, child_bound=bound.seconds / 2)
            credential = OAuthCredential(
                provider.token_url, DEFAULT_REFRESH_TOKEN, access_token="chaos-token"
            )
            violations, mcp_kills = _run_host(
                settings,
                system,
                credential,
                session_chaos(seed, actor_crash_rate, mcp_crash_rate),
                _HostRun(root, logs, workers, bound, tally, mark, mcp_crash_rate, seed),
            )
            runtime = system.metrics()
        finally:
            provider.stop()
        stats = provider.stats
        violations = (
            _turn_violations(logs, bound, tally.crashed_on)
            + _store_violations(root / "sessions.db", logs)
            + violations
        )
        children = 0
        if subagents:
            children, found = _families(root / "sessions.db", logs, settings)
            violations += found
    with tally.lock:
        violations += [f"an actor crashed by itself: {error}" for error in tally.other_errors]
    violations += [f"left behind: {leak}" for leak in leaks(before, _settle(before, mark))]
    return _build_report(
        mcp_kills=mcp_kills,
        children=children,
        options=options,
        duration=time.monotonic() - started,
        bound=bound,
        logs=logs,
        stats=stats,
        tally=tally,
        runtime=runtime,
        violations=violations,
    )


def _check_options(
    sessions: int,
    turns: int,
    actor_crash_rate: float,
    cancel_rate: float,
    mcp_crash_rate: float,
    rate_limit: float | None,
) -> None:
    """Raise ValueError for a number out of its range."""
    if sessions < 1 or turns < 1:
        raise ValueError(f"sessions and turns must be at least 1, got {sessions} and {turns}")
    if not all(0.0 <= rate <= 1.0 for rate in (actor_crash_rate, cancel_rate, mcp_crash_rate)):
        raise ValueError("actor_crash_rate, cancel_rate and mcp_crash_rate must be within [0, 1]")
    if rate_limit is not None and not rate_limit > 0:
        raise ValueError(f"rate_limit must be > 0 requests per second, got {rate_limit}")


def _provider(faults: FaultPlan, slots: int, rate_limit: float | None) -> FakeProvider:
    """The embedded provider the workload talks to, not started: the chaos scripts, ``faults``, an access
    token that expires every so many requests, and ``rate_limit`` requests per second (None: no limit)."""
    return FakeProvider(
        _SCRIPTS["answer"],
        scripts={**_SCRIPTS, "mcp": MCP_SCRIPT},
        faults=faults,
        context_window=_PROVIDER_WINDOW,
        max_body_bytes=_MAX_BODY_BYTES,
        token_expiry=TokenExpiry(requests_per_token=_REQUESTS_PER_TOKEN * slots),
        rate_limit=None
        if rate_limit is None
        else RateLimit(requests_per_minute=rate_limit * 60, burst_seconds=1.0),
    )


def session_chaos(seed: int, actor_crash_rate: float, mcp_crash_rate: float = 0.0) -> SessionChaos:
    """The crash policies of every session's actors, seeded with ``seed``: ``actor_crash_rate`` for its
    members and the gate, ``mcp_crash_rate`` for its MCP servers' actors."""
    policy = ChaosPolicy(seed=seed, crash_probability=actor_crash_rate)
    mcp_policy = ChaosPolicy(seed=seed, crash_probability=mcp_crash_rate)
    return SessionChaos(
        session=policy,
        chat_state=policy,
        sampler=policy,
        tools=policy,
        provider_gate=policy,
        mcp=mcp_policy,
    )


@dataclass(frozen=True)
class _HostRun:
    """What driving the host needs besides the host: the sessions' logs, where they live, how many drive at
    once, the bound on a turn, the tallies, and the MCP servers' crash rate."""

    root: Path
    logs: Sequence[_SessionLog]
    workers: int
    bound: TurnBound
    tally: _Tally
    mark: str
    mcp_crash_rate: float
    seed: int


def _run_host(
    settings: Settings,
    system: ActorSystem,
    credential: OAuthCredential,
    chaos: SessionChaos,
    run: _HostRun,
) -> tuple[list[str], int]:
    """Build the host under ``chaos`` on ``system``, drive every session's turns through it, then shut it
    down, whatever happened; return the violations seen on the way and how many MCP server processes were
    killed."""
    violations: list[str] = []
    host: AgentHost | None = None
    mcp_kills = 0
    try:
        system.dead_letters.subscribe(run.tally.dead_letter)
        watcher = system.spawn(ChildSpec("chaos-watcher", lambda: _Watcher(run.tally)))
        host = AgentHost(
            settings,
            credentials=credential,
            registry=lambda: _registry(run.mark),
            chaos=chaos,
            system=system,
        )
        if host.provider_gate is not None:
            system.watch(host.provider_gate, watcher)
        limits = _Limits(
            run.bound,
            start_wait=math.ceil(run.workers / settings.host.max_concurrent_turns) * run.bound.seconds,
            ask_timeout=settings.timeouts.ask,
            gate=_describe_gate(host),
            describe=host.describe,
        )
        with McpKiller(host.mcp_servers, run.mcp_crash_rate, run.seed) as killer:
            violations += _drive_all(host, run.root, run.logs, limits, run.workers, system, watcher)
        mcp_kills = killer.kills
    finally:
        violations += _shut_down(host, system)
    return violations, mcp_kills


def _with_mcp(settings: Settings, mark: str) -> Settings:
    """``settings`` with the chaos MCP server for every session, its tools allowed."""
    tools = msgspec.structs.replace(
        settings.tools, allow=[*settings.tools.allow, f"{MCP_NAME}__echo", f"{MCP_NAME}__slow"]
    )
    servers = {MCP_NAME: mcp_settings(_MARK, mark, settings.tools.shell_timeout)}
    return msgspec.structs.replace(settings, tools=tools, mcp_servers=servers)


def _with_subagents(settings: Settings, *, child_bound: float) -> Settings:
    """``settings`` whose ``general`` children are cancelled at the bound of a turn of their own."""
    general = AgentProfile(description="a part of the parent's task", deadline=child_bound)
    return msgspec.structs.replace(settings, agents=AgentsSettings(profiles={"general": general}))


def _families(path: Path, logs: Sequence[_SessionLog], settings: Settings) -> tuple[int, list[str]]:
    """How many children the sessions ran, and what is wrong with their families."""
    # A child ends at the latest when its tools are killed, after its parent's turn ended; then its end is
    # written (a few asks, each of which may wait out a restart).
    outlive = settings.tools.kill_after + 4 * settings.timeouts.ask
    roots = [log.plan.session_id for log in logs]
    with SessionStore.open(path) as store:
        children = sum(len(store.children(root)) for root in roots)
        return children, family_violations(store, roots, outlive=outlive)


def _drive_all(
    host: AgentHost,
    root: Path,
    logs: Sequence[_SessionLog],
    limits: _Limits,
    workers: int,
    system: ActorSystem,
    watcher: Address,
) -> list[str]:
    pending: queue.Queue[_SessionLog] = queue.Queue()
    for log in logs:
        pending.put(log)

    def work() -> None:
        while True:
            try:
                log = pending.get_nowait()
            except queue.Empty:
                return
            _watch(system, watcher, log.plan.session_id, host)
            _drive(host, root, log.plan, log, limits)

    threads = [threading.Thread(target=work, name=f"chaos-driver-{n + 1}") for n in range(workers)]
    for thread in threads:
        thread.start()
    per_session = len(logs[0].plan.turns) * (
        limits.start_wait + limits.bound.seconds + 4 * limits.ask_timeout
    )
    deadline = time.monotonic() + math.ceil(len(logs) / workers) * per_session
    problems = []
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            problems.append(f"{thread.name} did not finish its sessions in time")
    return problems


def _watch(system: ActorSystem, watcher: Address, session_id: str, host: AgentHost) -> None:
    path = SessionPath(session_id, host.supervisor.name)
    # Watching before the session starts is allowed: an address exists before its actor does.
    system.watch(system.address(path.subtree), watcher)
    for kind in (*MEMBERS, f"{MCP_CHILD}/{MCP_NAME}"):
        system.watch(system.address(path.member(kind)), watcher)


def _describe_gate(host: AgentHost) -> Callable[[], str]:
    limit = host.settings.host.max_concurrent_turns
    return lambda: f"{host.gate.running} of {limit} turn slots held, {host.gate.waiting} sessions waiting"


def _shut_down(host: AgentHost | None, system: ActorSystem) -> list[str]:
    problems = []
    try:
        if host is not None:
            host.shutdown(timeout=_SHUTDOWN_TIMEOUT)
    except Exception as exc:
        problems.append(f"the host did not shut down: {exc!r}")
    report = system.shutdown(timeout=_SHUTDOWN_TIMEOUT, reason="chaos run over")
    problems += [f"the runtime had to kill an actor: {what}" for what in report.forced]
    problems += [f"shutdown left the job {job} unfinished" for job in report.unfinished_jobs]
    problems += [f"shutdown left the thread {name} running" for name in report.leftover_threads]
    return problems
