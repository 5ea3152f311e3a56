"""Telemetry: what a host tells operators about its turns, model calls, tools and actors.

- Traces (OpenTelemetry, GenAI semantic conventions): a span per turn (``invoke_agent``), a child per
  model call (``chat {model}``, with ``gen_ai.*`` attributes and ``error.type`` = the failure kind), per
  tool call (``execute_tool {tool}``) and per compaction; retries, projection fallbacks, gate waits,
  credential refreshes and restarts are span events. Exported over OTLP/HTTP.
- Metrics (OpenTelemetry metrics API, also served in Prometheus text format): turns by outcome and kind
  and their duration, model calls, latency and time to first token, retries, tokens by direction and
  model, tool calls and their duration, compactions, actor restarts, crashes, supervisor escalations and
  dead letters by actor kind, sessions active and passivated, the provider gate's queue and cool-down.
- Trace context (W3C ``traceparent``) in the messages that do a turn's work — the sampler's ``Sample``
  (and from there the provider request's header), the tool bridge's ``RunTools`` — and in the stored
  ``TurnStarted`` event, so a host taking over a turn its process did not end continues its trace.

Off unless ``[telemetry] enabled = true``; a host without it does not import this package. Needs
``pip install 'turnkeep[telemetry]'``; without it, importing this package raises
:class:`~shell._extras.MissingExtra` naming that extra.
"""

from .._extras import needs_extra

with needs_extra("telemetry", "telemetry"):
    from ._host import start_host_telemetry
    from ._kinds import actor_kind
    from ._metrics import HostReadings, Instruments
    from ._recorder import TurnRecorder
    from ._setup import Telemetry, TelemetryError, start_telemetry

__all__ = [
    "HostReadings",
    "Instruments",
    "Telemetry",
    "TelemetryError",
    "TurnRecorder",
    "actor_kind",
    "start_host_telemetry",
    "start_telemetry",
]
