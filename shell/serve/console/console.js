// The turnkeep console: plain JavaScript, no build step, no third-party code.
// Every API call sends the bearer token; the event stream is read with fetch (EventSource cannot send
// headers) and resumed after any drop with Last-Event-ID, so no stored event is missed or repeated.
// Every text shown is set as text (textContent or a text node), never parsed as HTML.
"use strict";

const state = {
  token: "",
  selected: null,
  stream: null,       // AbortController of the open event stream
  lastId: null,       // the last stored event id received on it
  turns: new Map(),   // turn -> {node, head, body, open: the answer block text streams into, calls}
  pending: new Map(), // request id -> element of a waiting permission prompt
};

// What the connection is known to be: "connected" once the service answered and the stream (if any) is
// open; "reconnecting" after a failed request or a dropped stream; "offline" after OFFLINE_AFTER failures
// in a row, or when the browser says it is offline.
const link = { answered: false, failures: 0, stream: "none" };
const OFFLINE_AFTER = 3;
const FOLD_CHARS = 160;
const FOLD_LINES = 4;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const words = (name) => String(name || "").replaceAll("_", " ");
const count = (n) => Number(n || 0).toLocaleString("en");
const plural = (n, one, many) => `${count(n)} ${n === 1 ? one : many || one + "s"}`;

function showError(message) { $("error").textContent = message || ""; }

// --- the connection -------------------------------------------------------------------------------

function showLink() {
  let text = "connecting", mode = "connecting";
  if (!state.token) { text = "no token"; mode = "idle"; }
  else if (navigator.onLine === false || link.failures >= OFFLINE_AFTER) { text = "offline"; mode = "offline"; }
  else if (link.failures > 0 || link.stream === "broken") { text = "reconnecting"; mode = "reconnecting"; }
  else if (link.answered && link.stream !== "connecting") { text = "connected"; mode = "connected"; }
  const node = $("link");
  node.textContent = text;
  node.dataset.state = mode;
}

