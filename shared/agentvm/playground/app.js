// The playground page: sign in, containers and images, chat, approvals, MCP servers' questions, interrupt, usage.
//
// It uses the public APIs only: the AgentX v1 WebSocket (protocol.js) and, for agent resources
// and billed usage, the HTTP API with the same key. The key is kept in sessionStorage, so a
// reload stays signed in and a closed tab forgets it (docs/playground.md says why).

import { Connection, RequestError } from "./protocol.js";
import { Transcript } from "./view.js";

const $ = (id) => document.getElementById(id);
const saved = {
  get: (name) => sessionStorage.getItem(`agentvm.${name}`),
  set: (name, value) => sessionStorage.setItem(`agentvm.${name}`, value),
};

let conn = null;
let key = "";
let httpBase = "";
let image = null; // the open image's record
let reconcile = false; // re-read the history when the next turn ends (the page resumed mid-turn)
let replyUsage = { turns: 0, input: 0, output: 0 }; // from assistant messages, when /v1/usage is refused
let usageRefused = ""; // why /v1/usage refused this key (a client key): not asked again

const transcript = new Transcript($("transcript"), {
  onAnswer: (turnId, toolCallId, approved) =>
    conn.request("tool_approval", approved ? { turnId, toolCallId, approved } : { turnId, toolCallId, approved, reason: "denied in the playground" }),
  onElicit: (elicitationId, action, content) =>
    conn.request("elicitation_answer", content === undefined ? { elicitationId, action } : { elicitationId, action, content }),
});

function status(text, state) {
  $("status").textContent = text;
  $("status").dataset.state = state;
}

function setRunning(running) {
  $("stop").disabled = !running;
}

async function api(path) {
  const response = await fetch(`${httpBase}${path}`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new RequestError(body.error?.code || `http_${response.status}`, body.error?.message || response.statusText);
  return body;
}

// -- signing in -----------------------------------------------------------------------------------
async function defaults() {
  let config = {};
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    if (response.ok) config = await response.json();
  } catch {
    // no config.json: both APIs are this page's origin
  }
  const origin = location.origin.startsWith("http") ? location.origin : "";
  return {
    wsUrl: config.wsUrl || (origin && `${origin.replace(/^http/, "ws")}/ws`),
    httpUrl: config.httpUrl || origin,
  };
}

function saveSeq(sessionId, seq) {
  const seqs = JSON.parse(saved.get("seqs") || "{}");
  seqs[sessionId] = seq;
  saved.set("seqs", JSON.stringify(seqs));
}

async function signIn({ key: candidate, wsUrl, httpUrl, economy = false }) {
  $("sign-in-error").textContent = "";
  status("Connecting…", "connecting");
  const next = new Connection({
    url: wsUrl,
    key: candidate,
    cadence: economy ? "economy" : "",
    lastSeqs: JSON.parse(saved.get("seqs") || "{}"),
    onEvent,
    onSeq: saveSeq,
    onStatus: (state, text) => {
      status(text, state);
      if (state === "connected" && image) refreshWaits();
    },
  });
  let containerIds;
  try {
    await next.open();
    ({ containerIds } = await next.request("container_list"));
  } catch (error) {
    next.close();
    status("Signed out", "signed-out");
    $("sign-in-error").textContent =
      error.code === "unauthorized" ? "The server refused this key (unauthorized)." : `Could not sign in: ${error.message}`;
    return;
  }
  conn = next;
  key = candidate;
  httpBase = httpUrl.replace(/\/+$/, "");
  saved.set("key", key);
  saved.set("wsUrl", wsUrl);
  saved.set("httpUrl", httpUrl);
  saved.set("economy", economy ? "1" : "");
  $("sign-in").hidden = true;
  $("workspace").hidden = false;
  $("sign-out").hidden = false;
  status("Connected", "connected");
  loadAgents();
  fillContainers(containerIds, saved.get("container"));
  if (containerIds.length) await openContainer($("container").value);
  else {
    $("new-container").value = "playground";
    transcript.note("No container yet: create one (left).");
  }
}

function signOut() {
  if (conn) conn.close();
  conn = null;
  image = null;
  sessionStorage.clear();
  location.reload();
}

