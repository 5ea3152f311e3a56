"""The public face: ``turnkeep`` and ``turnkeep.testing`` export every public name once, and the whole
error hierarchy."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

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


def test_each_public_class_and_function_is_listed_where_it_is_defined() -> None:
    for face in FACES:
        for name in face.__all__:
            value = getattr(face, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                home = sys.modules[value.__module__]
                assert name in getattr(home, "__all__", ()), f"{name} is not in {value.__module__}.__all__"


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


class _Idle(turnkeep.Actor):
    pass


class _Mailbox:
    def ask(self, message: object, timeout: float | None = None) -> None:
        return None

    def tell(self, message: object) -> None:
        pass


def written_reprs() -> set[type]:
    """The classes of the face with a repr of their own, written by hand (a dataclass's names only its
    class and fields)."""
    return {
        value
        for value in (getattr(turnkeep, name) for name in turnkeep.__all__)
        if inspect.isclass(value) and "__repr__" in vars(value) and not dataclasses.is_dataclass(value)
    }


def test_a_public_class_with_a_repr_of_its_own_names_itself_as_turnkeep_names_it(tmp_path: Path) -> None:
    session = turnkeep.Session(None, "s-1", _Mailbox())  # type: ignore[arg-type]
    store = turnkeep.open_store(tmp_path / "sessions.db")
    with turnkeep.ActorSystem() as system:
        samples = {
            turnkeep.Session: session,
            turnkeep.AsyncSession: turnkeep.AsyncSession(session),
            turnkeep.NoCredentials: turnkeep.NoCredentials(),
            turnkeep.StaticKey: turnkeep.StaticKey(env_var="KEY", environ={"KEY": "sk-0000-0000"}),
            turnkeep.OAuthCredential: turnkeep.OAuthCredential("https://auth.example/token", "refresh"),
            turnkeep.SessionStore: store,
            turnkeep.ActorSystem: system,
            turnkeep.Address: system.spawn(turnkeep.ChildSpec("idle", _Idle)),
        }
        try:
            assert set(samples) == written_reprs(), "a class of the face has a repr this test does not check"
            for cls, sample in samples.items():
                assert re.match(rf"<?turnkeep\.{cls.__name__}\b", repr(sample)), repr(sample)
        finally:
            store.close()


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