function linkAnswered() { link.answered = true; link.failures = 0; showLink(); }
function linkFailed() { link.failures += 1; showLink(); }

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    linkFailed();
    throw new Error("the service cannot be reached");
  }
  linkAnswered();
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${words(data.kind) || response.status}: ${data.message || response.statusText}`);
  return data;
}

// --- usage in words ---------------------------------------------------------------------------------

function addTokens(a, b) {
  const sum = {};
  for (const key of ["input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "reported"]) {
    sum[key] = (a?.[key] || 0) + (b?.[key] || 0);
  }
  return sum;
}

// "371 in · 5 out tokens · $0.0012": the cached and reasoning parts when not zero, the cost when priced.
function usageWords(tokens, cost) {
  let text = `${count(tokens.input_tokens)} in`;
  if (tokens.cached_tokens) text += ` (${count(tokens.cached_tokens)} cached)`;
  text += ` · ${count(tokens.output_tokens)} out tokens`;
  if (tokens.reasoning_tokens) text += ` (${count(tokens.reasoning_tokens)} reasoning)`;
  if (typeof cost === "number") text += ` · $${cost.toFixed(4)}`;
  return text;
}

// A turn's usage (its steps and compactions) in words; "no usage reported" when the provider sent none.
function turnUsageWords(usage) {
  if (!usage) return "no usage reported";
  const total = addTokens(usage.steps, usage.compaction);
  if (!total.reported) return "no usage reported";
  return usageWords(total, usage.cost);
}

// --- sessions ---------------------------------------------------------------------------------------

const STATUS = { idle: "idle", in_turn: "in a turn", closed: "closed" };

function sessionItem(s, depth = 0) {
  const facts = [plural(s.turns, "turn")];
  if (s.parent) facts.push(`subagent (${s.parent.profile}) of ${s.parent.session}, turn ${s.parent.turn}`);
  if (s.children && s.children.length) facts.push(plural(s.children.length, "subagent"));
  if (!s.active && s.status !== "closed") facts.push("passivated");
  if (s.pending_permissions.length) facts.push(`${count(s.pending_permissions.length)} waiting for permission`);
  const item = el("li", { "data-id": s.id, "data-status": s.status },
    el("div", { class: "name", title: s.id }, s.id),
    el("div", { class: "meta" }, el("span", { class: "badge", "data-state": s.status }, STATUS[s.status] || words(s.status)),
      ` ${facts.join(" · ")}`),
    el("div", { class: "usage" }, s.usage ? usageWords(s.usage, s.usage.cost) : "no usage yet"));
  if (s.id === state.selected) item.classList.add("selected");
  if (depth) {
    item.classList.add("child");
    item.dataset.depth = String(depth);
    item.style.marginLeft = `${depth * 1.25}rem`;
  }
  item.addEventListener("click", () => select(s.id));
  return item;
}

// Each session followed by its children (a subagent's session under the one whose call ran it), deepest
// last; a child whose parent is not listed stands on its own.
function familyOrder(sessions) {
  const byId = new Map(sessions.map((s) => [s.id, s]));
  const ordered = [];
  const visit = (s, depth) => {
    ordered.push([s, depth]);
    for (const id of s.children || []) if (byId.has(id)) visit(byId.get(id), depth + 1);
  };
  for (const s of sessions) if (!s.parent || !byId.has(s.parent.session)) visit(s, 0);
  return ordered;
}

async function refreshSessions() {
  if (!state.token) return;
  let data;
  try { data = await api("GET", "/v1/sessions"); } catch (error) { showError(error.message); return; }
  $("sessions").replaceChildren(...familyOrder(data.sessions).map(([s, depth]) => sessionItem(s, depth)));
  if (!data.sessions.length) $("sessions").append(el("li", { class: "empty" }, "No sessions yet."));
  const remembered = sessionStorage.getItem("turnkeep-session");
  if (!state.selected && remembered && data.sessions.some((s) => s.id === remembered)) select(remembered);
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
  sessionStorage.setItem("turnkeep-session", id);
  state.lastId = "0";
  state.turns.clear();
  state.pending.clear();
  $("events").replaceChildren();
  $("permissions").replaceChildren();
  $("session-title").textContent = `Session ${id}`;
  $("session-title").title = id;
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

// --- the event stream -------------------------------------------------------------------------------

async function follow(id) {
  const controller = new AbortController();
  state.stream = controller;
  let delay = 500;
  link.stream = "connecting";
  showLink();
  while (!controller.signal.aborted && state.selected === id) {
    try {
      const headers = { Authorization: `Bearer ${state.token}`, "Last-Event-ID": state.lastId };
      const response = await fetch(`/v1/sessions/${encodeURIComponent(id)}/events`, { headers, signal: controller.signal });
      if (!response.ok) {
        const data = await response.json().catch(() => ({}));
        throw new Error(`${words(data.kind) || response.status}: ${data.message || ""}`);
      }
      link.stream = "open";
      linkAnswered();
      delay = 500;
      await readFrames(response.body, handle);
      if (controller.signal.aborted) return;
      const closed = await isClosed(id); // a closed session's stream ends once it sent everything
      if (closed) { link.stream = "none"; showLink(); return; }
      link.stream = "broken";
      if (closed === false) linkFailed(); else showLink(); // when unreachable, api() counted the failure
    } catch (error) {
      if (controller.signal.aborted) return;
      link.stream = "broken";
      linkFailed();
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

// Whether the session is closed; null when the service cannot say.
async function isClosed(id) {
  try { return (await api("GET", `/v1/sessions/${encodeURIComponent(id)}`)).status === "closed"; }
  catch (error) { return null; }
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

// --- the timeline -----------------------------------------------------------------------------------

// Appends to the timeline, keeping it scrolled to the bottom when it was there.
function keepScrolled(append) {
  const box = $("events");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  append();
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function turnBox(turn) {
  let t = state.turns.get(turn);
  if (!t) {
    const head = el("div", { class: "turn-head" }, el("span", { class: "turn-no" }, `Turn ${turn}`));
    const body = el("div", { class: "turn-body" });
    t = { node: el("article", { class: "turn", "data-turn": String(turn) }, head, body), head, body, open: null, calls: new Map() };
    state.turns.set(turn, t);
    keepScrolled(() => $("events").append(t.node));
  }
  return t;
}

const lastTurn = () => Math.max(1, ...state.turns.keys());

function add(turn, node) { const t = turnBox(turn); keepScrolled(() => t.body.append(node)); return node; }

function notice(turn, kind, text, cls) {
  return add(turn, el("div", { class: `event notice ${cls || ""}` }, el("span", { class: "kind" }, kind), text));
}

// The block the turn's streamed text goes to: made at its first text, and again after each step.
function answer(turn) {
  const t = turnBox(turn);
  if (!t.open) {
    t.open = add(turn, el("div", { class: "event answer", "data-turn": String(turn) }, el("div", { class: "text" })));
  }
  return t.open;
}

function closeAnswer(turn) { turnBox(turn).open = null; }

// A value of a tool's arguments as words: strings as they are, lists and objects spelled out.
function valueWords(value) {
  if (value === null || value === undefined) return "none";
  if (Array.isArray(value)) return value.length ? value.map(valueWords).join(", ") : "nothing";
  if (typeof value === "object") return Object.entries(value).map(([k, v]) => `${k} ${valueWords(v)}`).join("; ") || "nothing";
  return String(value);
}

// Long or multi-line text folded into <details> whose summary names what it holds.
function foldable(label, text, cls) {
  const content = el("div", { class: `body ${cls}` }, text);
  const lines = text.split("\n").length;
  if (text.length <= FOLD_CHARS && lines <= FOLD_LINES) return el("div", { class: "part" }, el("span", { class: "label" }, label), content);
  return el("details", { class: "part" },
    el("summary", {}, el("span", { class: "label" }, label), `${plural(lines, "line")}, ${plural(text.length, "character")}`), content);
}

function argumentsPart(raw) {
  let parsed;
  try { parsed = JSON.parse(raw); } catch { parsed = undefined; }
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
    const entries = Object.entries(parsed);
    if (!entries.length) return el("div", { class: "part muted" }, "no arguments");
    const text = entries.map(([k, v]) => `${k}: ${valueWords(v)}`).join("\n");
    return foldable("arguments", text, "arguments");
  }
  return foldable("arguments", parsed === undefined ? String(raw) : valueWords(parsed), "arguments");
}

function toolCall(e) {
  const t = turnBox(e.turn);
  closeAnswer(e.turn);
  let node = t.calls.get(e.call_id);
  if (node) return node;
  const status = el("span", { class: "badge", "data-state": "pending" }, "running");
  node = el("div", { class: "event tool", "data-call": e.call_id },
    el("div", { class: "tool-head" }, el("span", { class: "kind" }, "tool"), el("strong", { class: "tool-name" }, e.tool), " ", status),
    argumentsPart(e.arguments ?? ""));
  node.status = status;
  t.calls.set(e.call_id, node);
  return add(e.turn, node);
}

function toolFinished(e) {
  const node = toolCall({ ...e, arguments: e.arguments ?? "" });
  const failed = e.is_error || e.status !== "ok";
  node.status.textContent = e.is_error && e.status === "ok" ? "error" : words(e.status);
  node.status.dataset.state = failed ? "failed" : "ok";
  node.append(foldable("result", e.preview || "(no output)", "result"));
}

const CANCEL_REASONS = {
  user_cancelled: "cancelled by the user",
  aborted: "aborted by the program",
  interrupted: "interrupted: the process ended while it ran",
};

function turnEnd(type, e) {
  const t = turnBox(e.turn);
  if (type === "turn_completed" && e.text) {
    answer(e.turn).querySelector(".text").textContent = e.text; // the stored text is what the model wrote
  }
  closeAnswer(e.turn);
  let what;
  if (type === "turn_completed") what = `Completed in ${plural(e.steps, "step")}`;
  else if (type === "turn_failed") what = `Failed (${words(e.kind)}): ${e.message}`;
  else what = `Cancelled: ${CANCEL_REASONS[e.reason] || words(e.reason)}`;
  const end = add(e.turn, el("div", { class: "event turn-end outcome", "data-type": type, "data-turn": String(e.turn) },
    el("div", { class: "what" }, what), el("div", { class: "usage" }, turnUsageWords(e.usage))));
  t.head.querySelector(".badge")?.remove();
  t.head.append(el("span", { class: "badge", "data-state": type }, type.replace("turn_", "")));
  for (const [id, node] of state.pending) { node.remove(); state.pending.delete(id); }
  refreshSessions();
  return end;
}

function retryWords(e) {
  const status = e.status ? ` (HTTP ${e.status})` : "";
  const voided = e.discard_partial ? "; the partial answer is discarded" : "";
  return `${words(e.kind)}${status}: attempt ${e.attempt + 1} of ${e.max_attempts} in ${e.delay.toFixed(1)} s${voided}`;
}

// Any other event: its name and its plain fields in words.
function otherWords(e) {
  return Object.entries(e).filter(([k, v]) => !["type", "session", "turn"].includes(k) && v !== null && typeof v !== "object")
    .map(([k, v]) => `${words(k)} ${v}`).join(" · ");
}

function handle(frame) {
  if (frame.id !== undefined) state.lastId = frame.id;
  const e = JSON.parse(frame.data);
  const turn = e.turn;
  switch (frame.event) {
    case "turn_started":
      add(turn, el("div", { class: "event prompt" }, el("span", { class: "kind" }, "prompt"), el("div", { class: "text" }, e.prompt)));
      break;
    case "text_delta": {
      const block = answer(turn);
      block.querySelector(".text").textContent += e.text;
      block.dataset.deltas = String(Number(block.dataset.deltas || 0) + 1);
      break;
    }
    case "step_answered":
      answer(turn).querySelector(".text").textContent = e.text;
      answer(turn).dataset.step = String(e.step);
      closeAnswer(turn);
      break;
    case "retrying": {
      if (e.discard_partial && state.turns.get(turn)?.open) { answer(turn).classList.add("void"); closeAnswer(turn); }
      notice(turn, "retry", retryWords(e), "retry").title = e.message || "";
      break;
    }
    case "queued": {
      const wait = e.expected_wait === null ? "until a request in flight ends" : `about ${e.expected_wait.toFixed(1)} s`;
      notice(turn, "queued", `waiting at the provider gate (${words(e.reason)}): place ${e.place + 1}, ${wait}`, "queued");
      break;
    }
    case "projection_fallback": notice(turn, "fallback", `the provider refused the request's shape (${words(e.kind)}); sent again as ${words(e.projection)}`); break;
    case "auth_refreshed": notice(turn, "credentials", "refreshed after the provider refused them; the request was sent again"); break;
    case "tool_call_started": toolCall(e); break;
    case "tool_call_finished": toolFinished(e); break;
    case "tool_abandoned": notice(turn ?? lastTurn(), "tool", `${e.tool} was abandoned: ${words(e.reason)}`); break;
    case "permission_requested": showPermission(e); break;
    case "compaction_started": notice(turn, "compaction", `${words(e.reason)}: about ${count(e.estimated_tokens)} of ${count(e.window)} tokens`, "compaction"); break;
    case "compaction_finished":
      notice(turn, "compaction", e.ok ? `${count(e.tokens_before)} → ${count(e.tokens_after)} tokens, ${plural(e.replaced, "message")} summarised` : `did not help: ${e.message}`, "compaction");
      break;
    case "doom_loop_warning": notice(turn, "repeating", `the model repeats itself (${words(e.reason)}); it was told to change approach`); break;
    case "turn_resumed": notice(turn, "resumed", `its host had stopped; it goes on after step ${e.steps_done}` + (e.rerun.length ? `, ${e.rerun.length} tool calls run again` : "") + (e.interrupted.length ? `, ${e.interrupted.length} interrupted (they may have taken effect)` : ""), "resumed"); break;
    case "subagent_started": notice(turn, "subagent", `${e.profile} subagent ${e.child} started: ${e.description}` + (e.reattached ? " (taken up again)" : ""), "subagent"); break;
    case "subagent_finished": notice(turn, "subagent", `${e.profile} subagent ${e.child} ${words(e.outcome)}` + (e.message ? `: ${e.message}` : ""), "subagent"); break;
    case "prompt_queued": add(turn, el("div", { class: "event prompt" }, el("span", { class: "kind" }, "waiting"), el("div", { class: "text" }, e.text))); break;
    case "gap": notice(lastTurn(), "gap", `${count(e.dropped_bytes)} bytes of streamed text were not shown; the stored text follows`); break;
    case "turn_completed": case "turn_failed": case "turn_cancelled": turnEnd(frame.event, e); break;
    default: notice(turn ?? lastTurn(), words(frame.event), otherWords(e));
  }
}

