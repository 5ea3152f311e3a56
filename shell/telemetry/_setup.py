"""Starting and stopping a host's telemetry: the tracer and meter providers, their exporters, the scrape
endpoint, and the hooks into the actor system."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from actors.messages import DeadLetter

from .. import turn as tm
from ..config import TelemetrySettings
from ..store import SessionStore
from ._kinds import actor_kind
from ._metrics import HostReadings, Instruments
from ._recorder import TurnRecorder
from ._sampling import TurnIds
from ._stored import stored_traceparent

__all__ = ["Telemetry", "TelemetryError", "start_telemetry"]

logger = logging.getLogger("turnkeep.telemetry")

_OTLP_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_TRACES_PATH = "/v1/traces"


class TelemetryError(RuntimeError):
    """Telemetry could not be started: the Prometheus port could not be bound (the message says which)."""


class Telemetry:
    """A host's telemetry, running: hand :meth:`observe` every turn observation and :meth:`supervision`
    every supervision fact; :meth:`shutdown` ends the open spans with an error status, flushes the
    exporters and closes the scrape endpoint."""

    def __init__(
        self,
        recorder: TurnRecorder,
        instruments: Instruments,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        server: Any | None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.recorder = recorder
        self.instruments = instruments
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self._server = server
        self._registry = registry
        self._stopped = False

    @property
    def prometheus_address(self) -> tuple[str, int] | None:
        """Where the metrics are served in Prometheus text format (``/metrics``), or None."""
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def prometheus_text(self) -> bytes:
        """The metrics now, in Prometheus text format (what the scrape endpoint and ``turnkeep serve``'s
        ``/metrics`` answer)."""
        return b"" if self._registry is None else generate_latest(self._registry)

    def observe(self, session_id: str, number: int, message: object, actions: list[Any]) -> None:
        """See :meth:`TurnRecorder.observe`; a failure is logged, never raised into the session."""
        try:
            self.recorder.observe(session_id, number, message, actions)
        except Exception:
            logger.exception("telemetry: recording turn %s of session %s failed", number, session_id)

    def prepare(self, session_id: str, number: int, begin: tm.Begin) -> str | None:
        """See :meth:`TurnRecorder.prepare`; a failure is logged and gives None (no context)."""
        return self._context(lambda: self.recorder.prepare(session_id, number, begin), session_id, number)

    def traceparent(self, session_id: str, number: int, request_id: str | None = None) -> str | None:
        """See :meth:`TurnRecorder.traceparent`; a failure is logged and gives None (no context)."""
        find = self.recorder.traceparent
        return self._context(lambda: find(session_id, number, request_id), session_id, number)

    @staticmethod
    def _context(find: Callable[[], str | None], session_id: str, number: int) -> str | None:
        """``find()``, the trace context of turn ``number``; None, logged, when it fails."""
        try:
            return find()
        except Exception:
            logger.exception(
                "telemetry: the trace context of turn %s of session %s failed", number, session_id
            )
            return None

    def interrupted(self, store: SessionStore, session_id: str, number: int) -> None:
        """Record that this host ended as interrupted the turn ``number`` its process did not live to end
        (see :meth:`TurnRecorder.interrupted`), in the trace stored with the turn's ``TurnStarted`` event in
        ``store``. A failure (the store cannot be read, say) is logged, never raised."""
        try:
            self.recorder.interrupted(session_id, number, stored_traceparent(store, session_id, number))
        except Exception:
            logger.exception(
                "telemetry: recording the interrupted turn %s of session %s failed", number, session_id
            )

    def supervision(self, fact: str, address: str) -> None:
        """Count a supervision fact (``restart``, ``escalation``, ``crash``) of the actor at ``address``."""
        kind = actor_kind(address)
        if fact == "restart":
            self.instruments.restarts.add(1, kind)
        elif fact == "escalation":
            self.instruments.escalations.add(1, kind)
        elif fact == "crash":
            self.instruments.crashes.add(1, kind)

    def dead_letter(self, letter: DeadLetter) -> None:
        """Count a message that was not handled, by the kind of actor it was for."""
        self.instruments.dead_letters.add(1, actor_kind(letter.address))

    def shutdown(self) -> None:
        """End what is open, export what is left, stop serving metrics. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.recorder.close("the host stopped while the turn ran")
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def start_telemetry(
    settings: TelemetrySettings,
    *,
    provider: str,
    readings: HostReadings | None = None,
    span_exporter: SpanExporter | None = None,
    metric_readers: Sequence[MetricReader] = (),
    environ: Mapping[str, str] | None = None,
) -> Telemetry:
    """Start telemetry as ``settings`` say, for a host whose model provider is ``provider``.

    Spans go to ``span_exporter`` when given (synchronously, for tests), else over OTLP/HTTP in batches
    to ``settings.otlp_endpoint`` or the ``OTEL_EXPORTER_OTLP_ENDPOINT`` of ``environ`` (no export when
    neither is set). Metrics are read by ``metric_readers`` and, with a ``prometheus_port``, served in
    Prometheus text format. Raises :class:`TelemetryError` when that port cannot be bound.
    """
    env = os.environ if environ is None else environ
    resource = Resource.create({"service.name": settings.service_name})
    sampler = ParentBased(TraceIdRatioBased(settings.sampling))
    # The recorder decides a turn's sampling before it starts a span, with this sampler and these ids.
    tracer_provider = TracerProvider(resource=resource, sampler=sampler, id_generator=TurnIds())
    if span_exporter is not None:
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    else:
        exporter = _otlp_exporter(settings, env)
        if exporter is not None:
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    readers = list(metric_readers)
    # Always readable in Prometheus text (turnkeep serve's /metrics); served on a port of its own on request.
    registry = CollectorRegistry(auto_describe=True)
    readers.append(PrometheusMetricReader(registry=registry))
    # Exemplars link a measurement to the span current in its context; the recorder never makes a span
    # current (its spans are not those of the threads recording), so none would be kept: don't look.
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, exemplar_filter=AlwaysOffExemplarFilter()
    )
    server = None
    if settings.prometheus_port is not None:
        try:
            server, _ = start_http_server(settings.prometheus_port or 0, settings.prometheus_host, registry)
        except OSError as error:
            tracer_provider.shutdown()
            meter_provider.shutdown()
            where = f"{settings.prometheus_host}:{settings.prometheus_port}"
            raise TelemetryError(f"cannot serve metrics on {where}: {error}") from error
    instruments = Instruments(meter_provider.get_meter("turnkeep"), readings)
    recorder = TurnRecorder(
        tracer_provider.get_tracer("turnkeep"),
        instruments,
        provider=provider,
        record_content=settings.record_content,
    )
    return Telemetry(recorder, instruments, tracer_provider, meter_provider, server, registry)


def _otlp_exporter(settings: TelemetrySettings, env: Mapping[str, str]) -> OTLPSpanExporter | None:
    endpoint = settings.otlp_endpoint or env.get(_OTLP_ENV, "").strip() or None
    if endpoint is None:
        return None
    endpoint = endpoint.rstrip("/")
    if not endpoint.endswith(_TRACES_PATH):
        endpoint += _TRACES_PATH
    return OTLPSpanExporter(endpoint=endpoint, timeout=10)
