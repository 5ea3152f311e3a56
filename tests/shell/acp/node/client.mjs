// Drives `turnkeep acp` with the protocol's TypeScript SDK: node client.mjs WORKSPACE COMMAND ARGS...
// Prints one JSON object on stdout: what the agent answered and which updates it sent.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const [workspace, command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const updates = [];
const asked = [];

const app = client({ name: "turnkeep-acp-test" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    asked.push(params.toolCall.toolCallId);
    const allow = params.options.find((option) => option.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update.sessionUpdate);
  });

const deadline = setTimeout(() => {
  console.error("the client gave up after 40 s");
  agent.kill("SIGKILL");
  process.exit(3);
}, 40000);

const found = await app.connectWith(stream, async (ctx) => {
  const hello = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  const session = await ctx.request(methods.agent.session.new, { cwd: workspace, mcpServers: [] });
  const sessionId = session.sessionId;
  const answer = await ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "write it" }],
  });
  const live = updates.splice(0);
  const listed = await ctx.request(methods.agent.session.list, {});
  let unknown = null;
  try {
    await ctx.request("no/such_method", {});
  } catch (error) {
    unknown = error.code;
  }
  await ctx.request(methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] });
  const replayed = updates.splice(0);
  return {
    protocolVersion: hello.protocolVersion,
    loadSession: hello.agentCapabilities.loadSession,
    stopReason: answer.stopReason,
    asked: asked.length,
    live,
    listed: listed.sessions.map((info) => info.sessionId),
    unknown,
    replayed,
    sessionId,
  };
});
clearTimeout(deadline);
agent.stdin.end();
await new Promise((resolve) => agent.on("exit", resolve));
console.log(JSON.stringify({ ...found, exitCode: agent.exitCode }));
