"""The invariants a run is checked against: the stored history and event log of each session."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from sampler import AssistantMessage, TextPart, ToolMessage, UserMessage

from .. import events as ev
from ..store import SessionStore

__all__ = ["event_log_violations", "history_violations"]


def history_violations(
    store: SessionStore,
    session_id: str,
    acknowledged: Mapping[int, str],
    refused: Iterable[str] = (),
) -> list[str]:
    """What is wrong with the stored history of ``session_id``, given the prompts acknowledged (turn
    number → text) and those refused: each acknowledged prompt must be stored exactly once, in its turn,
    and a refused one at most once; no message may be stored twice in the same turn; every tool call
    must have exactly one result (whatever it says), and every result a call — among the messages as
    they were appended, and in the projection the model is sent."""
    problems: list[str] = []
    stored = store.load_messages(session_id, include_replaced=True)
    originals = [m for m in stored if not m.is_summary]
    prompts: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    for m in originals:
        if isinstance(m.message, UserMessage):
            prompts[_text_of(m.message)].append(m.turn)
    for number, text in sorted(acknowledged.items()):
        turns = prompts.get(text, [])
        if len(turns) != 1:
            problems.append(f"the prompt of turn {number} is stored {len(turns)} times, not once")
        elif turns[0] != number:
            problems.append(f"the prompt of turn {number} is stored under turn {turns[0]}")
    for text in refused:
        if len(prompts.get(text, [])) > 1:
            problems.append(f"a refused prompt is stored {len(prompts[text])} times")
    first: dict[tuple[int, bytes], int] = {}
    for m in originals:
        key = (m.turn, msgspec.json.encode(m.message))
        if key in first:
            kind = type(m.message).__name__
            problems.append(f"message {m.seq} ({kind}, turn {m.turn}) duplicates message {first[key]}")
        else:
            first[key] = m.seq
    problems += _pairing([m.message for m in originals], "stored")
    problems += _pairing([m.message for m in store.load_messages(session_id)], "projection")
    return problems


def _text_of(message: UserMessage) -> str:
    return "".join(part.text for part in message.parts if isinstance(part, TextPart))


def _pairing(messages: Sequence[Any], where: str) -> list[str]:
    problems: list[str] = []
    calls: collections.Counter[str] = collections.Counter()
    results: collections.Counter[str] = collections.Counter()
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            results[message.result.call_id] += 1
    for call_id, count in calls.items():
        if count > 1:
            problems.append(f"{where}: tool call {call_id} appears {count} times")
        if results[call_id] != 1:
            problems.append(f"{where}: tool call {call_id} has {results[call_id]} results, not one")
    for call_id in results:
        if call_id not in calls:
            problems.append(f"{where}: a result answers tool call {call_id}, which no message made")
    return problems


def event_log_violations(store: SessionStore, session_id: str, observed: Mapping[int, str]) -> list[str]:
    """What is wrong with the stored event log of ``session_id``, given the end each acknowledged turn
    was seen to have (turn number → event class name, or "" when none was seen): each such turn must have
    started once and ended once, as it was seen to; no turn may have ended twice; the session must be
    idle."""
    problems: list[str] = []
    started: collections.Counter[int] = collections.Counter()
    ended: collections.defaultdict[int, list[str]] = collections.defaultdict(list)
    terminal = {cls.__name__ for cls in ev.TERMINAL_EVENTS}
    for event in store.load_events(session_id):
        if event.type == "TurnStarted":
            started[event.turn] += 1
        elif event.type in terminal:
            ended[event.turn].append(event.type)
    for number, seen in sorted(observed.items()):
        if started[number] != 1:
            problems.append(f"turn {number} is stored as started {started[number]} times")
        if len(ended[number]) != 1:
            problems.append(f"turn {number} has {len(ended[number])} stored ends, not one")
        elif seen and ended[number][0] != seen:
            problems.append(f"turn {number} was seen to end as {seen} but is stored as {ended[number][0]}")
    for number, ends in sorted(ended.items()):
        if number not in observed and len(ends) > 1:
            problems.append(f"turn {number} has {len(ends)} stored ends")
    status = store.get_session(session_id).status
    if status != "idle":
        problems.append(f"the session is left {status!r}")
    return problems