// -- containers and images ------------------------------------------------------------------------
function fill(select, options, selected) {
  select.replaceChildren(
    ...options.map(({ value, label }) => {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = label;
      return option;
    }),
  );
  if (options.some((o) => o.value === selected)) select.value = selected;
}

function fillContainers(ids, selected) {
  fill($("container"), ids.map((id) => ({ value: id, label: id })), selected);
}

async function loadAgents() {
  const select = $("image-agent");
  try {
    const { resources } = await api("/v1/resources?kind=agent&limit=100");
    for (const r of resources) {
      const option = document.createElement("option");
      option.value = `${r.uri}@${r.latest}`; // pinned to the version listed now
      option.dataset.name = r.name;
      option.textContent = `${r.name}@${r.latest}${r.description ? `: ${r.description}` : ""}`;
      select.append(option);
    }
  } catch (error) {
    select.title = `Agent resources could not be listed: ${error.message}`;
  }
}

async function openContainer(containerId) {
  saved.set("container", containerId);
  const { records } = await conn.request("image_list", { containerId });
  fill($("image"), records.map((r) => ({ value: r.imageId, label: `${r.name} (${r.imageId})` })), saved.get("image"));
  const chosen = records.find((r) => r.imageId === $("image").value);
  if (chosen) await openImage(chosen);
  else {
    image = null;
    transcript.clear();
    transcript.note("No image in this container yet: create one (left).");
    $("new-image").open = true;
    showUsage(replyUsage = { turns: 0, input: 0, output: 0 }, "");
  }
}

async function openImage(record) {
  image = record;
  saved.set("image", record.imageId);
  $("image").value = record.imageId;
  const { messages } = await conn.request("image_messages", { imageId: record.imageId });
  if (image !== record) return; // another image was opened meanwhile
  transcript.history(messages);
  replyUsage = { turns: 0, input: 0, output: 0 };
  for (const m of messages) if (m.subtype === "assistant" && m.usage) addReplyUsage(m.usage);
  reconcile = conn.lastSeqs[record.sessionId] !== undefined; // the resume may replay what history shows
  conn.follow(record.sessionId);
  setRunning(false);
  await refreshWaits();
  refreshUsage();
}

// Tool calls waiting for an approval (after a reload, or a reconnect while the turn was suspended).
async function refreshWaits() {
  const { waits } = await conn.request("tool_waits", { imageId: image.imageId });
  for (const wait of waits) if (wait.kind === "approval" && wait.status === "pending") transcript.approval(wait);
  if (waits.length) setRunning(true); // a suspended turn: Stop cancels it
}

// -- the turn -------------------------------------------------------------------------------------
function onEvent(frame) {
  const d = frame.data || {};
  if (frame.type === "system_error") {
    status(`Error: ${d.message}`, "error");
    return;
  }
  const context = frame.context || {};
  if (!image || (context.imageId && context.imageId !== image.imageId)) return; // another image's session
  transcript.event(frame);
  if (frame.type === "message_start") setRunning(true);
  if (frame.type === "turn_suspended") status("The turn waits for your answer", "waiting");
  if (frame.type === "assistant_message" && d.usage) addReplyUsage(d.usage);
  if (frame.type === "conversation_end" || frame.type === "error_occurred") {
    setRunning(false);
    status("Connected", "connected");
    refreshUsage();
    if (reconcile) {
      reconcile = false;
      openImage(image);
    }
  }
}

async function send(text) {
  transcript.user(text);
  transcript.following = true; // a sent message follows its turn
  transcript.waiting();
  setRunning(true);
  try {
    await conn.request("message_send", { imageId: image.imageId, content: text });
  } catch (error) {
    transcript.stopWaiting();
    transcript.note(`Not sent (${error.code}): ${error.message}`, "error");
    setRunning(false);
  }
}

// -- usage ----------------------------------------------------------------------------------------
function addReplyUsage(usage) {
  replyUsage.turns += 1;
  replyUsage.input += usage.inputTokens || 0;
  replyUsage.output += usage.outputTokens || 0;
}

function showUsage({ turns, input, output }, source) {
  $("usage-turns").textContent = String(turns);
  $("usage-input").textContent = String(input);
  $("usage-output").textContent = String(output);
  $("usage-total").textContent = String(input + output);
  $("usage-source").textContent = source;
}

