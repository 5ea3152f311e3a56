"""Many sessions sharing one MCP server that is killed again and again: every call ends exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests._waiting import wait_until
from tests.tool_bridge.conftest import call
from tests.tool_bridge.mcp.conftest import MakeMcpRig, fixture_settings, kill_group, read_pid
from tool_bridge import ToolCallBegan, ToolsFinished
from tool_bridge.mcp import ServerStatus

SESSIONS = 8
ROUNDS = 25
KILL_EVERY = 3
"""A kill every third round: one every 24 calls, 8 in all."""


def test_200_calls_across_8_sessions_while_the_server_is_killed_every_20_or_so(
    make_mcp_rig: MakeMcpRig, tmp_path: Path
) -> None:
    pidfile = tmp_path / "server.pid"
    settings = fixture_settings(pidfile, max_restarts=20, restart_window=60.0, startup_timeout=10.0)
    mcp = make_mcp_rig(settings, sessions=SESSIONS)
    pid = read_pid(pidfile)
    kills = 0
    for round_ in range(ROUNDS):
        batch = f"r{round_}"
        first = 1
        if round_ % KILL_EVERY == KILL_EVERY - 1:
            # One call is in the server when it dies; the others arrive while it restarts.
            mcp.rigs[0].run(call(f"{batch}-0", "fx__slow", seconds=1), batch=batch)
            mcp.rigs[0].expect(ToolCallBegan, lambda m, b=batch: m.batch_id == b)
            kill_group(pid)
            kills += 1
            # The others arrive once the server is known to be down (sent before, they would be in flight).
            assert wait_until(lambda k=kills: mcp.handle.state().restarts == k, 10.0)
        else:
            first = 0
        for index in range(first, SESSIONS):
            mcp.rigs[index].run(call(f"{batch}-{index}", "fx__echo", text=f"{batch}-{index}"), batch=batch)
        for rig in mcp.rigs:
            rig.finished(batch, timeout=30)
        if first:
            pid = read_pid(pidfile, other_than=pid)
    outcomes = []
    for rig in mcp.rigs:
        finished = rig.all_heard(ToolsFinished)
        assert Counter(f.batch_id for f in finished) == Counter({f"r{r}": 1 for r in range(ROUNDS)})
        outcomes += [outcome for each in finished for outcome in each.outcomes]
    assert len(outcomes) == SESSIONS * ROUNDS == 200
    assert len({outcome.call_id for outcome in outcomes}) == 200
    failed = [outcome for outcome in outcomes if outcome.is_error]
    assert len(failed) <= 10, [(o.call_id, o.content[:90]) for o in failed]
    for outcome in failed:
        assert outcome.content == (
            "the MCP server fx was killed by signal 9 (SIGKILL) during the call; it is being restarted"
        )
    assert all(o.content == o.call_id for o in outcomes if not o.is_error and o.tool == "fx__echo")
    assert max(o.duration for o in outcomes) <= settings.startup_timeout + settings.tool_timeout
    assert kills == 8
    mcp.wait_status(ServerStatus.READY)
    assert mcp.handle.state().restarts == kills
