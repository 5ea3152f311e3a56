"""SessionPath: one value names a session subtree's actors, and reads any of their addresses back."""

from __future__ import annotations

import pytest

from shell.session import MEMBERS, SessionPath, check_session_id


def test_a_path_under_the_host_names_its_supervisor_and_members() -> None:
    path = SessionPath("s1", "host")
    assert path.child_name == "session/s1"
    assert path.subtree == "host/session/s1"
    assert [path.member(m) for m in MEMBERS] == [f"host/session/s1/{m}" for m in MEMBERS]


def test_a_path_at_the_root_has_no_parent_prefix() -> None:
    assert SessionPath("s1").member("session") == "session/s1/session"


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("host/session/s1", (SessionPath("s1", "host"), ())),
        ("host/session/s1/chat_state", (SessionPath("s1", "host"), ("chat_state",))),
        ("host/session/s1/tools/read_file-3", (SessionPath("s1", "host"), ("tools", "read_file-3"))),
        ("session/42/sampler", (SessionPath("42"), ("sampler",))),
        ("a/b/session/x/session", (SessionPath("x", "a/b"), ("session",))),
    ],
)
def test_parse_reads_an_address_back_into_its_path_and_the_rest(
    address: str, expected: tuple[SessionPath, tuple[str, ...]]
) -> None:
    assert SessionPath.parse(address) == expected


@pytest.mark.parametrize("address", ["host", "host/session", "janitor/worker", "host/session/"])
def test_parse_says_none_for_an_address_outside_any_session(address: str) -> None:
    assert SessionPath.parse(address) is None


def test_member_of_and_sibling_move_inside_one_subtree() -> None:
    assert SessionPath.member_of("host/session/s1/tools/x") == "tools"
    assert SessionPath.sibling("host/session/s1/session", "chat_state") == "host/session/s1/chat_state"
    with pytest.raises(ValueError, match="supervisor"):
        SessionPath.member_of("host/session/s1")
    with pytest.raises(ValueError, match="not inside a session subtree"):
        SessionPath.sibling("janitor", "chat_state")


@pytest.mark.parametrize("bad", ["", "a/b", " padded", "trailing ", "/"])
def test_a_session_id_that_cannot_name_a_subtree_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="session id"):
        check_session_id(bad)
    with pytest.raises(ValueError, match="session id"):
        SessionPath(bad, "host")
