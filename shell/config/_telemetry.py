"""The ``[telemetry]`` settings: OpenTelemetry traces and metrics, and the Prometheus scrape endpoint."""

from __future__ import annotations

import msgspec

from ._checks import is_number

__all__ = ["TelemetrySettings"]


class TelemetrySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[telemetry]``: what the host exports about its turns, model calls, tools and actors.

    Off by default (``enabled = false``): then nothing is recorded and nothing is started. When on,
    spans (GenAI semantic conventions) go over OTLP/HTTP to ``otlp_endpoint`` (unset: the standard
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` variable, and no trace export when neither is set), a share
    ``sampling`` (0 to 1) of the turns is traced, and metrics are served in Prometheus text format on
    ``prometheus_host:prometheus_port`` when a port is given (0: any free port). Prompt and completion
    text go into spans only with ``record_content = true``, always through the host's secret redaction.
    """

    enabled: bool = False
    otlp_endpoint: str | None = None
    service_name: str = "turnkeep"
    sampling: float = 1.0
    record_content: bool = False
    prometheus_port: int | None = None
    prometheus_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        sampling = self.sampling
        if not is_number(sampling):
            raise ValueError(f"telemetry.sampling: must be a number from 0 to 1, got {sampling!r}")
        if not 0 <= sampling <= 1:
            raise ValueError(f"telemetry.sampling: must be a number from 0 to 1, got {sampling!r}")
        port = self.prometheus_port
        if port is not None and (isinstance(port, bool) or not 0 <= port <= 65535):
            raise ValueError(f"telemetry.prometheus_port: must be a port from 0 to 65535, got {port!r}")
        if not self.service_name.strip():
            raise ValueError("telemetry.service_name: must not be empty")
        if not self.prometheus_host.strip():
            raise ValueError("telemetry.prometheus_host: must not be empty")
        endpoint = self.otlp_endpoint
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"telemetry.otlp_endpoint: must be an http:// or https:// URL, got {endpoint!r}")
