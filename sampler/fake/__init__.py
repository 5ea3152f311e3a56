"""An embedded model provider on loopback, with a scripted model and scripted faults.

`FakeProvider` is a real HTTP server (hypercorn, in a thread of its own) that speaks OpenAI chat
completions (`POST /v1/chat/completions`) and Anthropic messages (`POST /v1/messages`), streamed or not,
plus an OAuth-style refresh endpoint (`POST /oauth/token`). What it answers comes from a `Script`; what
goes wrong comes from a `FaultPlan`. Everything is deterministic for a given plan and request order.

    with FakeProvider(Script.task([ToolStep([("write_file", {"path": "a.txt"})]), FinalAnswer("done")]),
                      faults=FaultPlan.scripted([Fault.rate_limit(retry_after=1), None])) as provider:
        ...  # point any client at provider.base_url
"""

from ._auth import DEFAULT_REFRESH_TOKEN, TokenExpiry
from ._overflow import OverflowStyle
from ._ratelimit import RateLimit
from ._server import FakeProvider, FakeProviderError, serve_forever
from ._stats import ProviderStats, Rejection
from .faults import FAULT_KINDS, PROFILES, STATUS_KINDS, TRANSIENT_KINDS, Fault, FaultKind, FaultPlan
from .scenarios import SCENARIOS, HostNeeds, Scenario, UnknownScenario, scenario
from .script import SUMMARY_MARKER, SUMMARY_PREFIX, Conversation, FinalAnswer, Script, Step, ToolStep

__all__ = [
    "DEFAULT_REFRESH_TOKEN",
    "FAULT_KINDS",
    "PROFILES",
    "SCENARIOS",
    "STATUS_KINDS",
    "SUMMARY_MARKER",
    "SUMMARY_PREFIX",
    "TRANSIENT_KINDS",
    "Conversation",
    "FakeProvider",
    "FakeProviderError",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FinalAnswer",
    "HostNeeds",
    "OverflowStyle",
    "ProviderStats",
    "RateLimit",
    "Rejection",
    "Scenario",
    "Script",
    "Step",
    "TokenExpiry",
    "ToolStep",
    "UnknownScenario",
    "scenario",
    "serve_forever",
]
