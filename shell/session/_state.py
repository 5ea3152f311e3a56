"""What a session is and keeps across the incarnations of its SessionActor: options and runtime state."""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actors import Timer
from sampler import SamplerRuntime, ToolSpec
from tool_bridge.idempotency import Idempotency

from .. import turn as tm
from ..bridge import RecoveryBridge
from ..credentials import CredentialProvider
from ..doom_loop import DoomLoopDetector
from ..messages import UserPrompt
from ..usage import Price
from ._turn_gate import TurnGate

__all__ = ["SessionOptions", "SessionRuntime"]


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How one session runs its turns."""

    session_id: str
    model: str
    max_steps_per_turn: int = 100
    max_output_tokens: int | None = None
    compaction_threshold: float = 0.85
    max_compactions: int = 3
    min_shrink: float = 0.10
    auth_backoff: float = 0.5
    step_probe_after: float = 30.0
    """Seconds a step may stay silent before the session asks the sampler whether it is still running."""
    price: Price | None = None
    """The model's price from the config's ``[pricing]`` table, to put a cost on each turn's usage."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """The config's ``[pricing]`` table, for a session switched to another model."""
    resume_interrupted_turns: bool = True
    """Whether a turn the process running it did not live to end goes on from its stored steps when the
    session starts again (else it ends ``interrupted``)."""
    max_resumes_per_turn: int = 2
    """Times one turn may be resumed; the next time it is found interrupted it ends ``interrupted``."""

    def turn_settings(self) -> tm.TurnSettings:
        """The limits of each turn of the session."""
        return tm.TurnSettings(
            self.session_id,
            max_steps=self.max_steps_per_turn,
            compaction_threshold=self.compaction_threshold,
            min_shrink=self.min_shrink,
            probe_after=self.step_probe_after,
            model=self.model,
            price=self.price,
        )


@dataclass(eq=False)
class SessionRuntime:
    """The session's state that outlives an incarnation of its SessionActor: subscribers, the turn in
    flight and the prompts waiting behind it. Create one per session and capture it in the factory."""

    options: SessionOptions
    credentials: CredentialProvider
    tool_specs: tuple[ToolSpec, ...] = ()
    doom_loop: DoomLoopDetector = field(default_factory=DoomLoopDetector)
    subscribers: list[Any] = field(default_factory=list)
    prompts: deque[UserPrompt] = field(default_factory=deque)
    turn: tm.TurnMachine | None = None
    next_turn: int | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    gate: TurnGate | None = None
    unrecorded: list[Any] = field(default_factory=list)
    """Writes to the history that must not be lost but could not be made (the chat state was down), in
    order: made first thing by the next incarnation, and before any later write."""
    start_failures: int = 0
    generation: int = 0
    """How many times the session's subtree has been started (a restart of the whole subtree counts)."""
    turn_generation: int = 0
    """The generation the turn in flight began in."""
    last_active: float = field(default_factory=time.monotonic)
    sampler: SamplerRuntime | None = None
    """The session's sampler state, when known: read for :meth:`describe`; the host closes its connections
    once the subtree has stopped."""
    probe: Timer | None = None
    closing: bool = False
    """Set by whoever stops the session on purpose (close, shutdown): a turn cut off then is cancelled
    ``aborted``; cut off by its subtree giving up, it fails ``internal``."""
    observer: Callable[[str, int, object, list[Any]], None] | None = None
    """Told every input fed to the turn machine with the actions it returned (the host's telemetry)."""
    prepare_trace: Callable[[str, int, tm.Begin], str | None] | None = None
    """Begins the trace of a turn (session, turn, its ``Begin``) before its start is stored, and gives its
    W3C trace context, which the stored ``TurnStarted`` carries (the host's telemetry)."""
    traceparent: Callable[[str, int, str | None], str | None] | None = None
    """Gives the W3C trace context (session, turn, a model call's request id or None for the turn) that the
    turn's messages carry to the actors doing its work (the host's telemetry)."""
    idempotency_of: Callable[[str], Idempotency] = lambda _: Idempotency.SIDE_EFFECTING
    """The idempotency class of a tool by name, which decides whether a resumed turn runs a call again."""
    resuming: tuple[int, tm.ResumePlan] | None = None
    """A turn found interrupted that goes on as planned, once the host's turn limit lets it (before any
    waiting prompt)."""
    on_fenced: Callable[[], None] | None = None
    """Told once when the store refused a write because another host took the session: the host stops
    this copy of it (the session writes nothing more meanwhile)."""
    interrupted: Callable[[str, int], None] | None = None
    """Told (session, turn) when the session ends a turn its process did not live to end as interrupted
    (the host's telemetry)."""
    passivating: bool = False
    """Set by the session when it agreed to be passivated: it starts no turn until its next incarnation,
    and the host starts that incarnation at once if prompts came in meanwhile."""
    bridge: RecoveryBridge = field(init=False)

    def __post_init__(self) -> None:
        self.bridge = RecoveryBridge(
            max_compactions=self.options.max_compactions, auth_backoff=self.options.auth_backoff
        )

    @property
    def settled(self) -> bool:
        """No turn in flight, no prompt waiting and nothing waiting to be written: the session's subtree
        may be stopped without anything left to do."""
        return self.turn is None and self.resuming is None and not self.prompts and not self.unrecorded

    def describe(self) -> str:
        """A one-line account of the turn in flight and what waits behind it, for diagnostics."""
        now = "no turn" if self.turn is None else self.turn.describe()
        sampler = self.sampler.describe() if self.sampler is not None else "sampler unknown"
        return f"{now}; {len(self.prompts)} prompts waiting; {sampler}"
