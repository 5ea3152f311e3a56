"""A real server on 127.0.0.1 (ephemeral port) over a real host, store and the embedded provider."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec

from sampler.fake import FakeProvider
from shell.config import ServeSettings
from shell.host import AgentHost
from shell.serve import RunningServer, start_server
from shell.usage import Price
from tests.shell._settings import settings_for
from tool_bridge import PermissionPolicy, PermissionRule

TOKEN = "test-token-0123456789abcdef"


def ask_for(*tools: str) -> Callable[[], PermissionPolicy]:
    """Sessions whose listed tools need a permission answer; everything else runs."""
    rules = [PermissionRule(tool, "ask") for tool in tools] + [PermissionRule("*", "allow")]
    return lambda: PermissionPolicy(rules, use_default_rules=False)


@contextmanager
def running(
    provider: FakeProvider,
    tmp_path: Path,
    *,
    serve: ServeSettings | None = None,
    permissions: Callable[[], PermissionPolicy] | None = None,
    env: dict[str, str] | None = None,
    pricing: dict[str, Price] | None = None,
    **host_options: Any,
) -> Iterator[tuple[RunningServer, httpx.Client]]:
    """A host (with the settings ``env`` adds, and ``pricing`` when given) and its server on a free port,
    and a client that sends the token; both closed after."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    policy = permissions or ask_for()
    settings = settings_for(provider, tmp_path, **(env or {}))
    if pricing is not None:
        settings = msgspec.structs.replace(settings, pricing=pricing)
    host = AgentHost(settings, permissions=policy, **host_options)
    try:
        server = start_server(host, serve or ServeSettings(port=0), token=TOKEN, workspace_root=root)
        try:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=10.0) as client:
                yield server, client
        finally:
            server.stop()
    finally:
        host.shutdown()


def decode(response: httpx.Response) -> Any:
    return msgspec.json.decode(response.content)
