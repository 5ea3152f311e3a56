"""``turnkeep acp`` as an editor sees it: each request answered once, each prompt's updates before its
answer, each outcome mapped to its stop reason or error. Every line the agent writes is checked against
the protocol's v1 schema."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from sampler import AssistantMessage
from sampler.fake import Fault, FaultPlan, FinalAnswer, Script, ToolStep
from shell.store import SessionStore
from tests.shell.acp._agent_process import running_agent, updates
from tests.tool_bridge.mcp.conftest import FIXTURE, alive, read_pid

WRITE = Script.task([ToolStep([("write_file", {"path": "a.txt", "content": "hi"})]), FinalAnswer("Done.")])


def resumed(agent: Any, session: str, cwd: Path) -> dict[str, Any]:
    answer: dict[str, Any] = agent.call("session/resume", {"sessionId": session, "cwd": str(cwd)})
    return answer


def test_initialize_offers_load_list_resume_close_images_and_embedded_context(tmp_path: Path) -> None:
    with running_agent(Script.echo(), tmp_path / "s.db") as (agent, _):
        result = agent.initialize()
    assert result["protocolVersion"] == 1
    capabilities = result["agentCapabilities"]
    assert capabilities["loadSession"] is True
    assert capabilities["promptCapabilities"] == {"image": True, "embeddedContext": True}
    assert set(capabilities["sessionCapabilities"]) == {"list", "resume", "close", "delete"}
    assert result["agentInfo"]["name"] == "turnkeep"


def test_a_prompt_streams_its_answer_and_tool_calls_then_ends_its_turn(tmp_path: Path) -> None:
    with running_agent(WRITE, tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, before = agent.until_answer(agent.prompt(session, "write it"))
    assert answer["result"] == {"stopReason": "end_turn"}
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"
    calls = updates(before, "tool_call")
    assert [call["kind"] for call in calls] == ["edit"]
    call_id = calls[0]["toolCallId"]
    finals = [u for u in updates(before, "tool_call_update") if u.get("status") == "completed"]
    assert [u["toolCallId"] for u in finals] == [call_id]
    assert "".join(u["content"]["text"] for u in updates(before, "agent_message_chunk")) == "Done."
    usage = updates(before, "usage_update")
    assert len(usage) == 3, "one after each of the two steps, one at the turn's end"
    assert all(0 < u["used"] <= u["size"] for u in usage)
    # the call is announced before the permission request about it
    kinds = [line.get("method") or line["params"]["update"]["sessionUpdate"] for line in before]
    first_call = next(
        i
        for i, line in enumerate(before)
        if line.get("method") == "session/update" and line["params"]["update"]["sessionUpdate"] == "tool_call"
    )
    asked = next(i for i, line in enumerate(before) if line.get("method") == "session/request_permission")
    assert first_call < asked, kinds


def test_streamed_reasoning_reaches_the_editor_as_thought_chunks_before_the_answer(tmp_path: Path) -> None:
    thinking = Script.task([FinalAnswer("The answer.", thought="Let me think about it carefully.")])
    with running_agent(thinking, tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, before = agent.until_answer(agent.prompt(session, "think"))
    assert answer["result"] == {"stopReason": "end_turn"}
    kinds = [
        line["params"]["update"]["sessionUpdate"] for line in before if line.get("method") == "session/update"
    ]
    thought = "".join(u["content"]["text"] for u in updates(before, "agent_thought_chunk"))
    assert thought == "Let me think about it carefully."
    assert "".join(u["content"]["text"] for u in updates(before, "agent_message_chunk")) == "The answer."
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")


def test_a_client_that_asks_hears_the_retries_as_turnkeep_notices(tmp_path: Path) -> None:
    flaky = FaultPlan.scripted([Fault.server_error(), None, Fault.server_error()])
    with running_agent(Script.echo(), tmp_path / "s.db", faults=flaky) as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        quiet, before_quiet = agent.until_answer(agent.prompt(session, "one"))
        capabilities = {"_meta": {"turnkeep/notices": True}}
        agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        told, before_told = agent.until_answer(agent.prompt(session, "two"))
    assert quiet["result"] == told["result"] == {"stopReason": "end_turn"}
    assert not [line for line in before_quiet if line.get("method") == "_turnkeep/notice"]
    (notice,) = [line["params"] for line in before_told if line.get("method") == "_turnkeep/notice"]
    assert (notice["sessionId"], notice["kind"], notice["event"]["type"]) == (session, "retrying", "retrying")
    assert "attempt 1 of" in notice["message"]


def test_bad_lines_get_their_error_and_the_connection_stays_usable(tmp_path: Path) -> None:
    with running_agent(Script.echo(), tmp_path / "s.db", "--max-line-bytes", "4096") as (agent, _):
        agent.write(b"{not json\n")
        assert agent.next()["error"]["code"] == -32700
        agent.write(b"[1, 2]\n")
        assert agent.next()["error"]["code"] == -32600
        agent.write(b'{"jsonrpc": "1.0", "id": 7, "method": "initialize"}\n')
        assert agent.next() == {"jsonrpc": "2.0", "id": 7, "error": agent.seen[-1]["error"]}
        assert agent.seen[-1]["error"]["code"] == -32600
        assert agent.call("no/such_method")["error"]["code"] == -32601
        assert agent.call("session/new", {"cwd": 3})["error"]["code"] == -32602
        assert agent.call("session/new", {"cwd": "relative", "mcpServers": []})["error"]["code"] == -32602
        agent.write(
            b'{"jsonrpc": "2.0", "id": 99, "method": "initialize", "params": "' + b"x" * 9000 + b'"}\n'
        )
        assert agent.next()["error"]["code"] == -32600
        agent.notify("no/such_notification", {})  # no answer: it is a notification
        assert agent.call("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1


def test_prompts_to_one_session_queue_and_each_gets_its_own_answer(tmp_path: Path) -> None:
    with running_agent(Script.echo(), tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        ids = [agent.prompt(session, f"prompt {n}") for n in range(3)]
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 3:
            line = agent.next()
            if "method" not in line:
                assert line["id"] not in answers, "two answers for one prompt"
                answers[line["id"]] = line
    assert {i: a["result"]["stopReason"] for i, a in answers.items()} == dict.fromkeys(ids, "end_turn")


def test_cancel_mid_stream_answers_the_running_and_the_queued_prompts_cancelled(tmp_path: Path) -> None:
    hang = FaultPlan.scripted([Fault.stall(hang=True, after_chunks=4)] * 4)
    with running_agent(Script.text("a long answer " * 50, chunks=20), tmp_path / "s.db", faults=hang) as (
        agent,
        _,
    ):
        session = agent.new_session(tmp_path / "ws")
        running = agent.prompt(session, "first")
        queued = agent.prompt(session, "second")
        while not updates([agent.next()], "agent_message_chunk"):
            pass
        cancelled_at = time.monotonic()
        agent.notify("session/cancel", {"sessionId": session})
        first, _ = agent.until_answer(running)
        assert time.monotonic() - cancelled_at < 2.5
        second, _ = agent.until_answer(queued)
        after = agent.call("session/list", {})
    assert first["result"] == {"stopReason": "cancelled"}
    assert second["result"] == {"stopReason": "cancelled"}
    assert [s["sessionId"] for s in after["result"]["sessions"]] == [session]


def test_cancel_request_of_one_prompt_answers_it_cancelled_and_ids_are_never_answered_twice(
    tmp_path: Path,
) -> None:
    hang = FaultPlan.scripted([Fault.stall(hang=True, after_chunks=4)])
    with running_agent(Script.text("words " * 50, chunks=20), tmp_path / "s.db", faults=hang) as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        prompt = agent.prompt(session, "talk")
        while not updates([agent.next()], "agent_message_chunk"):
            pass
        agent.send({"id": prompt, "method": "session/list", "params": {}})  # the id is still owed
        reused = agent.next()
        assert reused["error"]["code"] == -32600 and reused["id"] is None
        agent.notify("$/cancel_request", {"requestId": prompt})
        answer, _ = agent.until_answer(prompt)
        after, _ = agent.until_answer(agent.prompt(session, "again"))
    assert answer["result"] == {"stopReason": "cancelled"}
    assert after["result"] == {"stopReason": "end_turn"}


def test_cancel_racing_the_natural_end_gives_one_answer_and_the_session_goes_on(tmp_path: Path) -> None:
    with running_agent(Script.text("short answer", chunks=2), tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        for n in range(5):
            prompt = agent.prompt(session, f"race {n}")
            while not updates([agent.next()], "agent_message_chunk"):
                pass
            agent.notify("session/cancel", {"sessionId": session})
            answer, _ = agent.until_answer(prompt)
            # cancelled when the agent read the cancel first, end_turn when it read the end first
            assert answer["result"]["stopReason"] in ("cancelled", "end_turn")
        last, _ = agent.until_answer(agent.prompt(session, "after"))
        assert last["result"] == {"stopReason": "end_turn"}
        agent.close_stdin()
        assert [line for line in agent.rest() if "method" not in line] == []  # no second answer


def test_cancel_right_after_the_prompt_answers_cancelled(tmp_path: Path) -> None:
    with running_agent(Script.echo(), tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        for n in range(10):
            prompt = agent.prompt(session, f"race {n}")
            agent.notify("session/cancel", {"sessionId": session})
            answer, _ = agent.until_answer(prompt, deadline=2.5)
            assert answer["result"] == {"stopReason": "cancelled"}


def test_failures_map_to_stop_reasons_and_errors_and_the_session_stays_usable(tmp_path: Path) -> None:
    loop = Script.task([ToolStep([("list_dir", {"path": "."})])] * 5 + [FinalAnswer("never")])
    with running_agent(loop, tmp_path / "s.db", "--max-steps", "2", "--allow", "list_dir") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, _ = agent.until_answer(agent.prompt(session, "loop"))
        assert answer["result"] == {"stopReason": "max_turn_requests"}
    quota = FaultPlan.scripted([Fault.insufficient_quota()])
    with running_agent(Script.echo(), tmp_path / "t.db", faults=quota) as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        failed, _ = agent.until_answer(agent.prompt(session, "pay"))
        again, _ = agent.until_answer(agent.prompt(session, "again"))
    error = failed["error"]
    assert error["code"] == -32603
    assert error["data"]["kind"] == "quota_exhausted"
    assert error["data"]["retryable"] is False
    assert error["data"]["session"] == session
    assert error["data"]["turn"] == 1
    assert again["result"] == {"stopReason": "end_turn"}


def test_an_answer_cut_off_by_the_output_limit_ends_max_tokens(tmp_path: Path) -> None:
    cut = Script.task([FinalAnswer("and so the", finish="length")])
    with running_agent(cut, tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, before = agent.until_answer(agent.prompt(session, "tell me"))
    assert answer["result"] == {"stopReason": "max_tokens"}
    assert "".join(u["content"]["text"] for u in updates(before, "agent_message_chunk")) == "and so the"


def test_refused_credentials_answer_authentication_required(tmp_path: Path) -> None:
    refused = FaultPlan.scripted([Fault.status(401)] * 4)
    with running_agent(Script.echo(), tmp_path / "s.db", "--max-attempts", "1", faults=refused) as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, _ = agent.until_answer(agent.prompt(session, "hello"))
    assert answer["error"]["code"] == -32000
    assert answer["error"]["data"]["kind"] == "auth"


def test_a_rejected_permission_denies_the_call_and_the_turn_goes_on(tmp_path: Path) -> None:
    with running_agent(WRITE, tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, before = agent.until_answer(agent.prompt(session, "write it"), permission="reject")
    assert answer["result"] == {"stopReason": "end_turn"}
    assert not (tmp_path / "ws" / "a.txt").exists()
    assert [u["status"] for u in updates(before, "tool_call_update") if u.get("status")][-1] == "failed"


def test_a_permission_request_left_unanswered_is_a_denial_after_the_timeout(tmp_path: Path) -> None:
    with running_agent(WRITE, tmp_path / "s.db", "--permission-timeout", "0.5") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, before = agent.until_answer(agent.prompt(session, "write it"), permission=None)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert any(line.get("method") == "session/request_permission" for line in before)
    assert not (tmp_path / "ws" / "a.txt").exists()


def test_allow_always_is_asked_once_per_session(tmp_path: Path) -> None:
    two = Script.task(
        [
            ToolStep([("write_file", {"path": "a.txt", "content": "a"})]),
            ToolStep([("write_file", {"path": "b.txt", "content": "b"})]),
            FinalAnswer("Both."),
        ]
    )
    with running_agent(two, tmp_path / "s.db") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        answer, before = agent.until_answer(agent.prompt(session, "write"), permission="allow_always")
    assert answer["result"] == {"stopReason": "end_turn"}
    assert sum(line.get("method") == "session/request_permission" for line in before) == 1
    assert (tmp_path / "ws" / "b.txt").read_text() == "b"


def test_load_replays_the_stored_history_in_order_before_its_answer(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with running_agent(WRITE, store, "--allow", "write_file") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        for n in range(3):
            agent.until_answer(agent.prompt(session, f"turn {n}"))
    with running_agent(Script.echo(), store) as (agent, _):
        listed = agent.call("session/list", {"cwd": str(tmp_path / "ws")})["result"]["sessions"]
        assert [s["sessionId"] for s in listed] == [session]
        load = agent.request(
            "session/load", {"sessionId": session, "cwd": str(tmp_path / "ws"), "mcpServers": []}
        )
        answer, replayed = agent.until_answer(load)
        assert answer["result"]["configOptions"]
        prompted, _ = agent.until_answer(agent.prompt(session, "and now"))
        assert prompted["result"] == {"stopReason": "end_turn"}
        missing = agent.call("session/load", {"sessionId": "nope", "cwd": str(tmp_path), "mcpServers": []})
    kinds = [u["params"]["update"]["sessionUpdate"] for u in replayed]
    assert [u["content"]["text"] for u in updates(replayed, "user_message_chunk")] == [
        "turn 0",
        "turn 1",
        "turn 2",
    ]
    assert kinds.count("tool_call") == 3
    assert kinds.index("user_message_chunk") < kinds.index("tool_call") < kinds.index("agent_message_chunk")
    assert {u["status"] for u in updates(replayed, "tool_call_update")} == {"completed"}
    assert missing["error"]["code"] == -32002


def test_close_cancels_the_running_turn_and_the_session_can_be_taken_up_again(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    hang = FaultPlan.scripted([Fault.stall(hang=True, after_chunks=4)] * 4)
    with running_agent(Script.text("a long answer " * 50, chunks=20), store, faults=hang) as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        running = agent.prompt(session, "talk")
        queued = agent.prompt(session, "and again")
        while not updates([agent.next()], "agent_message_chunk"):
            pass
        closed = agent.request("session/close", {"sessionId": session})
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 3:
            line = agent.next()
            if "id" in line and "method" not in line:
                answers[line["id"]] = line
        assert answers[running]["result"] == {"stopReason": "cancelled"}
        assert answers[queued]["result"] == {"stopReason": "cancelled"}
        assert answers[closed]["result"] == {}
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}
        assert agent.call("session/prompt", prompt)["error"]["code"] == -32002  # not open here any more
        listed = agent.call("session/list", {})["result"]["sessions"]
        assert [s["sessionId"] for s in listed] == [session]
        assert resumed(agent, session, tmp_path / "ws")["result"]["configOptions"]
    with running_agent(Script.echo(), store) as (agent, _):
        assert resumed(agent, session, tmp_path / "ws")["result"]["configOptions"]
        prompted, seen = agent.until_answer(agent.prompt(session, "hi again"))
    assert prompted["result"] == {"stopReason": "end_turn"}
    text = "".join(u["content"]["text"] for u in updates(seen, "agent_message_chunk"))
    assert text == "echo: hi again", "the cancelled prompts did not run later"


def test_delete_removes_the_session_from_the_list_and_nothing_takes_it_up(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with running_agent(Script.echo(), store) as (agent, _):
        assert "delete" in agent.initialize()["agentCapabilities"]["sessionCapabilities"]
        kept = agent.new_session(tmp_path / "ws")
        deleted = agent.new_session(tmp_path / "ws")
        agent.until_answer(agent.prompt(deleted, "remember this"))
        assert agent.call("session/delete", {"sessionId": deleted})["result"] == {}
        gone = {"sessionId": deleted, "cwd": str(tmp_path / "ws"), "mcpServers": []}
        assert agent.call("session/load", gone)["error"]["code"] == -32002
        assert agent.call("session/resume", gone)["error"]["code"] == -32002
        assert agent.call("session/delete", {"sessionId": deleted})["error"]["code"] == -32002
        assert agent.call("session/delete", {"sessionId": "nosuch"})["error"]["code"] == -32002
        answer = agent.call(
            "session/prompt", {"sessionId": deleted, "prompt": [{"type": "text", "text": "x"}]}
        )
        assert answer["error"]["code"] == -32002
    with running_agent(Script.echo(), store) as (agent, _):
        listed = agent.call("session/list", {})["result"]["sessions"]
        assert [s["sessionId"] for s in listed] == [kept]
        assert resumed(agent, kept, tmp_path / "ws")["result"]["configOptions"]
        prompted, replay = agent.until_answer(agent.prompt(kept, "hi again"))
    assert prompted["result"] == {"stopReason": "end_turn"}
    assert not updates(replay, "user_message_chunk")
    with SessionStore(store) as kept_store:  # deleted from the editor's list, not erased
        assert kept_store.get_session(deleted).status == "closed"
        assert kept_store.load_messages(deleted)[-1].message == AssistantMessage("echo: remember this")


def test_the_editors_mcp_servers_run_for_its_session_and_end_with_the_agent(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    script = Script.task([ToolStep([("fixture__echo", {"text": "from the editor"})]), FinalAnswer("echoed")])
    server = {
        "name": "fixture",
        "command": sys.executable,
        "args": [str(FIXTURE), "--pidfile", str(pidfile)],
        "env": [],
    }
    sse = {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
    with running_agent(script, tmp_path / "s.db") as (agent, _):
        assert agent.initialize()["agentCapabilities"]["mcpCapabilities"]["http"] is True
        opened = agent.call("session/new", {"cwd": str(tmp_path / "ws"), "mcpServers": [server, sse]})
        session = opened["result"]["sessionId"]
        answer, before = agent.until_answer(agent.prompt(session, "echo it"))
        pid = read_pid(pidfile)
        assert Path(f"/proc/{pid}/cwd").resolve() == (tmp_path / "ws").resolve()
        bad = agent.call(
            "session/new", {"cwd": str(tmp_path / "ws"), "mcpServers": [{"name": "x", "command": "rel"}]}
        )
    assert answer["result"] == {"stopReason": "end_turn"}
    finals = [u for u in updates(before, "tool_call_update") if u.get("status") == "completed"]
    assert len(finals) == 1 and "from the editor" in finals[0]["content"][0]["content"]["text"]
    assert bad["error"]["code"] == -32602
    assert b"not started: it speaks SSE" in agent.stderr
    assert not alive(pid), "the session's server ended with the agent"


def options_by_id(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {option["id"]: option for option in answer["result"]["configOptions"]}


def test_the_editor_switches_the_model_of_the_next_turn(tmp_path: Path) -> None:
    config = tmp_path / "turnkeep.toml"
    config.write_text('[provider]\nmodels = ["fake-large"]\n')
    store = tmp_path / "s.db"
    with running_agent(Script.echo(), store, "--config", str(config)) as (agent, _):
        opened = agent.call("session/new", {"cwd": str(tmp_path / "ws"), "mcpServers": []})
        session = opened["result"]["sessionId"]
        model = options_by_id(opened)["model"]
        assert (model["type"], model["category"], model["currentValue"]) == (
            "select",
            "model",
            "turnkeep-fake",
        )
        assert [o["value"] for o in model["options"]] == ["turnkeep-fake", "fake-large"]
        agent.until_answer(agent.prompt(session, "before"))
        change = {"sessionId": session, "configId": "model", "value": "fake-large"}
        changed = agent.call("session/set_config_option", change)
        assert options_by_id(changed)["model"]["currentValue"] == "fake-large"
        agent.until_answer(agent.prompt(session, "after"))
        unknown = agent.call("session/set_config_option", dict(change, value="gpt-none"))
        resumed = agent.call("session/resume", {"sessionId": session, "cwd": str(tmp_path / "ws")})
        assert agent.call("session/close", {"sessionId": session})["result"] == {}
        again = agent.call("session/resume", {"sessionId": session, "cwd": str(tmp_path / "ws")})
        agent.until_answer(agent.prompt(session, "after the close"))
    assert unknown["error"]["code"] == -32602 and "fake-large" in unknown["error"]["message"]
    assert options_by_id(resumed)["model"]["currentValue"] == "fake-large"
    assert options_by_id(again)["model"]["currentValue"] == "turnkeep-fake"
    with SessionStore(store) as kept:
        models = [record.usage.model for record in kept.turn_usage(session)]
    assert models == ["turnkeep-fake", "fake-large", "turnkeep-fake"]


def test_the_permission_mode_settles_the_calls_the_rules_leave_open(tmp_path: Path) -> None:
    write = Script.task(
        [ToolStep([("write_file", {"path": "a.txt", "content": "hi"})]), FinalAnswer("Done.")]
    )
    with running_agent(write, tmp_path / "s.db") as (agent, _):
        opened = agent.call("session/new", {"cwd": str(tmp_path / "ws"), "mcpServers": []})
        session = opened["result"]["sessionId"]
        mode = options_by_id(opened)["permission_mode"]
        assert (mode["category"], mode["currentValue"]) == ("mode", "ask")
        assert [o["value"] for o in mode["options"]] == ["ask", "allow", "deny"]
        change = {"sessionId": session, "configId": "permission_mode", "value": "deny"}
        assert options_by_id(agent.call("session/set_config_option", change))["permission_mode"][
            "currentValue"
        ] == ("deny")
        denied, before_denied = agent.until_answer(agent.prompt(session, "write it"), permission=None)
        assert not (tmp_path / "ws" / "a.txt").exists()
        agent.call("session/set_config_option", dict(change, value="allow"))
        allowed, before_allowed = agent.until_answer(agent.prompt(session, "write it again"), permission=None)
        bad = [
            agent.call("session/set_config_option", dict(change, configId="colour")),
            agent.call("session/set_config_option", dict(change, value="maybe")),
            agent.call("session/set_config_option", dict(change, value=True)),
            agent.call("session/set_config_option", dict(change, sessionId="nosuch")),
        ]
    assert denied["result"] == allowed["result"] == {"stopReason": "end_turn"}
    for lines in (before_denied, before_allowed):
        assert not [line for line in lines if line.get("method") == "session/request_permission"]
    failed = [u for u in updates(before_denied, "tool_call_update") if u.get("status") == "failed"]
    assert failed and "permission mode denies" in failed[-1]["content"][0]["content"]["text"]
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"
    assert [answer["error"]["code"] for answer in bad] == [-32602, -32602, -32602, -32002]


def test_a_five_megabyte_image_and_a_huge_tool_output_do_not_break_framing(tmp_path: Path) -> None:
    ten_mb = "python3 -c \"import sys; sys.stdout.write('x' * 10_000_000)\""
    big = Script.task([ToolStep([("shell", {"command": ten_mb})]), FinalAnswer("ok")])
    with running_agent(big, tmp_path / "s.db", "--allow", "shell") as (agent, _):
        session = agent.new_session(tmp_path / "ws")
        image = {"type": "image", "mimeType": "image/png", "data": "A" * (5 * 1024 * 1024)}
        text = {"type": "text", "text": "look"}
        prompt = agent.request("session/prompt", {"sessionId": session, "prompt": [text, image]})
        answer, before = agent.until_answer(prompt, deadline=60)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert updates(before, "tool_call_update")
