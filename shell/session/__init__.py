"""A session: its supervised subtree of actors, and what they keep between turns.

A session is four actors under one supervisor (see :func:`session_spec`): the :class:`SessionActor`, its
mailbox, which performs what the turn machine (:mod:`shell.turn`) decides; the :class:`ChatStateActor`,
which keeps the history, its repaired projection and its token estimate, and persists them; the sampler
and the tool runner. Their names are :class:`SessionPath` values. The host opens sessions
(:class:`OpenSession`) and admits their turns through one :class:`TurnGate`.

This wing imports the store, the turn machine, the configuration and the session vocabulary beside it
(events, messages, the recovery bridge, compaction, doom-loop detection); none of them imports it back.
"""

from ._actor import SessionActor
from ._chat_state import ChatStateActor, ChatStateOptions, write_to_store
from ._open import Built, OpenSession
from ._path import MEMBERS, SessionPath, check_session_id
from ._repair import plan_repair
from ._state import SessionOptions, SessionRuntime
from ._subscribers import publish
from ._tokens import TokenEstimator
from ._tree import SessionChaos, SessionParts, session_runtime, session_spec, tool_specs
from ._turn_gate import GateOpen, TurnGate

__all__ = [
    "MEMBERS",
    "Built",
    "ChatStateActor",
    "ChatStateOptions",
    "GateOpen",
    "OpenSession",
    "SessionActor",
    "SessionChaos",
    "SessionOptions",
    "SessionParts",
    "SessionPath",
    "SessionRuntime",
    "TokenEstimator",
    "TurnGate",
    "check_session_id",
    "plan_repair",
    "publish",
    "session_runtime",
    "session_spec",
    "tool_specs",
    "write_to_store",
]
