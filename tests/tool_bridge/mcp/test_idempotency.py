"""An MCP tool's idempotency class: read from the server's annotations of it (the SDK fixture server, a real
subprocess), set by name over them, also for tools the server lists at run time."""

from __future__ import annotations

import json

import pytest
from mcp_types import ToolAnnotations

from tests._waiting import wait_until
from tests.tool_bridge.mcp.conftest import MakeMcpRig, fixture_settings
from tool_bridge import Idempotency, ToolInvocation, ToolRegistry
from tool_bridge.mcp import McpToolRegistry, annotated_idempotency


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, Idempotency.SIDE_EFFECTING),
        (ToolAnnotations(), Idempotency.SIDE_EFFECTING),
        (ToolAnnotations(read_only_hint=True), Idempotency.READ_ONLY),
        (ToolAnnotations(read_only_hint=True, idempotent_hint=False), Idempotency.READ_ONLY),
        (ToolAnnotations(idempotent_hint=True), Idempotency.IDEMPOTENT),
        (ToolAnnotations(read_only_hint=False, idempotent_hint=True), Idempotency.IDEMPOTENT),
        (ToolAnnotations(read_only_hint=False, idempotent_hint=False), Idempotency.SIDE_EFFECTING),
        (ToolAnnotations(destructive_hint=False, open_world_hint=False), Idempotency.SIDE_EFFECTING),
    ],
    ids=str,
)
def test_the_annotations_map_to_a_class_with_mcps_defaults(
    annotations: ToolAnnotations | None, expected: Idempotency
) -> None:
    assert annotated_idempotency(annotations) is expected


def test_a_servers_tools_have_the_classes_of_their_annotations(make_mcp_rig: MakeMcpRig) -> None:
    mcp = make_mcp_rig(fixture_settings())
    registry = mcp.registries[0]
    classes = {name: registry.idempotency_of(name) for name in registry.names()}
    assert classes == {
        "fx__echo": Idempotency.READ_ONLY,
        "fx__fail": Idempotency.READ_ONLY,
        "fx__slow": Idempotency.IDEMPOTENT,
        "fx__spawn_child": Idempotency.SIDE_EFFECTING,
        "fx__die": Idempotency.SIDE_EFFECTING,
        "fx__hang": Idempotency.SIDE_EFFECTING,
        "fx__grow": Idempotency.SIDE_EFFECTING,
    }
    echo = registry.get("fx__echo")
    assert echo is not None and echo.idempotency is Idempotency.READ_ONLY


def test_classes_set_by_name_win_over_the_annotations_also_for_tools_listed_at_run_time(
    make_mcp_rig: MakeMcpRig,
) -> None:
    mcp = make_mcp_rig(fixture_settings())
    base = ToolRegistry(idempotency={"fx__echo": Idempotency.SIDE_EFFECTING})
    registry = McpToolRegistry(base, [mcp.handle])
    registry.override_idempotency({"fx__extra": Idempotency.READ_ONLY})
    grow = [
        ToolInvocation(f"c-{each}", "fx__grow", json.dumps({"name": each})) for each in ("extra", "other")
    ]
    mcp.rig.run(*grow)
    assert [o.content for o in mcp.rig.finished(timeout=20).outcomes] == ["added extra", "added other"]
    assert wait_until(lambda: "fx__extra" in registry and "fx__other" in registry, 20)
    assert registry.idempotency_of("fx__extra") is Idempotency.READ_ONLY
    assert registry.idempotency_of("fx__other") is Idempotency.SIDE_EFFECTING
    assert registry.idempotency_of("fx__echo") is Idempotency.SIDE_EFFECTING
    assert registry.idempotency_of("fx__slow") is Idempotency.IDEMPOTENT
    assert registry.idempotency_of("fx__nothing") is Idempotency.SIDE_EFFECTING
