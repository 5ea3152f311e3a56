"""The ``turnkeep`` command line, run as a real process against the embedded provider on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from sampler.fake import FakeProvider, Fault, FaultPlan, FinalAnswer, Script, ToolStep

REPO = Path(__file__).resolve().parents[3]
KEY_VAR = "TK_CLI_TEST_KEY"
TIMEOUT = 30
TERMINAL = {"turn_completed", "turn_failed", "turn_cancelled"}

WRITE_NOTE = Script.task(
    [ToolStep([("write_file", {"path": "note.txt", "content": "hi"})]), FinalAnswer("Written.")]
)
WRITE_TWO = Script.task(
    [
        ToolStep([("write_file", {"path": "a.txt", "content": "a"})]),
        ToolStep([("write_file", {"path": "b.txt", "content": "b"})]),
        FinalAnswer("Both written."),
    ]
)


def environment(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("TURNKEEP_")}
    env[KEY_VAR] = "sk-cli-test-0000"
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "shell.cli", *args]


def turnkeep(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args),
        cwd=REPO,
        env=environment(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@contextmanager
def serving(script: Script | None = None, *faults: Fault | None) -> Iterator[FakeProvider]:
    with FakeProvider(script or Script.echo(), faults=FaultPlan.scripted(faults)) as provider:
        yield provider


class Output:
    """What a running process writes on one of its pipes, collected as it comes."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self._chunks: queue.Queue[str] = queue.Queue()
        self.text = ""
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        while chunk := stream.read(1):
            self._chunks.put(chunk)

    def wait_for(self, found: Callable[[str], bool]) -> str:
        """The output so far, once ``found`` says it holds what is awaited."""
        while not found(self.text):
            self.text += self._chunks.get(timeout=TIMEOUT)
        return self.text

    def lines(self) -> list[str]:
        return self.text.splitlines()


def ended(jsonl: str) -> bool:
    """Whether the JSON lines written so far end with a turn's terminal event."""
    return jsonl.endswith("\n") and json.loads(jsonl.splitlines()[-1])["type"] in TERMINAL


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(*args),
        cwd=REPO,
        env=environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# --- run -----------------------------------------------------------------------------------------------


def test_run_json_writes_each_event_as_a_line_and_exits_0_when_the_turn_completes(options) -> None:
    with serving() as provider:
        result = turnkeep("run", *options(provider), "--json", "hello there")
    assert result.returncode == 0, result.stderr
    events = json_lines(result.stdout)
    assert events[0]["type"] == "turn_started" and events[0]["turn"] == 1
    assert {event["type"] for event in events[1:-1]} == {"text_delta", "step_usage"}
    assert events[-1]["type"] == "turn_completed"
    assert events[-1]["text"] == "echo: hello there"
    assert len({event["session"] for event in events}) == 1


