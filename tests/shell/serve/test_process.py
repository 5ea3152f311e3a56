"""``turnkeep serve`` as a process: killed with SIGKILL mid-turn and started again, its sessions resume
from the store and a reconnecting reader gets every stored event it missed; the command's refusals."""

from __future__ import annotations

import httpx
import pytest

from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from shell.cli import main
from shell.store import SessionStore
from tests.shell.serve._process import ServeProcess
from tests.shell.serve._sse import sse_events

TOKEN = "process-token-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
TERMINAL = {"turn_completed", "turn_failed", "turn_cancelled"}


def test_after_kill_9_the_turn_is_resumed_the_waiting_prompt_runs_and_a_reader_gets_every_stored_event(
    tmp_path,
):
    steps = [ToolStep([("shell", {"command": "sleep 1; echo 0"})])]
    steps += [ToolStep([("shell", {"command": f"echo {n}"})]) for n in range(1, 4)]
    script = Script.task([*steps, FinalAnswer("finished after the resume")])
    with FakeProvider(Script.echo(), scripts={"slow": script, "echo": Script.echo()}) as provider:
        first = ServeProcess(provider, tmp_path, token=TOKEN)
        received: list[tuple[str, str, int]] = []
        try:
            with httpx.Client(base_url=first.url, headers=HEADERS, timeout=15) as client:
                client.post("/v1/sessions", json={"workspace": "w", "id": "s1"})
                prompts = "/v1/sessions/s1/prompts"
                assert client.post(prompts, json={"text": "[[script:slow]] go"}).json() == {"turn": 1}
                # Acknowledged behind the running turn: stored as waiting, so the kill cannot lose it.
                assert client.post(prompts, json={"text": "[[script:echo]] queued behind"}).json() == {
                    "turn": 2
                }
                # The tool may start before or after the second prompt is stored: read until both are.
                for event, last_id, data in sse_events(client, "/v1/sessions/s1/events", params={"after": 0}):
                    if event != "text_delta":
                        received.append((last_id, event, data["turn"]))
                    seen = {(e, t) for _, e, t in received}
                    if {("tool_call_started", 1), ("prompt_queued", 2)} <= seen:
                        break
        finally:
            first.kill()  # mid-turn: the tool is still sleeping
        assert not any(e in TERMINAL for _, e, _ in received)
        killed_at = len(received)

        second = ServeProcess(provider, tmp_path, token=TOKEN)
        try:
            with httpx.Client(base_url=second.url, headers=HEADERS, timeout=15) as client:
                headers = {"Last-Event-ID": received[-1][0]}
                ends: dict[int, dict[str, object]] = {}
                for event, last_id, data in sse_events(client, "/v1/sessions/s1/events", headers=headers):
                    if event == "text_delta":
                        continue
                    received.append((last_id, event, data["turn"]))
                    if event == "turn_resumed":
                        # The shell call is side-effecting: it is not run again, and the model is told so.
                        assert (data["steps_done"], data["attempt"], len(data["interrupted"])) == (1, 1, 1)
                    if event in TERMINAL:
                        ends[data["turn"]] = data
                        if len(ends) == 2:
                            break
                assert (ends[1]["type"], ends[1]["text"]) == ("turn_completed", "finished after the resume")
                assert ends[2]["type"] == "turn_completed", ends[2]["message"]
                assert ends[2]["text"] == "echo: queued behind"
                assert client.post("/v1/sessions/s1/prompts", json={"text": "still here?"}).json() == {
                    "turn": 3
                }
                for event, _, data in sse_events(client, "/v1/sessions/s1/events", headers=headers):
                    if event in TERMINAL and data["turn"] == 3:
                        assert event == "turn_completed"
                        break
        finally:
            assert second.stop() == 0
        with SessionStore.open(tmp_path / "store.db") as store:
            log = [(str(e.seq), e.type) for e in store.load_events("s1") if e.turn in (1, 2)]
        assert [i for i, _, _ in received] == [i for i, _ in log]  # no gap, no duplicate, in order
        after = [event for _, event, turn in received[killed_at:] if turn == 1]
        assert after[0] == "turn_resumed" and after.count("turn_completed") == 1
        for turn in (1, 2):  # one turn, one end
            assert [e for _, e, t in received if t == turn and e in TERMINAL] == ["turn_completed"]


def test_a_generated_token_is_printed_once_and_guards_the_api(tmp_path):
    with FakeProvider(Script.echo()) as provider:
        server = ServeProcess(provider, tmp_path)
        try:
            tokens = [line.split(": ", 1)[1] for line in server.lines if line.startswith("token: ")]
            assert len(tokens) == 1 and len(tokens[0]) >= 32
            assert sum(tokens[0] in line for line in server.lines) == 2  # the token line and the console link
            assert httpx.get(f"{server.url}/v1/sessions").status_code == 401
            authorized = httpx.get(
                f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {tokens[0]}"}
            )
            assert authorized.status_code == 200
            assert httpx.get(f"{server.url}/healthz").status_code == 200
        finally:
            assert server.stop() == 0
        stderr = server.stderr()
        assert tokens[0] not in stderr
        # Which sandbox and environment policy its tools run under, said once.
        assert stderr.count("[tools: sandbox: ") == 1 and "environment: " in stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0 without a token"),
        (["--workspace-root", "/no/such/dir"], "is not a directory"),
        (["--workspace", "x"], "serve takes no --workspace"),
        (["--port", "70000"], "serve.port"),
    ],
)
def test_serve_refuses_a_configuration_it_cannot_honour_with_exit_code_2(
    args, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("TURNKEEP_SERVE_TOKEN", raising=False)
    code = main(["serve", "--store", str(tmp_path / "s.db"), "--port", "0", *args])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_port_in_use_is_refused_with_exit_code_2(tmp_path, capsys, monkeypatch):
    import socket

    monkeypatch.delenv("TURNKEEP_SERVE_TOKEN", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        store = str(tmp_path / "s.db")
        code = main(["serve", "--store", store, "--port", port, "--workspace-root", str(root)])
    assert code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