function showPermission(p) {
  const id = p.request_id;
  if (state.pending.has(id)) return;
  const buttons = ["allow_once", "allow_always", "deny"].map((decision) => {
    const button = el("button", { type: "button", "data-decision": decision }, words(decision));
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
  } catch (error) { showError(error.message); }
  if (node) node.remove();
  state.pending.delete(id);
}

// --- supervision ------------------------------------------------------------------------------------

function treeNode(actor) {
  const restarts = el("span", { class: "restarts", "data-count": String(actor.restarts) },
    actor.restarts ? plural(actor.restarts, "restart") : "never restarted");
  const item = el("li", { "data-address": actor.address },
    el("span", { class: "name", title: actor.address }, actor.name), " ",
    el("span", { class: "badge", "data-state": actor.status }, words(actor.status)), " ", restarts);
  if (actor.children.length) item.append(el("ul", {}, ...actor.children.map(treeNode)));
  return item;
}

function countersWords(data) {
  const troubles = [[data.restarts, "restart"], [data.crashes, "crash", "crashes"], [data.dead_letters, "dead letter"]]
    .filter(([n]) => n).map(([n, one, many]) => plural(n, one, many));
  const health = troubles.length ? `${troubles.join(", ")} so far.` : "No restarts, crashes or dead letters.";
  const turns = `${plural(data.turns_running, "turn")} running, ${data.turns_waiting ? count(data.turns_waiting) : "none"} waiting for a place.`;
  return `${health} ${turns}`;
}

const PRIORITIES = { 0: "interactive", 1: "background" };

function gateWords(gate) {
  if (!gate) return "Off: requests go straight to the provider.";
  const parts = [gate.in_flight ? `${plural(gate.in_flight, "request")} in flight` : "No request in flight"];
  const waiting = Object.entries(gate.waiting).filter(([, n]) => n);
  parts.push(waiting.length ? `waiting: ${waiting.map(([p, n]) => `${count(n)} ${PRIORITIES[p] || "priority " + p}`).join(", ")}` : "none waiting");
  if (gate.cool_down > 0) parts.push(`cooling down for ${gate.cool_down.toFixed(1)} s`);
  const budgets = [];
  if (gate.requests_remaining !== null) budgets.push(plural(Math.floor(gate.requests_remaining), "request"));
  if (gate.tokens_remaining !== null) budgets.push(plural(Math.floor(gate.tokens_remaining), "token"));
  if (budgets.length) parts.push(`${budgets.join(" and ")} left this minute`);
  return `${parts.join(", ")}.`;
}

function gateBadge(gate) {
  if (!gate) return ["off", "idle"];
  if (gate.cool_down > 0) return ["cooling down", "reconnecting"];
  if (Object.values(gate.waiting).some((n) => n)) return ["queueing", "in_turn"];
  return gate.in_flight ? ["busy", "in_turn"] : ["idle", "idle"];
}

function mcpItem(server) {
  const facts = `${plural(server.tools, "tool")}, ${server.restarts ? plural(server.restarts, "restart") : "never restarted"}`;
  return el("li", {}, el("span", { class: "name", title: server.name }, server.name), " ",
    el("span", { class: "badge", "data-state": server.status }, words(server.status)), ` ${facts}`,
    server.last_error ? el("div", { class: "muted" }, `Last error: ${server.last_error}`) : null);
}

async function refreshSupervision() {
  if (!state.token) return;
  let data;
  try { data = await api("GET", "/v1/supervision"); } catch (error) { return; }
  $("counters").textContent = countersWords(data);
  const [label, mode] = gateBadge(data.gate);
  $("gate").replaceChildren(el("span", { class: "badge", "data-state": mode }, label), ` ${gateWords(data.gate)}`);
  const servers = data.mcp || [];
  $("mcp").replaceChildren(...(servers.length ? servers.map(mcpItem) : [el("li", { class: "muted" }, "None configured.")]));
  $("tree").replaceChildren(...data.tree.map(treeNode));
  $("dead-letters").replaceChildren(...(data.recent_dead_letters.length
    ? data.recent_dead_letters.map((d) => el("li", {}, `${new Date(d.at * 1000).toLocaleTimeString()} `,
        el("span", { class: "address" }, d.address), `: ${d.reason}`))
    : [el("li", { class: "muted" }, "None.")]));
}

// --- start ------------------------------------------------------------------------------------------

function useToken(token) {
  state.token = token.trim();
  sessionStorage.setItem("turnkeep-token", state.token);
  showLink();
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
  window.addEventListener("online", showLink);
  window.addEventListener("offline", showLink);
  showLink();
  if (token) useToken(token);
  setInterval(refreshSessions, 2000);
  setInterval(refreshSupervision, 2000);
}

start();
