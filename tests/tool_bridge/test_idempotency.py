"""Idempotency classes: what each promises, what the built-in and custom tools declare, the registry's one
query point with its overrides by name, and the model being offered the same tools whatever the classes."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from sampler import ModelRequest, TextPart, UserMessage
from sampler.providers import get_adapter
from shell.session import tool_specs
from tool_bridge import (
    EDIT_FILE,
    LIST_DIR,
    READ_FILE,
    WRITE_FILE,
    Idempotency,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    builtin_registry,
    shell_tool,
    tool,
)

BUILTIN_CLASSES = {
    "shell": Idempotency.SIDE_EFFECTING,
    "read_file": Idempotency.READ_ONLY,
    "write_file": Idempotency.IDEMPOTENT,
    "edit_file": Idempotency.SIDE_EFFECTING,
    "list_dir": Idempotency.READ_ONLY,
}

# The request bodies offering the built-in tools, as they were before tools had idempotency classes.
BUILTIN_REQUEST_SHA256 = {
    "openai": "9e0e25ee67b42ae0be6d5cc052043a8fd6b649cbe7bbe3c5a21a16c954c8bf28",
    "anthropic": "1f7f767409e05ff15eec078d7318fc86de4b4fa13befe441e8ca51c061a8a866",
}


class Note(msgspec.Struct, frozen=True):
    text: str


async def _note(args: Note, context: ToolContext) -> str:
    return args.text


def test_the_classes_are_named_by_their_configuration_values_and_say_whether_a_call_runs_again() -> None:
    assert {each.value: each.runs_again_after_interruption for each in Idempotency} == {
        "read_only": True,
        "idempotent": True,
        "side_effecting": False,
    }


def test_each_built_in_tool_declares_its_class() -> None:
    registry = builtin_registry()
    assert {name: registry.idempotency_of(name) for name in registry.names()} == BUILTIN_CLASSES
    declared = [READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIR, shell_tool()]
    assert {each.name: each.idempotency for each in declared} == BUILTIN_CLASSES


def test_a_custom_tool_is_side_effecting_unless_it_declares_a_class() -> None:
    plain = Tool(name="note", description="Take a note.", args_type=Note, fn=_note)
    reader = Tool(
        name="peek", description="Peek.", args_type=Note, fn=_note, idempotency=Idempotency.READ_ONLY
    )

    @tool(idempotency=Idempotency.IDEMPOTENT)
    async def put(args: Note, context: ToolContext) -> str:
        """Put a value."""
        return args.text

    @tool()
    async def send(args: Note, context: ToolContext) -> str:
        """Send a message."""
        return args.text

    registry = ToolRegistry([plain, reader, put, send])
    assert [registry.idempotency_of(name) for name in ("note", "peek", "put", "send")] == [
        Idempotency.SIDE_EFFECTING,
        Idempotency.READ_ONLY,
        Idempotency.IDEMPOTENT,
        Idempotency.SIDE_EFFECTING,
    ]


def test_a_class_that_is_not_an_idempotency_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="'note': idempotency must be an Idempotency"):
        Tool(name="note", description="Take a note.", args_type=Note, fn=_note, idempotency="read_only")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="idempotency class of 'shell' must be an Idempotency"):
        builtin_registry().override_idempotency({"shell": "read_only"})  # type: ignore[dict-item]


def test_an_unknown_name_is_side_effecting() -> None:
    assert builtin_registry().idempotency_of("launch_rockets") is Idempotency.SIDE_EFFECTING


def test_a_class_set_by_name_wins_over_the_declared_one_also_for_a_tool_registered_later() -> None:
    registry = ToolRegistry(
        [READ_FILE, WRITE_FILE],
        idempotency={"read_file": Idempotency.SIDE_EFFECTING, "note": Idempotency.IDEMPOTENT},
    )
    registry.override_idempotency({"write_file": Idempotency.READ_ONLY})
    assert registry.idempotency_of("read_file") is Idempotency.SIDE_EFFECTING
    assert registry.idempotency_of("write_file") is Idempotency.READ_ONLY
    registry.register(Tool(name="note", description="Take a note.", args_type=Note, fn=_note))
    assert registry.idempotency_of("note") is Idempotency.IDEMPOTENT
    assert registry.idempotency_overrides == {
        "read_file": Idempotency.SIDE_EFFECTING,
        "note": Idempotency.IDEMPOTENT,
        "write_file": Idempotency.READ_ONLY,
    }


def _request_body(registry: ToolRegistry, provider: str) -> bytes:
    request = ModelRequest("m", (UserMessage((TextPart("hi"),)),), tools=tool_specs(registry))
    return get_adapter(provider).encode_request(request)  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", sorted(BUILTIN_REQUEST_SHA256))
def test_the_model_is_offered_the_same_tools_whatever_their_classes(provider: str) -> None:
    plain = builtin_registry()
    overridden = builtin_registry()
    overridden.override_idempotency({name: Idempotency.READ_ONLY for name in overridden.names()})
    body = _request_body(plain, provider)
    assert _request_body(overridden, provider) == body
    assert hashlib.sha256(body).hexdigest() == BUILTIN_REQUEST_SHA256[provider]
    for each in plain:
        assert each.spec() == {
            "name": each.name,
            "description": each.description,
            "parameters": each.parameters,
        }
