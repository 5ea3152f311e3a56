"""The decisions of a server's life, without processes or clocks."""

from __future__ import annotations

from tool_bridge.mcp import ServerMachine, ServerStatus, Step


def machine() -> ServerMachine:
    return ServerMachine("fx", max_restarts=3, window=30.0, retry_every=60.0)


def test_the_first_start_is_generation_one_and_ready_once_connected() -> None:
    m = machine()
    assert m.start() == Step(connect=1)
    assert m.status is ServerStatus.STARTING
    assert m.connected(1) == Step()
    assert m.status is ServerStatus.READY


def test_failures_within_the_intensity_restart_and_one_more_makes_it_unavailable() -> None:
    m = machine()
    m.start()
    m.connected(1)
    for attempt, now in enumerate((1.0, 2.0, 3.0), start=2):
        assert m.failed(m.generation, now, "exited (code 1)") == Step(connect=attempt)
        assert m.status is ServerStatus.RESTARTING
        m.connected(attempt)
    step = m.failed(m.generation, 4.0, "exited (code 1)")
    assert m.status is ServerStatus.UNAVAILABLE and step.connect is None and step.retry_in == 60.0
    assert step.announce is not None and "unavailable after 3 restarts" in step.announce
    assert m.last_error == "exited (code 1)"


def test_failures_older_than_the_window_are_forgotten() -> None:
    m = machine()
    m.start()
    for now in (0.0, 10.0, 20.0, 31.0, 42.0):
        assert m.failed(m.generation, now, "x").connect is not None
    assert m.status is ServerStatus.RESTARTING and m.restarts == 5


def test_an_unavailable_server_is_retried_on_its_back_off_and_stays_so_until_a_retry_works() -> None:
    m = ServerMachine("fx", max_restarts=0, window=30.0, retry_every=60.0)
    m.start()
    m.failed(1, 0.0, "bad handshake")
    assert m.status is ServerStatus.UNAVAILABLE
    assert m.retry_due() == Step(connect=2)
    assert m.retry_due() == Step(), "one attempt at a time"
    assert m.failed(2, 60.0, "still bad") == Step(retry_in=60.0)
    assert m.status is ServerStatus.UNAVAILABLE
    assert m.retry_due() == Step(connect=3)
    step = m.connected(3)
    assert m.status is ServerStatus.READY and step.announce == "MCP server fx is available again"


def test_reconnect_starts_at_once_and_forgets_the_failures() -> None:
    m = ServerMachine("fx", max_restarts=1, window=30.0, retry_every=60.0)
    m.start()
    m.failed(1, 0.0, "x")
    m.failed(2, 1.0, "x")
    assert m.status is ServerStatus.UNAVAILABLE
    assert m.reconnect() == Step(connect=3)
    assert m.status is ServerStatus.RESTARTING
    m.connected(3)
    assert m.failed(3, 2.0, "x").connect == 4, "the failures before the reconnect no longer count"


def test_events_of_an_older_generation_and_after_stop_change_nothing() -> None:
    m = machine()
    m.start()
    m.failed(1, 0.0, "x")
    assert m.connected(1) == Step() and m.status is ServerStatus.RESTARTING
    assert m.failed(1, 0.5, "late") == Step() and m.restarts == 1
    m.stop()
    assert m.connected(2) == Step() and m.reconnect() == Step() and m.status is ServerStatus.STOPPED


def test_sessions_are_told_when_a_server_becomes_unavailable_and_when_it_is_back_only() -> None:
    from tool_bridge.mcp import McpServerState, status_notice

    down = McpServerState(
        "fx", ServerStatus.UNAVAILABLE, 3, 0, "exit 1", "fx is unavailable after 3 restarts"
    )
    up = McpServerState("fx", ServerStatus.READY, 3, 2)
    assert status_notice(ServerStatus.RESTARTING, down) == "fx is unavailable after 3 restarts"
    assert status_notice(ServerStatus.UNAVAILABLE, up) == "the MCP server fx is available again"
    assert status_notice(ServerStatus.RESTARTING, up) is None
    assert status_notice(ServerStatus.STARTING, up) is None
