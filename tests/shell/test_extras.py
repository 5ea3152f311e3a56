"""Optional features live in pip extras: the core runs without them, and a feature used without its extra
says which one to install.

A missing extra is played by a process whose ``sys.modules`` maps the extra's packages to None, which
makes importing them fail exactly as when they are not installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from sampler.fake import FakeProvider
from shell._extras import MissingExtra, needs_extra
from tests.shell.cli.test_cli import REPO, TIMEOUT, environment

EXTRAS_PACKAGES = {
    "serve": ["starlette"],
    "telemetry": ["opentelemetry", "prometheus_client"],
    "mcp": ["mcp"],
    "postgres": ["psycopg"],
    "ray": ["ray"],
}
DISTRIBUTIONS = {
    "serve": {"starlette"},
    "telemetry": {
        "opentelemetry-api",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",
        "opentelemetry-exporter-prometheus",
        "prometheus-client",
    },
    "mcp": {"mcp"},
    "postgres": {"psycopg"},
    "ray": {"ray"},
}
CORE = {"pykka", "trio", "httpx", "h11", "msgspec", "rich", "hypercorn"}


def turnkeep_without(blocked: list[str], *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``turnkeep ARGS`` in a process where the ``blocked`` packages cannot be imported."""
    program = textwrap.dedent(
        f"""
        import sys
        for name in {blocked!r}:
            sys.modules[name] = None
        from shell.cli import main
        sys.exit(main({list(args)!r}))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", program],
        cwd=cwd,
        env={**environment(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def every_optional_package() -> list[str]:
    return [name for names in EXTRAS_PACKAGES.values() for name in names]


def project() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def requirement_name(requirement: str) -> str:
    for end in "[<>=!~; ":
        requirement = requirement.split(end)[0]
    return requirement


# -- the error --------------------------------------------------------------------------------------------


def test_a_missing_module_within_needs_extra_is_a_missing_extra_naming_the_extra_and_the_module() -> None:
    with pytest.raises(MissingExtra) as raised, needs_extra("turnkeep serve", "serve"):
        raise ModuleNotFoundError("No module named 'starlette'", name="starlette")
    assert str(raised.value) == "turnkeep serve needs the `starlette` package: pip install 'turnkeep[serve]'"
    assert (raised.value.extra, raised.value.name) == ("serve", "starlette")
    assert isinstance(raised.value, ImportError)


def test_other_errors_within_needs_extra_pass_unchanged() -> None:
    with pytest.raises(ValueError, match="not an import"), needs_extra("telemetry", "telemetry"):
        raise ValueError("not an import")


# -- the package's metadata -------------------------------------------------------------------------------


def test_the_core_install_needs_only_the_runtime_the_sampler_the_tools_the_store_and_the_cli() -> None:
    dependencies = project()["dependencies"]
    assert isinstance(dependencies, list)
    assert {requirement_name(requirement) for requirement in dependencies} <= CORE


def test_each_extra_installs_its_feature_and_all_installs_every_extra() -> None:
    extras = project()["optional-dependencies"]
    assert isinstance(extras, dict)
    for extra, distributions in DISTRIBUTIONS.items():
        assert {requirement_name(requirement) for requirement in extras[extra]} == distributions
    assert extras["all"] == [f"turnkeep[{','.join(DISTRIBUTIONS)}]"]


# -- the command line without the extras ------------------------------------------------------------------


def test_serve_without_its_extra_exits_2_naming_the_extra() -> None:
    result = turnkeep_without(EXTRAS_PACKAGES["serve"], "serve", "--port", "0")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "turnkeep: error: turnkeep serve needs the `starlette` package: pip install 'turnkeep[serve]'\n"
    )


def test_telemetry_switched_on_without_its_extra_exits_2_naming_the_extra(tmp_path: Path) -> None:
    config = tmp_path / "turnkeep.toml"
    config.write_text("[telemetry]\nenabled = true\n")
    result = turnkeep_without(
        EXTRAS_PACKAGES["telemetry"], "run", "--config", str(config), "--store", str(tmp_path / "s.db"), "hi"
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'turnkeep[telemetry]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_postgresql_store_without_its_extra_names_the_extra(tmp_path: Path) -> None:
    result = turnkeep_without(
        EXTRAS_PACKAGES["postgres"], "run", "--store", "postgresql://127.0.0.1:1/none", "hi", cwd=tmp_path
    )
    assert result.returncode != 0
    assert "turnkeep[postgres]" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_turn_runs_with_no_optional_package_importable(tmp_path: Path) -> None:
    with FakeProvider() as provider:
        result = turnkeep_without(
            every_optional_package(),
            "run",
            "--base-url",
            provider.base_url,
            "--store",
            str(tmp_path / "sessions.db"),
            "--workspace",
            str(tmp_path),
            "hello there",
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stderr
    assert "echo: hello there" in result.stdout
