"""ChatStateActor: the request it builds, with its estimate, kept as the history grows and changes."""

from __future__ import annotations

from pathlib import Path

from actors import ActorSystem, ChildSpec
from sampler.messages import AssistantMessage, ToolCall, ToolMessage, ToolResult, ToolSpec, UserMessage
from shell._protocol import Append, ApplyCompaction, BuildRequest, BuiltRequest, StartTurn
from shell.session._chat_state import ChatStateActor, ChatStateOptions
from shell.session._tokens import TokenEstimator
from shell.store import open_store

TOOLS = (
    ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),
)


def test_each_request_is_estimated_as_a_whole_request_would_be(tmp_path: Path) -> None:
    estimator = TokenEstimator(ratio=1.3)
    options = ChatStateOptions("s", system_prompt="Be brief. ✓")
    with open_store(tmp_path / "s.db") as store, ActorSystem(ask_timeout=10.0) as system:
        store.create_session("s", workspace="/w", model="m")
        chat = system.spawn(ChildSpec("chat", lambda: ChatStateActor(store, options, estimator)))

        def built() -> BuiltRequest:
            result: BuiltRequest = chat.ask(BuildRequest("m", TOOLS))
            assert result.estimated_tokens == estimator.estimate(result.request.messages, TOOLS)
            return result

        sizes = [built().estimated_tokens]
        for turn in range(1, 4):
            chat.ask(StartTurn(turn, UserMessage.of_text(f"prompt {turn} " + "é" * 40)))
            call = ToolCall(f"c{turn}", "read_file", '{"path": "a.txt"}')
            chat.ask(Append(turn, AssistantMessage("", (call,))))
            chat.ask(Append(turn, ToolMessage(ToolResult(call.id, "x" * 400))))
            chat.ask(Append(turn, AssistantMessage("done")))
            sizes.append(built().estimated_tokens)
        assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)

        seqs = tuple(m.seq for m in store.load_messages("s") if m.turn == 1)
        before, after = chat.ask(ApplyCompaction(4, seqs, "what turn 1 did"))
        assert after < before
        assert built().estimated_tokens == after
