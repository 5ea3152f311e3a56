"""turnkeep's actor runtime: supervised pykka actors, stable addresses, one shared trio loop.

It knows nothing about LLMs. See docs/runtime.md for a tour and an example.
"""

from ._strands import blocking
from .actor import Actor, handles
from .address import Address
from .chaos import ChaosPolicy, ChaosVerdict
from .dead_letters import DeadLetterLog
from .errors import (
    ActorError,
    ActorUnavailable,
    AskTimeout,
    ChaosCrash,
    ChildStartError,
    MessageDropped,
    Refuse,
    StuckHandler,
    SupervisorEscalation,
    UnhandledMessage,
)
from .io import IoLoop, IoLoopClosed, Job, JobCancelled, JobState, Timer, TimerCancelled
from .messages import DeadLetter, Down, ExitReason, JobFailed
from .supervisor import (
    ChildInfo,
    ChildSpec,
    Restart,
    RestartIntensity,
    StartChild,
    StopChild,
    Strategy,
    Supervisor,
    WhichChildren,
)
from .system import ActorSystem, ShutdownReport

__all__ = [
    "Actor",
    "ActorError",
    "ActorSystem",
    "ActorUnavailable",
    "Address",
    "AskTimeout",
    "ChaosCrash",
    "ChaosPolicy",
    "ChaosVerdict",
    "ChildInfo",
    "ChildSpec",
    "ChildStartError",
    "DeadLetter",
    "DeadLetterLog",
    "Down",
    "ExitReason",
    "IoLoop",
    "IoLoopClosed",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobState",
    "MessageDropped",
    "Refuse",
    "Restart",
    "RestartIntensity",
    "ShutdownReport",
    "StartChild",
    "StopChild",
    "Strategy",
    "StuckHandler",
    "Supervisor",
    "SupervisorEscalation",
    "Timer",
    "TimerCancelled",
    "UnhandledMessage",
    "WhichChildren",
    "blocking",
    "handles",
]
