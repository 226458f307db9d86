// The official Anthropic TypeScript SDK (@anthropic-ai/sdk, pinned in package.json) against AgentVM's
// Managed Agents API, used as an application uses it: agent → environment → session, the events
// stream opened before a user.message is sent, read up to session.status_idle; the same with
// event_deltas previews; events.list (pages, the SDK's auto-paging, a types filter); the session's
// status and usage; a custom tool's round trip (agent.custom_tool_use, then user.custom_tool_result
// sent while the stream is open); and the SDK's own error classes for a wrong key, an unknown
// session, another tenant's session, a bad event, a second answer and a route AgentVM does not
// serve (also with the SDK's default retries, counting its requests). Run by
// tests/integration/test_anthropic_ts_sdk.py from the directory npm ci installed the SDK into
// (tests/integration/anthropic_ts_sdk.py). It prints one JSON summary on stdout, which the test
// asserts on; on a failure, {"error", "step"} and exit code 1.
//
// Input (environment): AVM_URL (the server's base URL), AVM_KEY (an AgentVM key), AVM_RIVAL_KEY
// (a key of another tenant), AVM_MODEL (the agent's model, e.g. echo/echo-1).
import Anthropic, {
  APIError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  InternalServerError,
  NotFoundError,
} from "@anthropic-ai/sdk";
import { VERSION } from "@anthropic-ai/sdk/version";

const { AVM_URL, AVM_KEY, AVM_RIVAL_KEY, AVM_MODEL } = process.env;
const STREAM_WAIT_MS = 60_000;

const client = (apiKey) =>
  new Anthropic({ baseURL: `${AVM_URL}/anthropic`, apiKey, maxRetries: 0, timeout: 30_000 });

let step = "start";
const summary = { sdkVersion: VERSION };

function brief(event) {
  const out = { type: event.type, id: event.id ?? null };
  if (event.type === "agent.message" || event.type === "user.message") {
    out.text = event.content.map((block) => block.text ?? "").join("");
  }
  if (event.type === "session.status_idle") {
    out.stopReason = event.stop_reason?.type ?? null;
    out.waitingFor = event.stop_reason?.event_ids ?? null;
  }
  if (event.type === "span.model_request_end") out.outputTokens = event.model_usage?.output_tokens ?? null;
  if (event.type === "agent.custom_tool_use") Object.assign(out, { name: event.name, input: event.input });
  if (event.type === "user.custom_tool_result") {
    out.useId = event.custom_tool_use_id;
    out.text = event.content.map((block) => block.text ?? "").join("");
  }
  if (event.type === "event_start") out.eventId = event.event?.id ?? null;
  if (event.type === "event_delta") {
    out.eventId = event.event_id;
    out.text = event.delta?.content?.text ?? "";
  }
  return out;
}

/** Send `text` while a stream (opened first, with `query`) is read up to session.status_idle. */
async function turn(sdk, sessionId, text, query = {}) {
  const stream = await sdk.beta.sessions.events.stream(sessionId, query);
  const guard = setTimeout(() => stream.controller.abort(), STREAM_WAIT_MS);
  const sent = await sdk.beta.sessions.events.send(sessionId, {
    events: [{ type: "user.message", content: [{ type: "text", text }] }],
  });
  const seen = [];
  try {
    for await (const event of stream) {
      seen.push(brief(event));
      if (event.type === "session.status_idle") break; // the SDK aborts the request on break
    }
  } finally {
    clearTimeout(guard);
  }
  return { sent: sent.data.map(brief), streamed: seen };
}

/** An agent with a custom tool: the echo model's `/tool` command calls it, the turn waits
 * (session.status_idle, requires_action), the result is sent back on the open stream. */
async function customToolRoundTrip(sdk, environmentId) {
  const agent = await sdk.beta.agents.create({
    name: "Tools",
    model: AVM_MODEL,
    tools: [
      {
        type: "custom",
        name: "lookup",
        description: "Look an order up",
        input_schema: { type: "object", properties: { order: { type: "string" } } },
      },
    ],
  });
  const session = await sdk.beta.sessions.create({ agent: agent.id, environment_id: environmentId });
  const stream = await sdk.beta.sessions.events.stream(session.id);
  const guard = setTimeout(() => stream.controller.abort(), STREAM_WAIT_MS);
  await sdk.beta.sessions.events.send(session.id, {
    events: [{ type: "user.message", content: [{ type: "text", text: '/tool lookup {"order": "42"}' }] }],
  });
  const seen = [];
  let useId = null;
  let statusWhileWaiting = null;
  try {
    for await (const event of stream) {
      seen.push(brief(event));
      if (event.type === "agent.custom_tool_use") useId = event.id;
      if (event.type !== "session.status_idle") continue;
      if (event.stop_reason?.type !== "requires_action") break;
      statusWhileWaiting = (await sdk.beta.sessions.retrieve(session.id)).status;
      await sdk.beta.sessions.events.send(session.id, {
        events: [
          { type: "user.custom_tool_result", custom_tool_use_id: useId, content: [{ type: "text", text: "shipped" }] },
        ],
      });
    }
  } finally {
    clearTimeout(guard);
  }
  return { sessionId: session.id, useId, statusWhileWaiting, streamed: seen };
}