def test_run_streams_the_answer_on_stdout_and_a_retry_notice_on_stderr(options) -> None:
    with serving(None, Fault.rate_limit(retry_after_ms=10)) as provider:
        result = turnkeep("run", *options(provider), "hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: hello\n"
    assert "retrying after rate_limit (HTTP 429): attempt 2 of 10" in result.stderr


def test_run_json_reports_the_retry_with_its_attempt_and_kind(options) -> None:
    with serving(None, Fault.server_error()) as provider:
        result = turnkeep(
            "run",
            *options(provider),
            "--json",
            "--max-attempts",
            "3",
            "hello",
            TURNKEEP_RETRY__BASE_DELAY="0.01",
        )
    retrying = [event for event in json_lines(result.stdout) if event["type"] == "retrying"]
    assert [(r["attempt"], r["max_attempts"], r["kind"], r["status"]) for r in retrying] == [
        (1, 3, "status", 500)
    ]


def test_a_key_the_provider_keeps_refusing_fails_the_turn_as_auth_with_exit_1(options) -> None:
    with serving(None, Fault.token_expired()) as provider:
        result = turnkeep("run", *options(provider), "--json", "hello")
    assert result.returncode == 1
    events = json_lines(result.stdout)
    assert [event["type"] for event in events].count("auth_refreshed") == 2
    assert events[-1]["type"] == "turn_failed" and events[-1]["kind"] == "auth"
    assert "fix the API key" in events[-1]["message"]


def test_a_turn_over_max_steps_fails_with_the_reason_on_stderr_and_exit_1(options) -> None:
    loop = Script.task([ToolStep([("list_dir", {"path": "."})])] * 5)
    with serving(loop) as provider:
        result = turnkeep("run", *options(provider), "--max-steps", "1", "loop")
    assert result.returncode == 1
    assert "the turn failed (max_steps)" in result.stderr
    assert "[tool list_dir ok]" in result.stderr


def test_run_denies_a_tool_that_would_be_asked_about_and_the_turn_still_completes(tmp_path, options) -> None:
    with serving(WRITE_NOTE) as provider:
        result = turnkeep("run", *options(provider), "--json", "write a note")
    assert result.returncode == 0, result.stderr
    finished = [event for event in json_lines(result.stdout) if event["type"] == "tool_call_finished"]
    assert [(event["tool"], event["is_error"]) for event in finished] == [("write_file", True)]
    assert "use --allow write_file" in finished[0]["preview"]
    assert not (tmp_path / "ws" / "note.txt").exists()


@pytest.mark.parametrize("allowing", [["--allow", "write_file"], ["--allow-all"]])
def test_run_lets_an_allowed_tool_run_without_asking(tmp_path, options, allowing) -> None:
    with serving(WRITE_NOTE) as provider:
        result = turnkeep("run", *options(provider), *allowing, "write a note")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ws" / "note.txt").read_text() == "hi"
    assert result.stdout == "Written.\n"


def test_ctrl_c_during_a_stalled_stream_cancels_the_turn_and_exits_130(options) -> None:
    stall = Fault.stall(after_chunks=3, hang=True)
    with serving(Script.text("An answer that stalls halfway through."), stall) as provider:
        process = start("run", *options(provider), "--json", "talk")
        try:
            out = Output(process.stdout)
            out.wait_for(lambda text: '"text_delta"' in text)
            process.send_signal(signal.SIGINT)
            out.wait_for(ended)
            process.wait(timeout=TIMEOUT)
        finally:
            process.kill()
    last = json.loads(out.lines()[-1])
    assert (last["type"], last["reason"]) == ("turn_cancelled", "user_cancelled")
    assert process.returncode == 130


def test_run_with_session_continues_the_stored_session_as_its_next_turn(options) -> None:
    with serving() as provider:
        first = json_lines(turnkeep("run", *options(provider), "--json", "one").stdout)
        session = first[0]["session"]
        second = turnkeep("run", *options(provider), "--json", "--session", session, "two")
    events = json_lines(second.stdout)
    assert second.returncode == 0, second.stderr
    assert (events[0]["session"], events[0]["turn"]) == (session, 2)
    assert events[-1]["text"] == "echo: two"


# --- usage errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "config", "expected"),
    [
        (["--bogus"], None, "unrecognized arguments: --bogus"),
        (["--max-attempts", "many"], None, "invalid int value: 'many'"),
        (["--max-attempts", "0"], None, "retry.max_attempts"),
        ([], "[loop_control\nmax_steps_per_turn = 3\n", "malformed TOML"),
        ([], "[loop_control]\nmax_steps = 3\n", "loop_control.max_steps: unknown key"),
        (["--session", "nope"], None, "there is no session 'nope'"),
        (["--api-key-env", "TK_CLI_UNSET_KEY"], None, "$TK_CLI_UNSET_KEY is not set"),
    ],
    ids=["unknown-option", "bad-number", "bad-value", "malformed-config", "unknown-key", "session", "key"],
)
def test_a_usage_or_configuration_error_exits_2_with_a_one_line_message(
    tmp_path, options, extra, config, expected
) -> None:
    if config is not None:
        (tmp_path / "turnkeep.toml").write_text(config)
        extra = [*extra, "--config", str(tmp_path / "turnkeep.toml")]
    with serving() as provider:
        result = turnkeep("run", *options(provider), *extra, "hello")
    assert result.returncode == 2
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_a_config_file_that_does_not_exist_is_a_usage_error(tmp_path, options) -> None:
    with serving() as provider:
        result = turnkeep("run", *options(provider), "--config", str(tmp_path / "missing.toml"), "hi")
    assert result.returncode == 2
    assert "missing.toml does not exist" in result.stderr


