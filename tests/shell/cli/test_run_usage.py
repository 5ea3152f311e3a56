"""``turnkeep run`` says on stderr, after the turn, what the turn used: its tokens as the provider reported
them, and its cost when the config prices the model — the line ``sessions show`` gives the turn."""

from __future__ import annotations

from pathlib import Path

from sampler.fake import Fault
from tests.shell.cli.conftest import Options
from tests.shell.cli.test_cli import WRITE_NOTE, serving, turnkeep


def usage_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("[usage: ")]


def test_run_prints_the_turns_tokens_and_cost_on_one_line_like_sessions_show(
    tmp_path: Path, options: Options, store: Path
) -> None:
    config = tmp_path / "prices.toml"
    config.write_text('[pricing."priced-model"]\ninput = 2.0\noutput = 10.0\ncached_input = 0.5\n')
    with serving(WRITE_NOTE) as provider:
        args = ["--config", str(config), "--model", "priced-model", "--allow-all"]
        result = turnkeep("run", *options(provider), *args, "write it")
        reported = provider.stats
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Written.\n"
    uncached = reported.input_tokens - reported.cached_tokens
    cost = (uncached * 2.0 + reported.cached_tokens * 0.5 + reported.output_tokens * 10.0) / 1e6
    tokens = f"{reported.input_tokens} in ({reported.cached_tokens} cached), {reported.output_tokens} out"
    assert usage_lines(result.stderr) == [f"[usage: {tokens}, cost {cost:.4f}]"]

    session = next(line for line in result.stderr.splitlines() if line.startswith("[session "))[9:-1]
    shown = turnkeep("sessions", "show", session, "--store", str(store)).stdout
    assert f"turn 1 completed: {tokens}, cost {cost:.4f}" in shown


def test_without_a_price_the_line_has_tokens_and_no_cost(options: Options) -> None:
    with serving() as provider:
        result = turnkeep("run", *options(provider), "hello")
        reported = provider.stats
    assert result.returncode == 0, result.stderr
    assert usage_lines(result.stderr) == [
        f"[usage: {reported.input_tokens} in, {reported.output_tokens} out]"
    ]


def test_a_failed_turn_still_says_what_it_used(options: Options) -> None:
    with serving(None, Fault.insufficient_quota()) as provider:
        result = turnkeep("run", *options(provider), "hello")
    assert result.returncode == 1
    assert usage_lines(result.stderr) == ["[usage: 0 in, 0 out]"]


def test_json_output_has_no_usage_line_the_terminal_event_carries_it(options: Options) -> None:
    with serving() as provider:
        result = turnkeep("run", *options(provider), "--json", "hello")
    assert result.returncode == 0, result.stderr
    assert usage_lines(result.stderr) == []
    assert '"usage"' in result.stdout.splitlines()[-1]
