"""Telemetry on in-memory exporters: every finished span and every metric point, readable by the test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shell.config import TelemetrySettings
from shell.telemetry import Telemetry, start_telemetry


@dataclass
class Recorded:
    """A telemetry whose spans and metrics stay in memory."""

    telemetry: Telemetry
    spans_exporter: InMemorySpanExporter
    metrics_reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, point) of every data point of the metric ``name``."""
        data = self.metrics_reader.get_metrics_data()
        out: list[tuple[dict[str, Any], Any]] = []
        if data is None:
            return out
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        out += [(dict(point.attributes or {}), point) for point in metric.data.data_points]
        return out

    def total(self, name: str, **labels: str) -> float:
        """The sum of the counter ``name`` over the points whose labels include ``labels``."""
        return sum(
            point.value
            for attributes, point in self.points(name)
            if all(attributes.get(key) == value for key, value in labels.items())
        )


def record(settings: TelemetrySettings | None = None) -> Recorded:
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    telemetry = start_telemetry(
        settings or TelemetrySettings(enabled=True),
        provider="openai",
        span_exporter=exporter,
        metric_readers=[reader],
        environ={},
    )
    return Recorded(telemetry, exporter, reader)


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    made = record()
    yield made
    made.telemetry.shutdown()
