"""Telemetry leaves the host: a real Prometheus server scrapes its metrics, and spans reach an OTLP/HTTP
receiver as protobuf."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from actors import ChaosPolicy
from sampler import ForgetTurn
from sampler.fake import FakeProvider, Script
from shell import events as ev
from shell.config import TelemetrySettings, load_settings
from shell.credentials import StaticKey
from shell.facade import Host
from shell.session import SessionChaos
from shell.telemetry import TelemetryError, start_telemetry
from tests._loopback import QuietHandler, serving_http
from tests._waiting import wait_until
from tests.shell.telemetry._prometheus import REQUIRE_ENV, PrometheusUnavailable, free_port, prometheus_server

KEY = StaticKey(env_var="K", environ={"K": "sk-telemetry-test-1234"})


def host_settings(provider: FakeProvider, tmp_path: Path, **env: str) -> Any:
    return load_settings(
        environ={
            "TURNKEEP_PROVIDER__BASE_URL": provider.base_url,
            "TURNKEEP_PROVIDER__MODEL": "fake-model",
            "TURNKEEP_STORE__PATH": str(tmp_path / "store.db"),
            "TURNKEEP_TELEMETRY__ENABLED": "true",
            **env,
        }
    )


def query(base: str, promql: str) -> list[dict[str, Any]]:
    reply = httpx.get(base + "/api/v1/query", params={"query": promql}, timeout=5.0)
    reply.raise_for_status()
    body = reply.json()
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def value_of(base: str, promql: str) -> float | None:
    result = query(base, promql)
    return float(result[0]["value"][1]) if result else None


@contextmanager
def prometheus(targets: list[str]) -> Iterator[str]:
    try:
        with prometheus_server(targets) as url:
            yield url
    except PrometheusUnavailable as error:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"Prometheus is required ({REQUIRE_ENV}=1) but cannot be started: {error}")
        pytest.skip(f"no Prometheus server can be started here: {error}")


def test_a_real_prometheus_scrapes_the_turn_and_restart_counters_of_a_running_host(tmp_path: Path) -> None:
    # The sampler crashes each time it is told a turn has ended: one restart per turn, the turns unharmed.
    chaos = SessionChaos(sampler=ChaosPolicy(crash_probability=1.0, crash_on=(ForgetTurn,)))
    with FakeProvider(Script.echo()) as provider:
        settings = host_settings(provider, tmp_path, TURNKEEP_TELEMETRY__PROMETHEUS_PORT="0")
        with Host(settings, credentials=KEY, chaos=chaos) as host:
            telemetry = host.agent_host.telemetry
            assert telemetry is not None and telemetry.prometheus_address is not None
            address, port = telemetry.prometheus_address
            assert address == "127.0.0.1"
            session = host.open(tmp_path / "ws")
            assert isinstance(session.run("one"), ev.TurnCompleted)
            assert isinstance(session.run("two"), ev.TurnCompleted)
            assert wait_until(lambda: host.agent_host.system.metrics().get("restarts", 0) >= 2, 10.0)
            scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5.0).text
            assert "turnkeep_turns_total{" in scraped
            with prometheus([f"127.0.0.1:{port}"]) as base:
                turns = 'sum(turnkeep_turns_total{outcome="completed"})'
                restarts = 'sum(turnkeep_actor_restarts_total{actor_kind="sampler"})'
                assert wait_until(lambda: value_of(base, turns) == 2.0, 20.0), query(base, turns)
                assert wait_until(lambda: (value_of(base, restarts) or 0) >= 2.0, 20.0), query(base, restarts)
                active = 'turnkeep_sessions{state="active"}'
                assert wait_until(lambda: value_of(base, active) == 1.0, 20.0), query(base, active)


class _Receiver(QuietHandler):
    """An OTLP/HTTP trace receiver: decodes each export request and keeps it."""

    received: list[ExportTraceServiceRequest]
    arrived: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        type(self).arrived.set()  # before the reply: the exporter returns as soon as it has read it
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200 if self.path == "/v1/traces" else 404)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"received": [], "arrived": threading.Event()})
    with serving_http(handler) as endpoint:
        yield endpoint, handler


def span_names(handler: type[_Receiver]) -> list[str]:
    return [
        span.name
        for request in handler.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def test_spans_reach_an_otlp_http_receiver_named_in_the_settings(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, handler), FakeProvider(Script.echo()) as provider:
        settings = host_settings(provider, tmp_path, TURNKEEP_TELEMETRY__OTLP_ENDPOINT=endpoint)
        with Host(settings, credentials=KEY) as host:
            host.open(tmp_path / "ws").run("hello")
        # Shutting the host down flushed the batch.
        assert handler.arrived.is_set()
    assert sorted(span_names(handler)) == ["chat fake-model", "invoke_agent"]
    # However the batch processor split them into posts, every span names the service.
    resources = [resource for request in handler.received for resource in request.resource_spans]
    for resource in resources:
        attributes = {kv.key: kv.value.string_value for kv in resource.resource.attributes}
        assert attributes["service.name"] == "turnkeep"
    spans = [span for resource in resources for scope in resource.scope_spans for span in scope.spans]
    turn = next(span for span in spans if span.name == "invoke_agent")
    chat = next(span for span in spans if span.name != "invoke_agent")
    assert chat.trace_id == turn.trace_id and chat.parent_span_id == turn.span_id
    attributes = {kv.key: kv.value for kv in chat.attributes}
    assert attributes["gen_ai.request.model"].string_value == "fake-model"
    assert attributes["gen_ai.usage.input_tokens"].int_value > 0


def test_the_standard_otlp_endpoint_variable_is_honoured_when_the_settings_name_none() -> None:
    with otlp_receiver() as (endpoint, handler):
        telemetry = start_telemetry(
            TelemetrySettings(enabled=True, service_name="from-env"),
            provider="anthropic",
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
        )
        span = telemetry.tracer_provider.get_tracer("t").start_span("probe")
        span.end()
        telemetry.shutdown()
        assert handler.arrived.is_set()
    assert span_names(handler) == ["probe"]


def test_a_sampling_ratio_of_zero_records_no_span_but_still_counts(tmp_path: Path) -> None:
    from tests.shell.telemetry.conftest import record

    recorded = record(TelemetrySettings(enabled=True, sampling=0.0))
    from shell import turn as tm
    from shell.messages import UserPrompt

    recorder = recorded.telemetry.recorder
    recorder.observe("s", 1, tm.Begin(UserPrompt("go")), [tm.Finish(ev.TurnCompleted("s", 1, "done", 1))])
    recorded.telemetry.shutdown()
    assert recorded.spans() == []
    assert recorded.total("turnkeep.turns", outcome="completed") == 1


def test_a_prometheus_port_that_is_taken_is_a_clear_error() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(TelemetryError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            start_telemetry(
                TelemetrySettings(enabled=True, prometheus_port=port), provider="openai", environ={}
            )
    assert free_port() > 0