def test_options_override_the_config_file(tmp_path, options) -> None:
    (tmp_path / "turnkeep.toml").write_text('[provider]\nbase_url = "http://127.0.0.1:9/v1"\n')
    with serving() as provider:
        result = turnkeep("run", "--config", str(tmp_path / "turnkeep.toml"), *options(provider), "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: hi\n"


def test_the_config_file_overrides_the_environment(tmp_path, options) -> None:
    (tmp_path / "turnkeep.toml").write_text("[loop_control]\nmax_steps_per_turn = 5\n")
    loop = Script.task([ToolStep([("list_dir", {"path": "."})]), FinalAnswer("Looked.")])
    with serving(loop) as provider:
        result = turnkeep(
            "run",
            *options(provider),
            "--config",
            str(tmp_path / "turnkeep.toml"),
            "look",
            TURNKEEP_LOOP_CONTROL__MAX_STEPS_PER_TURN="1",
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Looked.\n"


# --- sessions -------------------------------------------------------------------------------------------


def test_sessions_list_show_and_events_read_what_the_store_holds(options, store) -> None:
    with serving() as provider:
        started = json_lines(turnkeep("run", *options(provider), "--json", "remember me").stdout)[0]
    session = started["session"]

    listed = json_lines(turnkeep("sessions", "list", "--store", str(store), "--json").stdout)
    assert [(s["id"], s["status"], s["turns"]) for s in listed] == [(session, "idle", 1)]
    assert listed[0]["updated"]

    shown = json.loads(turnkeep("sessions", "show", session, "--store", str(store), "--json").stdout)
    assert shown["session"]["id"] == session
    history = [entry["message"] for entry in shown["history"]]
    assert [message["type"] for message in history] == ["UserMessage", "AssistantMessage"]
    assert history[1]["text"] == "echo: remember me"

    logged = json_lines(turnkeep("sessions", "events", session, "--store", str(store), "--json").stdout)
    assert [(event["seq"], event["type"]) for event in logged] == [(1, "turn_started"), (2, "turn_completed")]
    assert logged[0]["prompt"] == "remember me"

    text = turnkeep("sessions", "show", session, "--store", str(store)).stdout
    assert "#2 turn 1 assistant: echo: remember me" in text


def test_usage_and_cost_reach_the_json_events_and_the_session_views(tmp_path, options, store) -> None:
    config = tmp_path / "prices.toml"
    config.write_text('[pricing."priced-model"]\ninput = 2.0\noutput = 10.0\ncached_input = 0.5\n')
    with serving(WRITE_NOTE) as provider:
        run = turnkeep(
            "run",
            *options(provider),
            "--config",
            str(config),
            "--model",
            "priced-model",
            "--json",
            "--allow-all",
            "write it",
        )
        reported = provider.stats
    assert run.returncode == 0, run.stderr
    end = json_lines(run.stdout)[-1]
    assert end["type"] == "turn_completed"
    steps = end["usage"]["steps"]
    assert (steps["input_tokens"], steps["cached_tokens"], steps["output_tokens"]) == (
        reported.input_tokens,
        reported.cached_tokens,
        reported.output_tokens,
    )
    assert steps["reported"] == 2 and reported.cached_tokens > 0  # the second step reuses the first prompt
    uncached = reported.input_tokens - reported.cached_tokens
    expected = (uncached * 2.0 + reported.cached_tokens * 0.5 + reported.output_tokens * 10.0) / 1e6
    assert end["usage"]["cost"] == pytest.approx(expected)

    listed = json_lines(turnkeep("sessions", "list", "--store", str(store), "--json").stdout)
    assert listed[0]["usage"]["input_tokens"] == reported.input_tokens
    assert listed[0]["usage"]["cost"] == pytest.approx(expected)
    table = turnkeep("sessions", "list", "--store", str(store)).stdout
    assert f"{expected:.4f}" in table and "COST" in table
    shown = turnkeep("sessions", "show", end["session"], "--store", str(store)).stdout
    assert f"turn 1 completed: {reported.input_tokens} in ({reported.cached_tokens} cached)" in shown


def test_sessions_show_of_an_unknown_session_exits_2(options, store) -> None:
    with serving() as provider:
        turnkeep("run", *options(provider), "hello")
    result = turnkeep("sessions", "show", "nope", "--store", str(store))
    assert result.returncode == 2
    assert "there is no session 'nope'" in result.stderr


def test_sessions_list_of_a_store_that_does_not_exist_lists_nothing_and_creates_nothing(store) -> None:
    result = turnkeep("sessions", "list", "--store", str(store))
    assert (result.returncode, result.stdout) == (0, "")
    assert not store.exists()


# --- chat -----------------------------------------------------------------------------------------------


def test_chat_runs_one_turn_per_line_in_one_session_until_exit(options, store) -> None:
    with serving() as provider:
        result = turnkeep("chat", *options(provider), stdin="first\n\nsecond\n/exit\nnever\n")
    assert result.returncode == 0, result.stderr
    assert "echo: first" in result.stdout and "echo: second" in result.stdout
    assert "never" not in result.stdout
    listed = json_lines(turnkeep("sessions", "list", "--store", str(store), "--json").stdout)
    assert [s["turns"] for s in listed] == [2]


def test_chat_status_tells_what_the_session_and_the_provider_gate_are_doing(options) -> None:
    with serving() as provider:
        result = turnkeep("chat", *options(provider), stdin="first\n/status\n/exit\n")
    assert result.returncode == 0, result.stderr
    assert "active; no turn; 0 prompts waiting" in result.stderr
    assert "[provider gate: 0 in flight; waiting []]" in result.stderr


@pytest.mark.parametrize(("reply", "written"), [("y", True), ("n", False)])
def test_chat_asks_before_a_tool_that_needs_permission(tmp_path, options, reply, written) -> None:
    with serving(WRITE_NOTE) as provider:
        result = turnkeep("chat", *options(provider), stdin=f"write a note\n{reply}\n")
    assert result.returncode == 0, result.stderr
    assert "allow write_file" in result.stdout
    assert (tmp_path / "ws" / "note.txt").exists() is written
    assert "Written." in result.stdout


# --- fake-provider ----------------------------------------------------------------------------------------


def test_chat_allow_always_answers_the_same_question_for_the_rest_of_the_session(tmp_path, options) -> None:
    with serving(WRITE_TWO) as provider:
        result = turnkeep("chat", *options(provider), stdin="write two files\na\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("allow write_file") == 1
    assert sorted(path.name for path in (tmp_path / "ws").iterdir()) == ["a.txt", "b.txt"]
    assert "Both written." in result.stdout


def test_chat_cancels_a_turn_on_ctrl_c_and_goes_on_in_the_same_session(options) -> None:
    answer = "An answer that stalls halfway through."
    with serving(Script.text(answer), Fault.stall(after_chunks=3, hang=True)) as provider:
        process = start("chat", *options(provider))
        try:
            out, err = Output(process.stdout), Output(process.stderr)
            assert process.stdin is not None
            process.stdin.write("talk\nagain\n/exit\n")
            process.stdin.flush()
            out.wait_for(lambda text: "An a" in text)
            process.send_signal(signal.SIGINT)
            err.wait_for(lambda text: "the turn was cancelled (user_cancelled)" in text)
            out.wait_for(lambda text: answer in text)
            process.wait(timeout=TIMEOUT)
        finally:
            process.kill()
    assert process.returncode == 0


def test_chat_leaves_on_ctrl_c_at_the_prompt_with_exit_130(options) -> None:
    with serving() as provider:
        process = start("chat", *options(provider))
        try:
            Output(process.stdout).wait_for(lambda text: text.endswith("> "))
            # A Ctrl-C that lands between the prompt and the start of the read waits for the next one,
            # as on a terminal; a chat that does not leave on Ctrl-C never exits here.
            for _ in range(TIMEOUT):
                process.send_signal(signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=2)
                    break
        finally:
            process.kill()
    assert process.returncode == 130
    assert process.stderr is not None and "Traceback" not in process.stderr.read()


# --- fake-provider ----------------------------------------------------------------------------------------


def test_fake_provider_prints_a_base_url_that_answers_and_stops_on_ctrl_c() -> None:
    process = start("fake-provider", "--port", "0", "--faults", "none", "--seed", "1")
    try:
        out, err = Output(process.stdout), Output(process.stderr)
        url = out.wait_for(lambda text: text.endswith("\n")).strip()
        reply = httpx.post(
            f"{url}/chat/completions",
            headers={"Authorization": "Bearer sk-test"},
            json={"model": "m", "messages": [{"role": "user", "content": "ping"}]},
            timeout=TIMEOUT,
        )
        process.send_signal(signal.SIGINT)
        process.wait(timeout=TIMEOUT)
        err.wait_for(lambda text: "served" in text and text.endswith("\n"))
    finally:
        process.kill()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert reply.json()["choices"][0]["message"]["content"] == "echo: ping"
    assert process.returncode == 0
    assert "served 1 requests" in err.text


# --- demo -------------------------------------------------------------------------------------------------


def test_demo_hands_its_options_to_the_live_demo(monkeypatch) -> None:
    from shell import cli
    from shell.cli import _demo

    calls: list[dict[str, Any]] = []

    def run(**kwargs: Any) -> int:
        calls.append(kwargs)
        return 0

    monkeypatch.setattr(_demo, "run", run)
    assert cli.main(["demo", "--sessions", "3", "--faults", "heavy", "--seed", "9"]) == 0
    assert cli.main(["demo"]) == 0
    assert calls == [{"sessions": 3, "profile": "heavy", "seed": 9}, {}]
