// The stock AgentX 1.9.0 UI, headless: the official agentxjs client (createRemoteAgentX) and the
// UI's conversation reducer (packages/ui/src/hooks/useAgent/conversationReducer.ts), both built
// from the public source at tag v1.9.0 (vendor/), wired exactly as the React hook useAgent
// (packages/ui/src/hooks/useAgent/index.ts @ v1.9.0) wires them: the same event subscriptions,
// each filtered by context.imageId, the same actions, and send/interrupt as the hook does them.
// What a reply "renders" is what the reducer's state holds for it: its text blocks' content.
//
// Usage: node driver.mjs <bundle.mjs> <scenario.json>; writes one JSON result to scenario.output
// (not stdout: the client logs there).
// Scenarios: "order" (several replies, two clients on the session taking turns to send) and
// "interrupt" (one reply interrupted once `interruptAfterChars` characters are rendered).

const [bundlePath, scenarioPath] = process.argv.slice(2);
const { createRemoteAgentX, conversationReducer, initialConversationState } = await import(bundlePath);
const { readFileSync, writeFileSync } = await import("node:fs");
const { createRequire } = await import("node:module");

// The UI runs in a browser, where every WebSocket message is its own task and the promise
// continuations of one (useAgent's `await agentx.request("message_send_request")`, which opens
// the reply) run before the next message is handled. Node's `ws` instead emits every message of
// one socket read in a row, in the same tick (its allowSynchronousEvents, default true), which a
// browser never does. The same socket, paced as a browser paces it: one message per task, in order.
const { WebSocket } = createRequire(new URL(bundlePath))("ws");
const emit = WebSocket.prototype.emit;
WebSocket.prototype.emit = function (name, ...args) {
  if (name !== "message") return emit.call(this, name, ...args);
  setImmediate(() => emit.call(this, name, ...args));
  return true;
};
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));

