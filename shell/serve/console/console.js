// The turnkeep console: plain JavaScript, no build step, no third-party code.
// Every API call sends the bearer token; the event stream is read with fetch (EventSource cannot send
// headers) and resumed after any drop with Last-Event-ID, so no stored event is missed or repeated.
"use strict";

const state = {
  token: "",
  selected: null,
  stream: null,      // AbortController of the open event stream
  lastId: null,      // the last stored event id received on it
  answers: new Map(), // turn -> element holding its streamed text
  pending: new Map(), // request id -> element of a waiting permission prompt
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) node.append(child);
  return node;
}

function showError(message) { $("error").textContent = message || ""; }

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error(`${data.kind || response.status}: ${data.message || response.statusText}`);
  }
  return data;
}

// --- sessions ---------------------------------------------------------------------------------

async function refreshSessions() {
  if (!state.token) return;
  let data;
  try { data = await api("GET", "/v1/sessions"); } catch (error) { showError(error.message); return; }
  const list = $("sessions");
  list.replaceChildren(...data.sessions.map((s) => {
    const waiting = s.pending_permissions.length ? ` · ${s.pending_permissions.length} waiting` : "";
    const usage = s.usage ? ` · ${JSON.stringify(s.usage)}` : "";
    const item = el("li", { "data-id": s.id, "data-status": s.status },
      el("div", { class: "name" }, s.id),
      el("div", { class: "meta" }, `${s.status} · turn ${s.turns}${s.active ? "" : " · passivated"}${waiting}${usage}`));
    if (s.id === state.selected) item.classList.add("selected");
    item.addEventListener("click", () => select(s.id));
    return item;
  }));
  const current = data.sessions.find((s) => s.id === state.selected);
  if (current) {
    const open = current.status !== "closed";
    $("prompt").disabled = $("send").disabled = !open;
    $("cancel").disabled = current.status !== "in_turn";
    for (const p of current.pending_permissions) showPermission(p);
  }
}

async function openSession(event) {
  event.preventDefault();
  try {
    const created = await api("POST", "/v1/sessions", { workspace: $("new-workspace").value });
    $("new-workspace").value = "";
    showError("");
    await refreshSessions();
    select(created.id);
  } catch (error) { showError(error.message); }
}

function select(id) {
  if (state.stream) state.stream.abort();
  state.selected = id;
  state.lastId = "0";
  state.answers.clear();
  state.pending.clear();
  $("events").replaceChildren();
  $("permissions").replaceChildren();
  $("session-title").textContent = `session ${id}`;
  for (const item of $("sessions").children) item.classList.toggle("selected", item.dataset.id === id);
  follow(id);
  refreshSessions();
}

async function sendPrompt(event) {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || !state.selected) return;
  try {
    await api("POST", `/v1/sessions/${encodeURIComponent(state.selected)}/prompts`, { text });
    $("prompt").value = "";
    showError("");
  } catch (error) { showError(error.message); }
}

async function cancelTurn() {
  try { await api("POST", `/v1/sessions/${encodeURIComponent(state.selected)}/cancel`); }
  catch (error) { showError(error.message); }
}

// --- the event stream ---------------------------------------------------------------------------

function setLink(text, mode) { const link = $("link"); link.textContent = text; link.dataset.state = mode; }

async function follow(id) {
  const controller = new AbortController();
  state.stream = controller;
  let delay = 500;
  while (!controller.signal.aborted && state.selected === id) {
    try {
      const headers = { Authorization: `Bearer ${state.token}`, "Last-Event-ID": state.lastId };
      const response = await fetch(`/v1/sessions/${encodeURIComponent(id)}/events`,
        { headers, signal: controller.signal });
      if (!response.ok) {
        const data = await response.json().catch(() => ({}));
        throw new Error(`${data.kind || response.status}: ${data.message || ""}`);
      }
      setLink("live", "live");
      delay = 500;
      await readFrames(response.body, (frame) => handle(frame));
      if (state.selected === id) setLink("stream ended; reconnecting", "retrying");
    } catch (error) {
      if (controller.signal.aborted) return;
      setLink(`reconnecting (${error.message})`, "retrying");
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

async function readFrames(body, onFrame) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const frame = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const at = line.indexOf(": ");
        if (at > 0) frame[line.slice(0, at)] = line.slice(at + 2);
      }
      if (frame.data !== undefined) onFrame(frame);
    }
  }
}

function line(kind, text, cls) {
  const node = el("div", { class: `event ${cls || ""}` }, el("span", { class: "kind" }, kind), text);
  const box = $("events");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  box.append(node);
  if (atBottom) box.scrollTop = box.scrollHeight;
  return node;
}

// The block the turn's streamed text goes to: made at its first text, and again after tool calls.
function answer(turn) {
  let node = state.answers.get(turn);
  if (!node) {
    node = line(`turn ${turn}`, "", "answer");
    node.dataset.turn = String(turn);
    node.append(el("span", { class: "text" }));
    state.answers.set(turn, node);
  }
  return node.querySelector(".text");
}

