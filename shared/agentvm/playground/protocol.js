// The AgentX v1 WebSocket client of the playground (docs/protocol.md), with no dependencies.
//
// One Connection: requests answered by promises (`request("image_list", {...})`), pushed events
// to `onEvent`, and the protocol's resume contract: it keeps the highest `seq` seen per session,
// drops any frame at or below it, and when the socket drops (not when `close()` is called) it
// reconnects, sends its `auth` frame again and subscribes the sessions it follows with
// `afterSeq` = that seq, so the turn goes on where the page left it.
//
// The key travels in the `auth` frame, never in the URL (URLs end up in logs and history).
//
// It asks for batched frames (`?frames=batch` on the URL, docs/protocol.md "Batched frames"): a
// message may then be a JSON array of frames, each handled in order exactly like a single frame.
// Fewer messages: fewer billed WebSocket messages on AWS. Text streams live (every 250 ms) unless
// the economy cadence is chosen (`cadence: "economy"`: `?cadence=economy`, text every 2 s).

// The WebSocket URL with `frames=batch` in its query (unless the URL sets `frames` itself), and
// `cadence` if one is given ("live" or "economy"; none: the image's or tenant's, live by default).
export function withBatchedFrames(url, cadence = "") {
  const parsed = new URL(url);
  if (!parsed.searchParams.has("frames")) parsed.searchParams.set("frames", "batch");
  if (cadence && !parsed.searchParams.has("cadence")) parsed.searchParams.set("cadence", cadence);
  return parsed.toString();
}

export class RequestError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

const RETRY_MS = [250, 500, 1000, 2000, 5000];

export class Connection {
  constructor({ url, key, cadence = "", lastSeqs = {}, onEvent = () => {}, onStatus = () => {}, onSeq = () => {} }) {
    this.url = url;
    this.cadence = cadence;
    this.key = key;
    this.lastSeqs = { ...lastSeqs }; // sessionId -> highest seq received
    this.followed = new Set(); // sessions to subscribe again after a reconnect
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onSeq = onSeq;
    this.pending = new Map(); // requestId -> {resolve, reject}
    this.nextId = 0;
    this.closed = false;
    this.retries = 0;
    this.socket = null;
  }

  // Opens the socket and authenticates; resolves once frames can be sent.
  open() {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(withBatchedFrames(this.url, this.cadence));
      this.socket = socket;
      socket.onopen = () => {
        if (this.key) this.sendFrame({ type: "auth", headers: { Authorization: `Bearer ${this.key}` } });
        resolve();
      };
      socket.onmessage = (message) => this.receive(message.data);
      socket.onclose = (event) => {
        reject(new RequestError("disconnected", `could not connect to ${this.url} (close code ${event.code})`));
        this.dropped(socket, event);
      };
    });
  }

  close() {
    this.closed = true;
    if (this.socket) this.socket.close(1000, "signed out");
  }

  sendFrame(frame) {
    this.socket.send(JSON.stringify(frame));
  }

  // Sends `<name>_request` and resolves with the response's data, or rejects with its code.
  request(name, data = {}) {
    const requestId = `play_${Date.now().toString(36)}_${this.nextId++}`;
    return new Promise((resolve, reject) => {
      if (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
        reject(new RequestError("disconnected", "not connected; reconnecting"));
        return;
      }
      this.pending.set(requestId, { resolve, reject });
      this.sendFrame({
        type: `${name}_request`,
        data: { requestId, ...data },
        source: "command",
        category: "request",
        intent: "request",
        timestamp: Date.now(),
      });
    });
  }

  // Follows a session: its frames reach onEvent, now and after every reconnect.
  follow(sessionId) {
    this.followed.add(sessionId);
    this.subscribe(sessionId);
  }

  subscribe(sessionId) {
    const frame = { type: "subscribe", sessionId };
    if (this.lastSeqs[sessionId] !== undefined) frame.afterSeq = this.lastSeqs[sessionId];
    this.sendFrame(frame);
  }

  receive(raw) {
    let decoded;
    try {
      decoded = JSON.parse(raw);
    } catch {
      return; // the server sends JSON only
    }
    // a batched message is an array of frames, in order
    for (const frame of Array.isArray(decoded) ? decoded : [decoded]) {
      if (frame && typeof frame === "object") this.receiveFrame(frame);
    }
  }

  receiveFrame(frame) {
    const data = frame.data || {};
    if (frame.type && frame.type.endsWith("_response") && this.pending.has(data.requestId)) {
      const { resolve, reject } = this.pending.get(data.requestId);
      this.pending.delete(data.requestId);
      if (data.error) reject(new RequestError(data.code || "error", data.error));
      else resolve(data);
      return;
    }
    // A failed request's system_error comes just before its response, which says the same.
    if (frame.type === "system_error" && this.pending.has(data.requestId)) return;
    if (typeof frame.seq === "number") {
      const sessionId = frame.context && frame.context.sessionId;
      if (sessionId) {
        if (frame.seq <= (this.lastSeqs[sessionId] ?? -1)) return; // seen already: the contract
        this.lastSeqs[sessionId] = frame.seq;
        this.onSeq(sessionId, frame.seq);
      }
    }
    this.onEvent(frame);
  }

  dropped(socket, event) {
    if (socket !== this.socket) return;
    for (const { reject } of this.pending.values()) {
      reject(new RequestError("disconnected", "the connection dropped"));
    }
    this.pending.clear();
    if (this.closed) return;
    const wait = RETRY_MS[Math.min(this.retries++, RETRY_MS.length - 1)];
    this.onStatus("reconnecting", `Connection lost (code ${event.code}); reconnecting…`);
    setTimeout(() => this.reconnect(), wait);
  }

  async reconnect() {
    if (this.closed) return;
    try {
      await this.open();
    } catch {
      return; // onclose has scheduled the next attempt
    }
    this.retries = 0;
    for (const sessionId of this.followed) this.subscribe(sessionId);
    const seqs = [...this.followed].map((s) => this.lastSeqs[s]).filter((s) => s !== undefined);
    const after = seqs.length ? ` after seq ${Math.max(...seqs)}` : "";
    this.onStatus("connected", `Reconnected; resumed${after}`);
  }
}