/** What the SDK raised for `call`: its class (by the SDK's own exports), status and error type. */
async function raised(call) {
  try {
    await call();
  } catch (error) {
    return {
      name: error.constructor.name,
      isAPIError: error instanceof APIError,
      isAuthenticationError: error instanceof AuthenticationError,
      isNotFoundError: error instanceof NotFoundError,
      isBadRequestError: error instanceof BadRequestError,
      isConflictError: error instanceof ConflictError,
      isInternalServerError: error instanceof InternalServerError,
      status: error.status ?? null,
      errorType: error.error?.error?.type ?? null,
      message: error.error?.error?.message ?? null,
    };
  }
  return { name: null };
}

try {
  const sdk = client(AVM_KEY);

  step = "agents.create";
  const agent = await sdk.beta.agents.create({ name: "Helper", model: AVM_MODEL, system: "Be brief." });
  summary.agent = { id: agent.id, type: agent.type, version: agent.version, model: agent.model };

  step = "environments.create";
  const environment = await sdk.beta.environments.create({ name: "dev" });
  summary.environment = { id: environment.id, type: environment.type };

  step = "sessions.create";
  const session = await sdk.beta.sessions.create({
    agent: agent.id,
    environment_id: environment.id,
    title: "from TypeScript",
  });
  summary.session = {
    id: session.id,
    status: session.status,
    agentId: session.agent.id,
    environmentId: session.environment_id,
    title: session.title,
  };

  step = "events.stream + events.send";
  summary.turn = await turn(sdk, session.id, "hello from TypeScript");

  step = "events.stream with event_deltas";
  summary.deltaTurn = await turn(sdk, session.id, "one two three", { event_deltas: ["agent.message"] });

  step = "events.list";
  const listed = await sdk.beta.sessions.events.list(session.id);
  summary.listed = { events: listed.data.map(brief), nextPage: listed.next_page };

  step = "events.list paged";
  const firstPage = await sdk.beta.sessions.events.list(session.id, { limit: 2 });
  const autoPaged = [];
  for await (const event of sdk.beta.sessions.events.list(session.id, { limit: 2 })) autoPaged.push(event.id);
  summary.paged = {
    firstPageIds: firstPage.data.map((e) => e.id),
    hasNextPage: firstPage.hasNextPage(),
    autoPagedIds: autoPaged,
  };

  step = "events.list types";
  const typed = await sdk.beta.sessions.events.list(session.id, { types: ["agent.message"], order: "desc" });
  summary.typed = typed.data.map(brief);

  step = "sessions.retrieve";
  const retrieved = await sdk.beta.sessions.retrieve(session.id);
  summary.retrieved = {
    id: retrieved.id,
    status: retrieved.status,
    inputTokens: retrieved.usage?.input_tokens ?? null,
    outputTokens: retrieved.usage?.output_tokens ?? null,
  };

  step = "sessions.list";
  const sessionIds = [];
  for await (const listedSession of sdk.beta.sessions.list({ agent_id: agent.id, limit: 1 })) {
    sessionIds.push(listedSession.id);
  }
  summary.sessionsListed = sessionIds;

  step = "custom tool round trip";
  summary.customTool = await customToolRoundTrip(sdk, environment.id);

  step = "errors";
  summary.errors = {
    wrongKey: await raised(() => client("avm_not-a-key").beta.sessions.retrieve(session.id)),
    unknownSession: await raised(() => sdk.beta.sessions.retrieve("sesn_does_not_exist")),
    unknownSessionEvents: await raised(() => sdk.beta.sessions.events.list("sesn_does_not_exist")),
    rivalSession: await raised(() => client(AVM_RIVAL_KEY).beta.sessions.retrieve(session.id)),
    emptyMessage: await raised(() =>
      sdk.beta.sessions.events.send(session.id, { events: [{ type: "user.message", content: [] }] }),
    ),
    secondAnswer: await raised(() =>
      sdk.beta.sessions.events.send(summary.customTool.sessionId, {
        events: [{ type: "user.custom_tool_result", custom_tool_use_id: summary.customTool.useId, content: [] }],
      }),
    ),
    notServed: await raised(() => sdk.beta.vaults.list()),
  };
  // with the SDK's default retries (2): fetch counted, to see whether it retried the 501
  let fetches = 0;
  const retrying = new Anthropic({
    baseURL: `${AVM_URL}/anthropic`,
    apiKey: AVM_KEY,
    fetch: (...args) => {
      fetches += 1;
      return fetch(...args);
    },
  });
  summary.notServedWithRetries = {
    ...(await raised(() => retrying.beta.vaults.list())),
    maxRetries: retrying.maxRetries,
    requests: fetches,
  };

  step = "done";
  process.stdout.write(`${JSON.stringify(summary)}\n`);
} catch (error) {
  process.stdout.write(`${JSON.stringify({ error: String(error?.stack ?? error), step, summary })}\n`);
  process.exitCode = 1;
}
