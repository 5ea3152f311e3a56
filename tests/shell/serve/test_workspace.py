"""Sessions open only in workspaces under the workspace root: not outside it, not through a symlink."""

from __future__ import annotations

import pytest

from sampler.fake import FakeProvider, Script
from shell.serve import WorkspaceRefused, confine
from tests.shell.serve._server import decode, running


def test_a_path_under_the_root_is_its_real_path(tmp_path):
    (tmp_path / "a").mkdir()
    assert confine(tmp_path, "a") == (tmp_path / "a").resolve()
    assert confine(tmp_path, "new/deeper") == (tmp_path / "new" / "deeper").resolve()
    assert confine(tmp_path, str(tmp_path / "a")) == (tmp_path / "a").resolve()
    assert confine(tmp_path, ".") == tmp_path.resolve()


def test_paths_leading_out_are_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (root / "link").symlink_to(tmp_path / "outside")
    for path in ["..", "../outside", "/etc", "link", "link/sub", "a/../../outside", str(tmp_path)]:
        with pytest.raises(WorkspaceRefused):
            confine(root, path)
    (tmp_path / "rootish").mkdir()
    with pytest.raises(WorkspaceRefused):
        confine(root, str(tmp_path / "rootish"))  # shares a prefix, is not under


def test_empty_paths_and_files_are_not_workspaces(tmp_path):
    (tmp_path / "file").write_text("x")
    for path in ["", "   ", "a\x00b", "file"]:
        with pytest.raises(ValueError):
            confine(tmp_path, path)


def test_the_api_answers_403_for_a_workspace_outside_the_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    with FakeProvider(Script.echo()) as provider, running(provider, tmp_path) as (_server, client):
        (tmp_path / "root" / "escape").symlink_to(outside)
        for workspace in [str(outside), "../outside", "escape", "escape/inner"]:
            answer = client.post("/v1/sessions", json={"workspace": workspace})
            assert answer.status_code == 403, workspace
            assert decode(answer)["kind"] == "workspace_refused"
        assert decode(client.get("/v1/sessions"))["sessions"] == []
        assert not (outside / "inner").exists()