function generateId(prefix) {
  return `${prefix}_${Date.now()}_${Math.random().toString(36).substring(2, 9)}`;
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

// useAgent(agentx, imageId) without React: state + dispatch around the real reducer.
class HeadlessUseAgent {
  constructor(agentx, imageId) {
    this.agentx = agentx;
    this.imageId = imageId;
    this.state = initialConversationState;
    this.events = []; // every pushed event for this image, in arrival order (the raw stream)
    const dispatch = (action) => {
      this.state = conversationReducer(this.state, action);
    };
    this.dispatch = dispatch;
    const isForThisImage = (event) => event.context?.imageId === imageId;
    const on = (type, handler) =>
      agentx.on(type, (event) => {
        if (!isForThisImage(event)) return;
        handler(event);
      });
    agentx.on("*", (event) => {
      if (isForThisImage(event)) this.events.push({ type: event.type, data: event.data });
    });
    // --- as useAgent @ v1.9.0 subscribes ---
    on("message_start", (event) =>
      dispatch({ type: "ASSISTANT_CONVERSATION_MESSAGE_START", messageId: event.data.messageId })
    );
    on("text_delta", (event) => dispatch({ type: "TEXT_BLOCK_DELTA", text: event.data.text }));
    on("conversation_start", () => {
      dispatch({ type: "AGENT_STATUS", status: "thinking" });
      dispatch({ type: "ASSISTANT_CONVERSATION_STATUS", status: "processing" });
    });
    on("conversation_thinking", () => {
      dispatch({ type: "AGENT_STATUS", status: "thinking" });
      dispatch({ type: "ASSISTANT_CONVERSATION_STATUS", status: "thinking" });
    });
    on("conversation_responding", () => {
      dispatch({ type: "AGENT_STATUS", status: "responding" });
      dispatch({ type: "ASSISTANT_CONVERSATION_STATUS", status: "streaming" });
    });
    on("conversation_end", () => {
      dispatch({ type: "ASSISTANT_CONVERSATION_FINISH" });
      dispatch({ type: "AGENT_STATUS", status: "idle" });
    });
    on("tool_executing", () => dispatch({ type: "AGENT_STATUS", status: "planning_tool" }));
    on("tool_use_start", (event) =>
      dispatch({ type: "TOOL_BLOCK_PLANNING", toolCallId: event.data.toolCallId, toolName: event.data.toolName })
    );
    on("assistant_message", () => dispatch({ type: "TEXT_BLOCK_FINISH" }));
    on("tool_call_message", (event) => dispatch({ type: "TOOL_BLOCK_ADD", message: event.data }));
    on("tool_result_message", (event) => dispatch({ type: "TOOL_BLOCK_RESULT", message: event.data }));
    on("error_message", (event) => dispatch({ type: "ERROR_CONVERSATION_ADD", message: event.data }));
    on("error_occurred", (event) => {
      dispatch({ type: "ERROR_ADD", error: event.data });
      dispatch({ type: "AGENT_STATUS", status: "error" });
      dispatch({ type: "USER_CONVERSATION_STATUS", status: "error", errorCode: event.data.code });
    });
  }

  // useAgent's send, step for step; returns the id of the assistant conversation it started
  async send(content) {
    this.dispatch({ type: "ERRORS_CLEAR" });
    const userConversation = { type: "user", id: generateId("user"), content, timestamp: Date.now(), status: "pending" };
    this.dispatch({ type: "USER_CONVERSATION_ADD", conversation: userConversation });
    await this.agentx.request("message_send_request", { imageId: this.imageId, content });
    this.events.push({ type: "message_send_response" }); // when the UI saw it, among the stream
    this.dispatch({ type: "USER_CONVERSATION_STATUS", status: "success" });
    const assistantConversationId = generateId("assistant");
    this.dispatch({ type: "ASSISTANT_CONVERSATION_START", id: assistantConversationId });
    return assistantConversationId;
  }

  // useAgent's interrupt
  interrupt() {
    this.dispatch({ type: "USER_CONVERSATION_STATUS", status: "interrupted" });
    return this.agentx
      .request("agent_interrupt_request", { imageId: this.imageId })
      .then(() => this.events.push({ type: "agent_interrupt_response" }));
  }

  // what the UI shows for one assistant conversation: its text blocks, the streaming one live
  rendered(conversationId) {
    const conv = this.state.conversations.find((c) => c.id === conversationId);
    if (!conv) return null;
    return conv.blocks
      .filter((b) => b.type === "text")
      .map((b) => (b.id === this.state.currentTextBlockId ? this.state.streamingText : b.content))
      .join("");
  }

  conversationEnds() {
    return this.events.filter((e) => e.type === "conversation_end").length;
  }
}

async function connect() {
  return createRemoteAgentX({
    serverUrl: scenario.url,
    headers: { Authorization: `Bearer ${scenario.token}` },
  });
}

async function storedAssistantTexts(agentx, imageId) {
  const response = await agentx.request("image_messages_request", { imageId });
  return response.data.messages
    .filter((m) => m.subtype === "assistant")
    .map((m) => (typeof m.content === "string" ? m.content : m.content.filter((p) => p.type === "text").map((p) => p.text).join("")));
}

const first = await connect();
const created = await first.request("image_create_request", {
  containerId: scenario.containerId,
  config: { name: "ui-order", ...(scenario.model ? { model: scenario.model } : {}) },
});
const imageId = created.data.record.imageId;
const sessionId = created.data.record.sessionId;
const clients = [first];
for (let i = 1; i < scenario.clients; i++) {
  const other = await connect();
  await other.request("image_list_request", { containerId: scenario.containerId }); // subscribes (__subscriptions)
  clients.push(other);
}
const uis = clients.map((agentx) => new HeadlessUseAgent(agentx, imageId));
const result = { imageId, sessionId, replies: [], streams: [] };

if (scenario.name === "order") {
  for (let turn = 0; turn < scenario.messages.length; turn++) {
    const ui = uis[turn % uis.length]; // the clients take turns to send
    const conversationId = await ui.send(scenario.messages[turn]);
    await waitFor(() => uis.every((u) => u.conversationEnds() === turn + 1), `the end of turn ${turn + 1}`);
    result.replies.push({ sender: turn % uis.length, rendered: ui.rendered(conversationId) });
  }
} else if (scenario.name === "interrupt") {
  const ui = uis[0];
  const conversationId = await ui.send(scenario.messages[0]);
  const rendered = () => (ui.rendered(conversationId) || "").length;
  // one more client subscribes mid-reply (a tab opened while the agent answers)
  await waitFor(() => rendered() >= scenario.interruptAfterChars / 2, "text before a client joins");
  const late = await connect();
  await late.request("image_list_request", { containerId: scenario.containerId });
  clients.push(late);
  uis.push(new HeadlessUseAgent(late, imageId));
  await waitFor(() => rendered() >= scenario.interruptAfterChars, "text to interrupt");
  await ui.interrupt();
  await waitFor(() => uis.every((u) => u.conversationEnds() === 1), "the interrupted turn's end");
  result.replies.push({ sender: 0, rendered: ui.rendered(conversationId) });
} else {
  throw new Error(`unknown scenario ${scenario.name}`);
}

result.stored = await storedAssistantTexts(first, imageId);
result.streams = uis.map((u) => u.events);
writeFileSync(scenario.output, JSON.stringify(result));
for (const agentx of clients) await agentx.dispose();
process.exit(0);
