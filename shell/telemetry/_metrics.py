"""The host's instruments on an OpenTelemetry meter: what is counted and measured, with bounded labels.

Names follow OpenTelemetry's style (dots, units in ``unit``); the Prometheus reader turns them into
``turnkeep_turns_total``, ``turnkeep_turn_duration_seconds`` and so on. Labels never hold ids.

Counters are :class:`Tally` objects: a count is a dict update, and the totals are handed to the meter
only when metrics are collected (as observable counters, which report the same cumulative sums a
synchronous counter would). Every count made through the SDK's own counter walks its measurement
pipeline, which cost more than the rest of the turn's telemetry put together but the span export.
Histograms are the SDK's; each is recorded with a label set built once per set of label values and kept
(the SDK copies what it is given, and these are never changed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from sampler.gate import GateSnapshot

from ..usage import TokenUsage

__all__ = ["HostReadings", "Instruments", "Tally"]

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True, slots=True)
class HostReadings:
    """Where the gauges read the host's state, at collection time: ``sessions`` gives (active,
    passivated); ``gate`` the provider gate's snapshot, None when the host has no gate or it did not
    answer in time."""

    sessions: Callable[[], tuple[int, int]]
    gate: Callable[[], GateSnapshot | None]


class Tally:
    """A monotonic counter whose labels are ``labels`` (names, in order): :meth:`add` counts under the
    label values given in that order; the meter reads the totals when it collects. Thread-safe."""

    def __init__(self, meter: Meter, name: str, labels: tuple[str, ...], *, unit: str = "", description: str):
        self.labels = labels
        self._lock = threading.Lock()
        self._totals: dict[tuple[str, ...], float] = {}
        meter.create_observable_counter(name, [self._observe], unit=unit, description=description)

    def add(self, amount: float, *values: str) -> None:
        """Count ``amount`` (>= 0) under the label values ``values``, one per label name."""
        with self._lock:
            self._totals[values] = self._totals.get(values, 0) + amount

    def total(self, *values: str) -> float:
        """What was counted under exactly ``values`` so far."""
        with self._lock:
            return self._totals.get(values, 0)

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            totals = list(self._totals.items())
        return [Observation(total, dict(zip(self.labels, values, strict=True))) for values, total in totals]


def histogram_labels(key: tuple[str, ...]) -> dict[str, str]:
    """The labels of a histogram measurement named by ``key``: ``("turn", outcome)``, ``("first_token",
    model)``, ``("tool", tool)``, ``("model_call", model)`` or ``("model_call", model, error type)``."""
    match key:
        case ("turn", outcome):
            return {"outcome": outcome}
        case ("first_token", model):
            return {"model": model}
        case ("tool", tool):
            return {"tool": tool}
        case ("model_call", model):
            return {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        case ("model_call", model, error):
            return {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "error.type": error}
    raise ValueError(f"not a histogram's label key: {key!r}")


class Instruments:
    """Every counter, histogram and gauge the host reports, created once on ``meter``."""

    def __init__(self, meter: Meter, readings: HostReadings | None = None) -> None:
        self.turns = Tally(
            meter, "turnkeep.turns", ("outcome", "kind"), description="Turns ended, by outcome and kind"
        )
        self.turn_duration = meter.create_histogram(
            "turnkeep.turn.duration",
            unit="s",
            description="Turn duration",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self.model_calls = Tally(
            meter,
            "turnkeep.model_calls",
            ("model", "outcome"),
            description="Model calls ended, by model and outcome",
        )
        self.model_latency = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Model call duration, retries included",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self.first_token = meter.create_histogram(
            "turnkeep.model_call.time_to_first_token",
            unit="s",
            description="Time from sending a model call to its first streamed text",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self.retries = Tally(
            meter, "turnkeep.retries", ("kind",), description="Model call retries, by error kind"
        )
        self.tokens = Tally(
            meter,
            "turnkeep.tokens",
            ("direction", "model"),
            unit="{token}",
            description="Tokens reported by the provider, by direction and model",
        )
        self.tool_calls = Tally(
            meter,
            "turnkeep.tool_calls",
            ("tool", "outcome"),
            description="Tool calls ended, by tool and outcome",
        )
        self.tool_duration = meter.create_histogram(
            "turnkeep.tool_call.duration",
            unit="s",
            description="Tool call duration",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self.compactions = Tally(meter, "turnkeep.compactions", ("ok",), description="Compactions, by result")
        self.gate_waits = Tally(
            meter,
            "turnkeep.gate.queued",
            ("reason",),
            description="Model calls reported waiting at the provider gate, by reason",
        )
        kind = ("actor_kind",)
        self.restarts = Tally(
            meter, "turnkeep.actor.restarts", kind, description="Actor restarts, by actor kind"
        )
        self.crashes = Tally(
            meter, "turnkeep.actor.crashes", kind, description="Actor crashes, by actor kind"
        )
        self.escalations = Tally(
            meter,
            "turnkeep.supervisor.escalations",
            kind,
            description="Supervisors that gave up, by actor kind",
        )
        self.dead_letters = Tally(
            meter,
            "turnkeep.dead_letters",
            kind,
            description="Messages not handled, by the kind of actor they were for",
        )
        self._labels: dict[tuple[str, ...], dict[str, str]] = {}
        if readings is not None:
            self._observe_host(meter, readings)

    def record_turn(self, seconds: float, outcome: str) -> None:
        """Record a turn's duration under its ``outcome``."""
        self.turn_duration.record(seconds, self._label_set(("turn", outcome)))

    def record_first_token(self, seconds: float, model: str) -> None:
        """Record a model call's time to its first token under its ``model``."""
        self.first_token.record(seconds, self._label_set(("first_token", model)))

    def record_model_call(self, seconds: float, model: str, error: str | None) -> None:
        """Record a model call's duration (retries included) under ``gen_ai.operation.name`` ``chat``,
        its ``gen_ai.request.model`` and, for a call that did not complete, its ``error.type``."""
        key = ("model_call", model) if error is None else ("model_call", model, error)
        self.model_latency.record(seconds, self._label_set(key))

    def record_tool(self, seconds: float, tool: str) -> None:
        """Record a tool call's duration under its ``tool``."""
        self.tool_duration.record(seconds, self._label_set(("tool", tool)))

    def _label_set(self, key: tuple[str, ...]) -> dict[str, str]:
        """The label set ``key`` (a histogram's kind, then its label values) names, built once."""
        labels = self._labels.get(key)
        if labels is None:
            labels = self._labels[key] = histogram_labels(key)
        return labels

    def count_tokens(self, tokens: TokenUsage, model: str) -> None:
        """Add one call's reported tokens: input (cached included), output, and the cached and reasoning
        parts apart."""
        for direction, value in (
            ("input", tokens.input_tokens),
            ("output", tokens.output_tokens),
            ("cached_input", tokens.cached_tokens),
            ("reasoning", tokens.reasoning_tokens),
        ):
            if value:
                self.tokens.add(value, direction, model)

    def _observe_host(self, meter: Meter, readings: HostReadings) -> None:
        def sessions(options: CallbackOptions) -> Iterable[Observation]:
            active, passivated = readings.sessions()
            return [
                Observation(active, {"state": "active"}),
                Observation(passivated, {"state": "passivated"}),
            ]

        def gate_queue(options: CallbackOptions) -> Iterable[Observation]:
            snapshot = readings.gate()
            if snapshot is None:
                return []
            waiting = [Observation(n, {"priority": str(p)}) for p, n in sorted(snapshot.waiting.items())]
            return waiting or [Observation(0, {"priority": "0"})]

        def gate_in_flight(options: CallbackOptions) -> Iterable[Observation]:
            snapshot = readings.gate()
            return [] if snapshot is None else [Observation(snapshot.in_flight)]

        def gate_cool_down(options: CallbackOptions) -> Iterable[Observation]:
            snapshot = readings.gate()
            return [] if snapshot is None else [Observation(snapshot.cool_down)]

        meter.create_observable_gauge("turnkeep.sessions", [sessions], description="Open sessions, by state")
        meter.create_observable_gauge(
            "turnkeep.gate.waiting",
            [gate_queue],
            description="Model calls waiting at the provider gate, by priority",
        )
        meter.create_observable_gauge(
            "turnkeep.gate.in_flight",
            [gate_in_flight],
            description="Model calls the provider gate let through",
        )
        meter.create_observable_gauge(
            "turnkeep.gate.cool_down",
            [gate_cool_down],
            unit="s",
            description="Seconds left of the gate's cool-down",
        )
