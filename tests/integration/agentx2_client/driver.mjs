// The official AgentX 2.9.0 client (agentxjs, built from the public source at tag v2.9.0: vendor/),
// used as an application uses it (packages/agentx/README.md @ v2.9.0, "Remote mode"):
//   const ax = createAgentX();
//   const client = await ax.connect(url, { headers });   // headers go in its `auth` notification
//   const agent = await client.chat.create({ name, systemPrompt });
//   client.on("text_delta", ...); await agent.send("..."); await agent.history();
// Every call goes through the client's own code (AgentXClient, AgentHandle, RpcClient); nothing
// here speaks the wire protocol itself.
//
// Usage: node driver.mjs <entry.js> <scenario.json>. Writes one JSON line per step to
// scenario.output (not stdout: the client logs there). Scenario "flow": connect, list, create,
// send each message and collect its stream, history, get the agent again, send once more through
// the handle that returns; a second chat with a bare model name, updated; delete both. Scenario
// "interrupt": see interruptFlow; "present": see presentFlow.

const [entryPath, scenarioPath] = process.argv.slice(2);
const { createAgentX } = await import(entryPath);
const { readFileSync, appendFileSync } = await import("node:fs");
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));

function record(step, data = {}) {
  appendFileSync(scenario.output, `${JSON.stringify({ step, ...data })}\n`);
}

function waitFor(predicate, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const tick = () => {
      if (predicate()) return resolve();
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 5);
    };
    tick();
  });
}

// The stream as the client's event bus delivers it: every event of the agent's image, in order.
function collect(client, imageId) {
  const events = [];
  client.onAny((event) => {
    if (event.context?.imageId === imageId) events.push({ type: event.type, data: event.data });
  });
  return events;
}

// agent.send, with client.on("text_delta") as an application subscribes (filtered to the agent)
async function sendAndStream(client, agent, events, message) {
  const from = events.length;
  let deltas = "";
  const off = client.on("text_delta", (event) => {
    if (event.context?.imageId === agent.imageId) deltas += event.data.text;
  });
  const answer = await agent.send(message); // 2.x answers message.send when the turn ends
  await waitFor(() => events.slice(from).some((e) => e.type === "conversation_end"), "conversation_end");
  off();
  const turn = events.slice(from);
  return { answer, deltas, types: turn.map((e) => e.type), end: turn.find((e) => e.type === "conversation_end") };
}

// Scenario "interrupt": agent.interrupt() while the reply streams; the send is answered
// "interrupted" and the history keeps the partial text that was streamed.
async function interruptFlow(client) {
  const agent = await client.chat.create({ name: "Interrupted" });
  const events = collect(client, agent.imageId);
  let deltas = "";
  client.on("text_delta", (event) => {
    if (event.context?.imageId === agent.imageId) deltas += event.data.text;
  });
  const answer = agent.send(scenario.message);
  await waitFor(() => deltas.length >= scenario.interruptAfterChars, "text to interrupt");
  const interrupted = await agent.interrupt();
  const sent = await answer;
  await waitFor(() => events.some((e) => e.type === "conversation_end"), "conversation_end");
  record("interrupt", {
    interrupted,
    answer: sent,
    deltas,
    types: events.map((e) => e.type),
    end: events.find((e) => e.type === "conversation_end"),
    history: await agent.history(),
  });
  await client.dispose();
  record("done");
  process.exit(0);
}

// Scenario "present": the client's UI layer (agent.present(), a Presentation as a React app's
// useSyncExternalStore reads it). One reply is stored before the presentation exists (it loads the
// history), one is sent through it; what it holds is recorded with the stored history.
async function presentFlow(client) {
  const agent = await client.chat.create({ name: "Presented", ...(scenario.tools ? { tools: scenario.tools } : {}) });
  await agent.send(scenario.messages[0]);
  const presentation = await agent.present();
  if (scenario.readPath) await waitFor(() => presentation.os?.files.length > 0, "the presentation's file list");
  const loaded = JSON.parse(JSON.stringify(presentation.getSnapshot().conversations));
  await presentation.send(scenario.messages[1]);
  await waitFor(() => {
    const last = presentation.conversations.at(-1);
    return last?.role === "assistant" && !last.isStreaming && presentation.status === "idle";
  }, "the presentation's reply");
  record("present", {
    loaded,
    conversations: presentation.getSnapshot().conversations,
    status: presentation.status,
    files: presentation.os?.files ?? null,
    read: scenario.readPath ? await presentation.os.read(scenario.readPath) : null,
    history: await agent.history(),
  });
  presentation.dispose();
  await client.dispose();
  record("done");
  process.exit(0);
}

let client;
try {
  const ax = createAgentX();
  client = await ax.connect(scenario.url, {
    // no key where the endpoint authenticated the socket already (API Gateway's $connect)
    ...(scenario.token ? { headers: { Authorization: `Bearer ${scenario.token}` } } : {}),
    autoReconnect: false,
  });
  record("connect", { connected: client.connected });
  if (scenario.name === "interrupt") await interruptFlow(client);
  if (scenario.name === "present") await presentFlow(client);

  const before = await client.chat.list();
  record("list", { records: before.records.map((r) => r.imageId) });

  const agent = await client.chat.create({
    name: scenario.agentName,
    description: "driven by the official agentxjs 2.9.0 client",
    systemPrompt: scenario.systemPrompt,
    customData: scenario.customData,
  });
  record("create", {
    instanceId: agent.instanceId,
    imageId: agent.imageId,
    containerId: agent.containerId,
    sessionId: agent.sessionId,
  });
  const events = collect(client, agent.imageId);

  for (const message of scenario.messages) {
    const turn = await sendAndStream(client, agent, events, message);
    record("send", { message, ...turn });
  }

  const history = await agent.history();
  record("history", { messages: history });

  const listed = await client.chat.list();
  record("list_after", {
    records: listed.records.map((r) => ({ imageId: r.imageId, name: r.name, customData: r.customData })),
  });

  const again = await client.chat.get(agent.imageId);
  record("get", { instanceId: again?.instanceId, imageId: again?.imageId, sessionId: again?.sessionId });
  const turn = await sendAndStream(client, again, events, scenario.followUp);
  record("send_again", { message: scenario.followUp, ...turn });
  record("history_again", { messages: await again.history() });

  const missing = await client.chat.get("img_does_not_exist").then(
    (handle) => ({ handle: handle === null ? null : "a handle" }),
    (err) => ({ error: String(err?.message ?? err) })
  );
  record("get_missing", missing);

  // README's own example names the model bare ("claude-sonnet-4-6"); update replaces customData
  const plato = await client.chat.create({ name: "Plato", model: scenario.bareModel });
  const platoTurn = await sendAndStream(client, plato, collect(client, plato.imageId), "Hi Plato");
  await plato.update({ customData: scenario.updatedCustomData });
  const platoRecord = (await client.chat.list()).records.find((r) => r.imageId === plato.imageId);
  record("bare_model", {
    model: platoRecord.model,
    customData: platoRecord.customData,
    status: platoTurn.answer.status,
    deltas: platoTurn.deltas,
  });
  await plato.delete();

  await again.delete();
  const afterDelete = await client.chat.list();
  record("delete", { records: afterDelete.records.map((r) => r.imageId) });

  await client.dispose();
  record("done");
  process.exit(0);
} catch (err) {
  record("error", { message: String(err?.message ?? err), stack: String(err?.stack ?? "") });
  process.exit(1);
}
