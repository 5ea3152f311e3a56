"""The condition of the tests that run real sandboxes: bubblewrap working on this machine.

Where it does not, they are skipped with the probe's reason, unless ``REQUIRE_SANDBOX_TESTS=1`` (as in CI,
which installs bubblewrap): then they fail, so a missing install cannot hide behind a skip.
"""

from __future__ import annotations

import os

import pytest

from tool_bridge.sandbox import SandboxProbe, probe_sandbox


def usable_sandbox() -> SandboxProbe:
    """The probe of this machine; skips (or fails, where required) the calling test when it is unusable."""
    probe = probe_sandbox()
    if not probe.usable:
        if os.environ.get("REQUIRE_SANDBOX_TESTS") == "1":
            pytest.fail(f"the sandbox tests must run here but the sandbox is unusable: {probe.reason}")
        pytest.skip(f"no sandbox on this machine: {probe.reason}")
    return probe
