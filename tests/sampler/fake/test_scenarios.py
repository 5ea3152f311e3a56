"""The scenario catalogue: every scenario is named, described and buildable; unknown names are refused
with the list of known ones; a scenario's faults combine with a named profile."""

from __future__ import annotations

import pytest

from sampler.fake import SCENARIOS, FaultPlan, HostNeeds, Scenario, UnknownScenario, scenario


def test_the_catalogue_has_the_five_scenarios_each_described_on_one_line() -> None:
    assert list(SCENARIOS) == ["coding", "flaky", "expiring", "compacting", "looping"]
    for name, found in SCENARIOS.items():
        assert isinstance(found, Scenario) and found.name == name
        assert found.description and "\n" not in found.description


def test_an_unknown_scenario_is_refused_with_every_name() -> None:
    with pytest.raises(UnknownScenario) as raised:
        scenario("nope")
    assert all(name in str(raised.value) for name in SCENARIOS)
    assert scenario("flaky") is SCENARIOS["flaky"]


def test_a_scenarios_faults_come_first_then_the_profile_draws_with_its_seed() -> None:
    flaky = SCENARIOS["flaky"]
    plan = flaky.fault_plan("heavy", seed=7)
    heavy = FaultPlan.profile("heavy", seed=7)
    assert plan.queue == flaky.faults and plan.queue
    assert plan.rates() == heavy.rates() and plan.seed == 7
    assert SCENARIOS["looping"].fault_plan().rates() == {} and not SCENARIOS["looping"].faults
    with pytest.raises(ValueError):
        flaky.fault_plan("unheard-of")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_scenarios_provider_starts_and_stops_on_loopback(name: str) -> None:
    with SCENARIOS[name].provider() as provider:
        assert provider.base_url.startswith("http://127.0.0.1:")
    assert not provider.running


def test_a_scenarios_needs_are_described_in_words() -> None:
    url = "http://127.0.0.1:1/oauth/token"
    assert (
        SCENARIOS["expiring"]
        .needs.describe(url)
        .endswith(f"refresh access tokens at {url} with the refresh token fake-refresh-token")
    )
    assert "a 1000-token context window (200 for the answer)" in SCENARIOS["compacting"].needs.describe(url)
    assert SCENARIOS["looping"].needs.describe(url) == "allow list_dir without asking"
    assert HostNeeds().describe(url) == "nothing"
