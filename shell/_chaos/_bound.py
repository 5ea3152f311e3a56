"""How long a turn may take under the run's fault plan and retry policy."""

from __future__ import annotations

from dataclasses import dataclass

from ..bridge import MAX_AUTH_REFRESHES
from ..config import Settings
from ..credentials import REFRESH_TIMEOUT
from ..session import SessionOptions

__all__ = ["TurnBound", "turn_bound"]


@dataclass(frozen=True, slots=True)
class TurnBound:
    """How long a turn may take, from its start to its end, before it counts as hung; ``formula`` says
    how ``seconds`` was computed."""

    seconds: float
    formula: str


def turn_bound(
    settings: Settings,
    *,
    model_calls: int,
    tool_rounds: int,
    retry_after: float,
    restart_wait: float,
    gate_wait: float = 0.0,
) -> TurnBound:
    """How long a turn may take when each of its model calls spends its whole retry budget.

    A model call makes at most ``retry.max_attempts`` attempts, each silent for at most the idle timeout
    and followed by the longest back-off (``retry_after`` when the provider asks for longer than the
    policy's own). A turn makes ``model_calls`` calls, plus two compaction summaries per cycle (whole,
    then in chunks), the resubmissions after the auth refreshes one step may make, and one resubmission
    after a restart; a turn re-sends at most three times with a degraded projection; each auth refresh
    waits its back-off and may take the refresh timeout; its tools run at most ``tool_rounds`` batches,
    each within the shell timeout plus the kill delay; a restart makes messages wait up to
    ``restart_wait``, twice; against a rate-limited provider, each model call may also wait ``gate_wait``
    at the provider gate.
    """
    retry, timeouts, tools = settings.retry, settings.timeouts, settings.tools
    backoff = max(retry.max_delay * (1 + retry.jitter), retry_after)
    call = retry.max_attempts * (timeouts.idle + backoff)
    calls = model_calls + 2 * settings.compaction.max_cycles + MAX_AUTH_REFRESHES + 1
    reshaped = 3 * timeouts.idle
    auth_backoff = SessionOptions("-", "-").auth_backoff
    auth = sum(auth_backoff * n + REFRESH_TIMEOUT for n in range(1, MAX_AUTH_REFRESHES + 1))
    tool_time = tool_rounds * (tools.shell_timeout + tools.kill_after)
    restarts = 2 * restart_wait
    seconds = calls * (call + gate_wait) + reshaped + auth + tool_time + restarts
    formula = (
        f"{calls} model calls x {retry.max_attempts} attempts x ({timeouts.idle:g} s idle + {backoff:g} s "
        f"back-off) + 3 re-shaped x {timeouts.idle:g} s + {auth:g} s auth refreshes + {tool_rounds} tool "
        f"rounds x ({tools.shell_timeout:g} + {tools.kill_after:g}) s + 2 x {restart_wait:g} s restart "
        + (f"wait + {calls} x {gate_wait:g} s at the provider gate" if gate_wait else "wait")
        + f" = {seconds:.0f} s"
    )
    return TurnBound(seconds, formula)
