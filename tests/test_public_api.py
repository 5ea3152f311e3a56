"""The public face: ``turnkeep`` and ``turnkeep.testing`` export every public name once, and the whole
error hierarchy."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import types
from collections.abc import Iterator

import pytest

import actors
import sampler
import shell
import shell.store
import tool_bridge
import turnkeep
import turnkeep.testing

FACES = (turnkeep, turnkeep.testing)


def public_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


@pytest.mark.parametrize("face", FACES, ids=lambda m: m.__name__)
def test_all_lists_each_public_name_once_and_nothing_else(face: types.ModuleType) -> None:
    assert len(face.__all__) == len(set(face.__all__))
    assert set(face.__all__) == public_names(face)


def test_no_name_is_exported_twice_and_no_object_under_two_names() -> None:
    assert not set(turnkeep.__all__) & set(turnkeep.testing.__all__)
    seen: dict[int, str] = {}
    for face in FACES:
        for name in face.__all__:
            value = getattr(face, name)
            if isinstance(value, (int, float, str, frozenset, tuple, dict)):
                continue
            assert id(value) not in seen, f"{name} is {seen.get(id(value))} again"
            seen[id(value)] = name


def exceptions_of(module: types.ModuleType) -> Iterator[type[BaseException]]:
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            yield value


def test_every_error_the_packages_export_is_in_the_public_face() -> None:
    exported = {getattr(face, name) for face in FACES for name in face.__all__}
    for package in (actors, sampler, tool_bridge, shell, shell.store):
        for error in exceptions_of(package):
            assert error in exported, f"{package.__name__}.{error.__name__} is not in turnkeep"


def test_the_error_hierarchy_page_names_every_exported_error() -> None:
    page = turnkeep.__doc__ or ""
    for error in exceptions_of(turnkeep):
        assert re.search(rf"\b{error.__name__}\b", page), f"{error.__name__} is missing from the page"


def test_the_readme_way_in_works() -> None:
    from turnkeep import AgentHost, Host, TurnCompleted

    assert (Host, AgentHost, TurnCompleted) == (shell.Host, shell.AgentHost, shell.TurnCompleted)


def test_importing_shell_imports_its_modules_only_when_a_name_is_used() -> None:
    probe = (
        "import sys, shell\n"
        "before = sorted(name for name in sys.modules if name.startswith('shell.'))\n"
        "shell.Host\n"
        "print(before, 'shell.facade' in sys.modules)\n"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert found.stdout.strip() == "[] True"


def test_every_name_shell_lists_is_there() -> None:
    for name in shell.__all__:
        assert getattr(shell, name) is not None, name
    with pytest.raises(AttributeError):
        _ = shell.NotAName  # type: ignore[attr-defined]