function handle(frame) {
  if (frame.id !== undefined) state.lastId = frame.id;
  const e = JSON.parse(frame.data);
  switch (frame.event) {
    case "turn_started": line(`turn ${e.turn}`, `> ${e.prompt}`, "prompt"); break;
    case "text_delta": {
      const text = answer(e.turn);
      text.textContent += e.text;
      text.parentElement.dataset.deltas = String(Number(text.parentElement.dataset.deltas || 0) + 1);
      break;
    }
    case "retrying": {
      line("retry", `${e.kind}${e.status ? " " + e.status : ""}: attempt ${e.attempt + 1} of ${e.max_attempts} in ${e.delay.toFixed(1)} s`, "notice");
      if (e.discard_partial) { const text = answer(e.turn); text.parentElement.classList.add("void"); state.answers.delete(e.turn); }
      break;
    }
    case "tool_call_started":
      state.answers.delete(e.turn); // text after the tools is a new block
      line("tool", `${e.tool} ${e.arguments}`, "tool");
      break;
    case "tool_call_finished": line("tool", `${e.tool} ${e.is_error ? "error" : e.status}: ${e.preview}`, "tool"); break;
    case "permission_requested": showPermission(e); break;
    case "compaction_started": line("compaction", `${e.reason}: about ${e.estimated_tokens} of ${e.window} tokens`, "notice"); break;
    case "compaction_finished": line("compaction", e.ok ? `${e.tokens_before} -> ${e.tokens_after} tokens` : `did not help: ${e.message}`, "notice"); break;
    case "gap": line("gap", `text was dropped (${e.dropped_bytes} bytes); the turn's end carries its text`, "notice"); break;
    case "turn_completed": case "turn_failed": case "turn_cancelled": {
      const block = state.answers.get(e.turn);
      if (frame.event === "turn_completed" && e.text && !(block && block.textContent)) answer(e.turn).textContent = e.text;
      const why = e.kind ? `${e.kind}: ${e.message}` : e.reason || `${e.steps} step(s)`;
      const end = line(frame.event.replace("turn_", ""), why, "turn-end");
      end.dataset.type = frame.event;
      end.dataset.turn = String(e.turn);
      for (const [id, node] of state.pending) { node.remove(); state.pending.delete(id); }
      refreshSessions();
      break;
    }
    default: line(frame.event, JSON.stringify(e), "notice");
  }
}

function showPermission(p) {
  const id = p.request_id;
  if (state.pending.has(id)) return;
  const buttons = ["allow_once", "allow_always", "deny"].map((decision) => {
    const button = el("button", { type: "button", "data-decision": decision }, decision.replace("_", " "));
    button.addEventListener("click", () => answerPermission(id, decision));
    return button;
  });
  const node = el("div", { class: "permission", "data-request": id },
    el("strong", {}, `${p.tool} asks for permission`), el("code", {}, p.arguments), el("div", { class: "buttons" }, ...buttons));
  state.pending.set(id, node);
  $("permissions").append(node);
}

async function answerPermission(id, decision) {
  const node = state.pending.get(id);
  try {
    await api("POST", `/v1/sessions/${encodeURIComponent(state.selected)}/permissions/${encodeURIComponent(id)}`, { decision });
    line("permission", `${decision} ${id}`, "notice");
  } catch (error) { showError(error.message); }
  if (node) node.remove();
  state.pending.delete(id);
}

// --- supervision --------------------------------------------------------------------------------

function treeNode(actor) {
  const restarts = el("span", { class: "restarts", "data-count": String(actor.restarts) }, `${actor.restarts} restarts`);
  const item = el("li", { "data-address": actor.address }, `${actor.name} · ${actor.status} · `, restarts);
  if (actor.children.length) item.append(el("ul", {}, ...actor.children.map(treeNode)));
  return item;
}

async function refreshSupervision() {
  if (!state.token) return;
  let data;
  try { data = await api("GET", "/v1/supervision"); } catch (error) { return; }
  $("counters").textContent = `${data.restarts} restarts · ${data.crashes} crashes · ${data.dead_letters} dead letters`
    + ` · turns: ${data.turns_running} running, ${data.turns_waiting} waiting at the gate`
    + (data.provider_gate ? ` · ${data.provider_gate}` : "")
    + (data.mcp_servers.length ? ` · MCP ${data.mcp_servers.join("; ")}` : "");
  $("tree").replaceChildren(...data.tree.map(treeNode));
  $("dead-letters").replaceChildren(...data.recent_dead_letters.map((d) =>
    el("li", {}, `${new Date(d.at * 1000).toLocaleTimeString()} ${d.address}: ${d.reason}`)));
}

// --- start ----------------------------------------------------------------------------------------

function useToken(token) {
  state.token = token.trim();
  sessionStorage.setItem("turnkeep-token", state.token);
  refreshSessions();
  refreshSupervision();
}

function start() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) history.replaceState(null, "", location.pathname); // not left in the address bar
  const token = fromHash || sessionStorage.getItem("turnkeep-token") || "";
  $("token").value = token;
  $("token-form").addEventListener("submit", (event) => { event.preventDefault(); useToken($("token").value); });
  $("new-form").addEventListener("submit", openSession);
  $("prompt-form").addEventListener("submit", sendPrompt);
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.ctrlKey) sendPrompt(event);
  });
  $("cancel").addEventListener("click", cancelTurn);
  if (token) useToken(token);
  setInterval(refreshSessions, 2000);
  setInterval(refreshSupervision, 2000);
}

start();
