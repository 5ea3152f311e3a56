"""`turnkeep chaos`: many sessions under provider faults, actor crashes and cancels, then the invariants.

A run opens ``sessions`` sessions of ``turns`` turns each against the embedded provider, whose fault plan
(the chosen profile's transient faults, expiring access tokens, a context window small enough that turns
compact, a body limit that some requests exceed) is seeded, while every actor of every session subtree
crashes with probability ``actor_crash_rate`` per message and a seeded fraction of the turns is cancelled
at a random point. Afterwards it checks that every turn converged within a bound derived from the retry
policy, that each session's stored history is what was acknowledged, and that nothing (thread, child
process, file descriptor) outlived the run; it prints the counts and any violation, and exits non-zero
when there is one. The same seed chooses the same workload and the same faults; the order in which the
sessions' requests interleave is up to the scheduler, so a replay injects the same mix, not necessarily
at the same instants.

With ``--kill-host-every S`` the run is of another kind (:mod:`._host_kills`): the host runs in a child
process killed with SIGKILL at random moments and started again on the same store, and the checks add
that no stored step was requested again and no side-effecting call ran twice.
"""

from ._bound import TurnBound, turn_bound
from ._host_kills import HostKillReport, host_kill_run, print_host_kill_report
from ._invariants import event_log_violations, history_violations
from ._report import ChaosReport, DeadLetterCount, print_report, replay_command
from ._resources import Resources, leaks
from ._run import chaos_run, run, session_chaos

__all__ = [
    "ChaosReport",
    "DeadLetterCount",
    "HostKillReport",
    "Resources",
    "TurnBound",
    "chaos_run",
    "event_log_violations",
    "history_violations",
    "host_kill_run",
    "leaks",
    "print_host_kill_report",
    "print_report",
    "replay_command",
    "run",
    "session_chaos",
    "turn_bound",
]