async function refreshUsage() {
  if (!image) return;
  const shown = image;
  if (usageRefused) {
    showUsage(replyUsage, `From the replies (${usageRefused}).`);
    return;
  }
  try {
    const { records } = await api(`/v1/usage?containerId=${encodeURIComponent(image.containerId)}`);
    const mine = records.filter((r) => r.sessionId === shown.sessionId);
    const sum = (field) => mine.reduce((total, r) => total + r[field], 0);
    if (image === shown) {
      showUsage(
        { turns: mine.filter((r) => r.kind === "turn").length, input: sum("inputTokens"), output: sum("outputTokens") },
        "Billed: every model call of this session (GET /v1/usage).",
      );
    }
  } catch (error) {
    const why = error.code === "forbidden" ? "GET /v1/usage needs an admin key" : error.message;
    if (error.code === "forbidden") usageRefused = why;
    if (image === shown) showUsage(replyUsage, `From the replies (${why}).`);
  }
}

// -- wiring ---------------------------------------------------------------------------------------
function imageConfig() {
  const config = { name: $("image-name").value.trim() || "Playground" };
  const agent = $("image-agent").value;
  if (agent) return { ...config, agent };
  const prompt = $("image-prompt").value.trim();
  if (prompt) config.systemPrompt = prompt;
  const tools = [...document.querySelectorAll('input[name="tool"]:checked')].map((box) =>
    box.value === "sandbox" ? { type: "sandbox" } : { type: "builtin", name: box.value },
  );
  if (tools.length) config.tools = tools;
  if ($("image-approval").checked) config.approval = { tools: "*" };
  return config;
}

function guard(action) {
  return async (event) => {
    event.preventDefault();
    try {
      await action(event);
    } catch (error) {
      status(`Error (${error.code || "error"}): ${error.message}`, "error");
    }
  };
}

$("sign-in-form").addEventListener(
  "submit",
  guard(() =>
    signIn({
      key: $("key").value.trim(),
      wsUrl: $("ws-url").value.trim(),
      httpUrl: $("http-url").value.trim(),
      economy: $("economy").checked,
    }),
  ),
);
$("sign-out").addEventListener("click", signOut);
$("container").addEventListener("change", guard(() => openContainer($("container").value)));
$("container-form").addEventListener(
  "submit",
  guard(async () => {
    const { containerId } = await conn.request("container_create", { containerId: $("new-container").value.trim() });
    const { containerIds } = await conn.request("container_list");
    fillContainers(containerIds, containerId);
    $("new-container").value = "";
    await openContainer(containerId);
  }),
);
$("image").addEventListener(
  "change",
  guard(async () => {
    const { record } = await conn.request("image_get", { imageId: $("image").value });
    if (record) await openImage(record);
  }),
);
$("image-agent").addEventListener("change", () => {
  const picked = $("image-agent").selectedOptions[0];
  $("image-inline").disabled = Boolean(picked.value); // an agent brings its own prompt and tools
  $("image-name").value = picked.value ? picked.dataset.name : "Playground";
});
$("image-form").addEventListener(
  "submit",
  guard(async () => {
    const { record } = await conn.request("image_create", { containerId: $("container").value, config: imageConfig() });
    saved.set("image", record.imageId);
    $("new-image").open = false;
    await openContainer(record.containerId);
  }),
);
$("send-form").addEventListener(
  "submit",
  guard(async () => {
    const text = $("message").value;
    if (!text.trim() || !image) return;
    $("message").value = "";
    await send(text);
  }),
);
$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault(); // Enter sends, Shift+Enter is a new line
    $("send-form").requestSubmit();
  }
});
$("stop").addEventListener(
  "click",
  guard(() => conn.request("agent_interrupt", { imageId: image.imageId })),
);

// For debugging from the console (and the browser test): the live connection.
window.agentvmPlayground = { get connection() { return conn; } };

(async () => {
  const fallback = await defaults();
  $("ws-url").value = saved.get("wsUrl") || fallback.wsUrl;
  $("http-url").value = saved.get("httpUrl") || fallback.httpUrl;
  if (saved.get("economy") !== null) $("economy").checked = saved.get("economy") === "1";
  if (saved.get("key") !== null) {
    $("key").value = "";
    await signIn({ key: saved.get("key"), wsUrl: $("ws-url").value, httpUrl: $("http-url").value, economy: $("economy").checked });
  }
})();
