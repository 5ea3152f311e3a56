"""What tests of an app built on turnkeep need: the embedded model provider (scripted answers, seeded
faults, expiring tokens, a small context window — on 127.0.0.1, no key, no network) and the chaos harness
that checks the convergence promise under actor crashes."""

from sampler.fake import (
    PROFILES,
    FakeProvider,
    FakeProviderError,
    Fault,
    FaultKind,
    FaultPlan,
    FinalAnswer,
    ProviderStats,
    Script,
    TokenExpiry,
    ToolStep,
)
from shell._chaos import ChaosReport, chaos_run, print_report, replay_command
from shell.session import SessionChaos

__all__ = [
    "PROFILES",
    "ChaosReport",
    "FakeProvider",
    "FakeProviderError",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FinalAnswer",
    "ProviderStats",
    "Script",
    "SessionChaos",
    "TokenExpiry",
    "ToolStep",
    "chaos_run",
    "print_report",
    "replay_command",
]
