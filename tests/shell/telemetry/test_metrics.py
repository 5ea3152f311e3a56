"""What the host counts beyond turns: actor kinds as bounded labels, supervision facts, dead letters, the
provider gate's waits, and the [telemetry] settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors import ActorSystem, ChildSpec, Supervisor
from actors.messages import DeadLetter
from sampler import StepQueued
from sampler.gate import GateSnapshot
from shell import turn as tm
from shell.config import ConfigError, TelemetrySettings, load_settings
from shell.messages import UserPrompt
from shell.telemetry import HostReadings, actor_kind, start_telemetry
from tests._waiting import wait_until
from tests.actors._kit import Boom, Counter, Journal
from tests.shell.telemetry.conftest import Recorded, record


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("host/session/3f2a9c/sampler", "sampler"),
        ("host/session/3f2a9c/tools", "tools"),
        ("host/session/3f2a9c/tools/call-17", "tools_child"),
        ("host/session/3f2a9c", "session"),
        ("session/s1/chat_state", "chat_state"),
        ("host/provider_gate", "provider_gate"),
        ("host", "host"),
    ],
)
def test_an_actors_kind_names_its_role_and_never_an_id(address: str, kind: str) -> None:
    assert actor_kind(address) == kind


def test_restarts_and_crashes_are_counted_by_actor_kind(recorded: Recorded) -> None:
    with ActorSystem(ask_timeout=5.0) as system:
        system.observe(recorded.telemetry.supervision)
        journal = Journal()
        system.spawn(
            ChildSpec(
                "host/session/abc", lambda: Supervisor([ChildSpec("sampler", lambda: Counter(journal, "w"))])
            )
        )
        with pytest.raises(RuntimeError):
            system.address("host/session/abc/sampler").ask(Boom())
        assert wait_until(lambda: recorded.total("turnkeep.actor.restarts", actor_kind="sampler") == 1)
    assert recorded.total("turnkeep.actor.crashes", actor_kind="sampler") == 1


def test_dead_letters_are_counted_by_the_kind_of_actor_they_were_for(recorded: Recorded) -> None:
    for address in ("host/session/a/tools", "host/session/b/tools", "host/provider_gate"):
        recorded.telemetry.dead_letter(DeadLetter(address=address, message=None, reason="stopped", at=0.0))
    assert recorded.total("turnkeep.dead_letters", actor_kind="tools") == 2
    assert recorded.total("turnkeep.dead_letters", actor_kind="provider_gate") == 1


def test_a_wait_at_the_gate_is_counted_by_reason_and_is_an_event_of_the_model_call(
    recorded: Recorded,
) -> None:
    from sampler import ModelRequest, UserMessage

    recorder = recorded.telemetry.recorder
    request = ModelRequest("m", (UserMessage.of_text("hi"),))
    recorder.observe("s", 1, tm.Begin(UserPrompt("go")), [tm.SendSample("s:1:1", "1", request)])
    recorder.observe("s", 1, StepQueued("s:1:1", 2, "cool_down", 1.5), [])
    recorded.telemetry.shutdown()
    assert recorded.total("turnkeep.gate.queued", reason="cool_down") == 1
    chat = next(span for span in recorded.spans() if span.name == "chat m")
    (queued,) = [event for event in chat.events if event.name == "gate.queued"]
    assert dict(queued.attributes or {}) == {"place": 2, "reason": "cool_down", "expected_wait": 1.5}


def test_the_gauges_read_the_sessions_and_the_gate_when_collected() -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    snapshot = GateSnapshot(
        in_flight=3,
        waiting={0: 2, 1: 5},
        cool_down=4.5,
        requests_remaining=None,
        tokens_remaining=None,
        refusals=1,
    )
    readings = HostReadings(sessions=lambda: (4, 6), gate=lambda: snapshot)
    telemetry = start_telemetry(
        TelemetrySettings(enabled=True),
        provider="openai",
        readings=readings,
        metric_readers=[reader],
        environ={},
    )
    made = Recorded(telemetry, None, reader)  # type: ignore[arg-type]
    try:
        sessions = {
            attributes["state"]: point.value for attributes, point in made.points("turnkeep.sessions")
        }
        assert sessions == {"active": 4, "passivated": 6}
        waiting = {
            attributes["priority"]: point.value for attributes, point in made.points("turnkeep.gate.waiting")
        }
        assert waiting == {"0": 2, "1": 5}
        assert [point.value for _, point in made.points("turnkeep.gate.cool_down")] == [4.5]
        assert [point.value for _, point in made.points("turnkeep.gate.in_flight")] == [3]
    finally:
        telemetry.shutdown()


def test_telemetry_is_off_unless_enabled_and_reads_its_settings_from_the_file_and_environment(
    tmp_path: Path,
) -> None:
    assert load_settings(environ={}).telemetry == TelemetrySettings()
    assert TelemetrySettings().enabled is False
    config = tmp_path / "t.toml"
    config.write_text('[telemetry]\nenabled = true\nsampling = 0.25\nservice_name = "agents"\n')
    settings = load_settings(config, environ={"TURNKEEP_TELEMETRY__PROMETHEUS_PORT": "9464"}).telemetry
    assert (settings.enabled, settings.sampling, settings.service_name) == (True, 0.25, "agents")
    assert (settings.prometheus_host, settings.prometheus_port) == ("127.0.0.1", 9464)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("sampling = 1.5", "telemetry.sampling: must be a number from 0 to 1"),
        ("prometheus_port = 70000", "telemetry.prometheus_port: must be a port"),
        ('otlp_endpoint = "localhost:4318"', "telemetry.otlp_endpoint: must be an http"),
        ('service_name = " "', "telemetry.service_name: must not be empty"),
    ],
)
def test_a_bad_telemetry_setting_is_a_clear_error(tmp_path: Path, line: str, says: str) -> None:
    config = tmp_path / "t.toml"
    config.write_text(f"[telemetry]\n{line}\n")
    with pytest.raises(ConfigError, match=says):
        load_settings(config, environ={})


def test_a_turn_observed_after_it_began_without_telemetry_is_ignored() -> None:
    recorded = record()
    recorded.telemetry.observe("s", 4, tm.ProbeDue("s:4:1"), [])
    recorded.telemetry.shutdown()
    assert recorded.spans() == [] and recorded.telemetry.recorder.open_turns() == 0


def test_a_host_without_telemetry_never_imports_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    program = (
        "import sys\n"
        "from shell.config import load_settings\n"
        "from shell.host import AgentHost\n"
        f"settings = load_settings(environ={{'TURNKEEP_STORE__PATH': {str(tmp_path / 's.db')!r}}})\n"
        "host = AgentHost(settings)\n"
        "assert host.telemetry is None\n"
        "host.shutdown()\n"
        "heavy = ('opentelemetry', 'prometheus_client', 'shell.telemetry')\n"
        "loaded = [m for m in sys.modules if m.startswith(heavy)]\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
