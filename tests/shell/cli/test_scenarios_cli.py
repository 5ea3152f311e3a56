"""``fake-provider --list`` and ``--scenario``, and ``chat --fake``, run as real processes."""

from __future__ import annotations

import signal

import httpx

from sampler.fake import SCENARIOS
from tests.shell.cli.test_cli import TIMEOUT, Output, start, turnkeep


def test_fake_provider_list_shows_each_scenario_with_what_it_shows() -> None:
    result = turnkeep("fake-provider", "--list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    for line, found in zip(lines, SCENARIOS.values(), strict=True):
        assert line.endswith(found.description)


def test_an_unknown_scenario_is_a_usage_error_that_lists_the_names() -> None:
    for args in (("fake-provider", "--scenario", "nope"), ("chat", "--fake", "nope")):
        result = turnkeep(*args)
        assert result.returncode == 2, result.stderr
        assert "unknown scenario 'nope'" in result.stderr
        assert all(name in result.stderr for name in SCENARIOS)
        assert len(result.stderr.splitlines()) == 1


def test_fake_provider_plays_a_scenario_with_its_faults_first() -> None:
    process = start("fake-provider", "--port", "0", "--scenario", "flaky", "--faults", "light", "--seed", "3")
    try:
        out, err = Output(process.stdout), Output(process.stderr)
        url = out.wait_for(lambda text: text.endswith("\n")).strip()
        reply = httpx.post(
            f"{url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "ping"}]},
            timeout=TIMEOUT,
        )
        process.send_signal(signal.SIGINT)
        process.wait(timeout=TIMEOUT)
        err.wait_for(lambda text: "served" in text and text.endswith("\n"))
    finally:
        process.kill()
    assert (reply.status_code, reply.headers.get("retry-after")) == (429, "1")
    assert "scenario flaky, faults: light, seed 3" in err.text
    assert "[a host playing it needs: allow list_dir without asking; back off from 0.3 s to 1.0 s" in err.text
    assert process.returncode == 0


def test_chat_fake_coding_shows_the_tool_calls_their_folded_results_and_the_usage(tmp_path) -> None:
    workspace = tmp_path / "ws"
    result = turnkeep("chat", "--fake", "coding", "--workspace", str(workspace), stdin="write some notes\n")
    assert result.returncode == 0, result.stderr
    assert '[tool shell {"command":"wc -l notes.md && cat notes.md"}]' in result.stderr
    assert "[tool shell ok]\n  7 notes.md\n  # Notes\n  (6 more lines)\n" in result.stderr
    assert "[turn 1 completed in 5 steps]\n[usage: " in result.stderr
    assert "The workspace now holds notes.md." in result.stdout
    assert (workspace / "notes.md").read_text().startswith("# Notes")


def test_chat_fake_talks_to_its_own_provider_whatever_the_config_file_says(tmp_path) -> None:
    config = tmp_path / "elsewhere.toml"
    config.write_text('[provider]\nbase_url = "http://127.0.0.1:9/v1"\n[window]\ncontext_window = 50000\n')
    result = turnkeep("chat", "--fake", "looping", "--config", str(config), stdin="look\n")
    assert result.returncode == 0, result.stderr
    assert "[the turn failed (doom_loop): The model is repeating itself" in result.stderr
