// The transcript: stored messages (history) and live turn events rendered into one list.
//
// Everything from the server or the model is set with textContent, never as HTML, except an
// assistant reply's text: Markdown, parsed by marked and sanitised by DOMPurify (both vendored in
// the package, versions in docs/playground.md), so a <script> or an onerror= in a reply never
// runs (and the page's CSP allows no inline script either). A reply is streamed into its bubble
// by text_delta frames, then replaced by the assistant_message's full text (what was stored), so
// a page that resumed mid-turn still ends with the exact reply.
//
// The view follows the turn: while the user is at the bottom of the transcript, every change
// (streamed text, a tool card, the Approve/Deny buttons) keeps the latest in view; scrolling up
// stops following and shows "Jump to latest", which scrolls down and follows again.

import { marked } from "./marked.esm.js";
import DOMPurify from "./purify.es.js";

export function markdown(text) {
  const html = marked.parse(text || "", { async: false, gfm: true, breaks: true }).trimEnd();
  return DOMPurify.sanitize(html);
}

function setMarkdown(node, text) {
  node.dataset.raw = text;
  node.innerHTML = markdown(text);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Image types a tool result may show inline (the ones every provider takes, too).
const SHOWN_IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || [])
    .map((part) => (part.type === "text" ? part.text : part.type === "thinking" ? "" : `[${part.name || part.filename || part.type}]`))
    .join("");
}

function pretty(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

// The frames that show something of the turn: the first of them ends "Waiting for the model…".
const SHOWN = [
  "text_delta", "assistant_message", "tool_use_start", "tool_use_stop", "tool_result",
  "tool_approval_requested", "client_tool_requested", "tool_progress", "tool_elicitation", "interrupted",
  "conversation_end", "error_message", "error_occurred", "session_destroyed",
];

// A form field's choices: [value, label] from enum (with legacy enumNames) or oneOf/anyOf consts.
function choicesOf(prop) {
  if (Array.isArray(prop.enum)) return prop.enum.map((v, i) => [String(v), String((prop.enumNames || [])[i] ?? v)]);
  for (const key of ["oneOf", "anyOf"]) {
    if (Array.isArray(prop[key])) return prop[key].filter((c) => c && "const" in c).map((c) => [String(c.const), String(c.title ?? c.const)]);
  }
  return [];
}

// What the user typed, as the schema's types (the server checks the content against its schema).
function contentOf(fields) {
  const content = {};
  for (const [name, prop, input] of fields) {
    if (prop.type === "boolean") content[name] = input.checked;
    else if (input.value.trim() === "") continue;
    else if (prop.type === "integer" || prop.type === "number") content[name] = Number(input.value);
    else if (prop.type === "array") content[name] = input.value.split(",").map((v) => v.trim()).filter(Boolean);
    else content[name] = input.value;
  }
  return content;
}

export class Transcript {
  // onAnswer(turnId, toolCallId, approved): the user approved or denied a tool call.
  // onElicit(elicitationId, action, content): the user answered an MCP server's question.
  constructor(list, { onAnswer, onElicit }) {
    this.list = list;
    this.onAnswer = onAnswer;
    this.onElicit = onElicit;
    this.following = true;
    this.jump = el("button", "jump-latest", "↓ Jump to latest");
    this.jump.type = "button";
    this.jump.hidden = true;
    this.jump.addEventListener("click", () => {
      this.following = true;
      this.follow();
    });
    list.after(this.jump);
    list.addEventListener("scroll", () => {
      if (this.programmatic) return;
      this.following = this.atBottom();
      this.jump.hidden = this.following;
    });
    this.clear();
  }

  atBottom() {
    const l = this.list;
    return l.scrollHeight - l.scrollTop - l.clientHeight < 48;
  }

  // Keeps the latest in view while following; otherwise offers the jump.
  follow() {
    if (!this.following) {
      this.jump.hidden = false;
      return;
    }
    this.programmatic = true;
    this.list.scrollTop = this.list.scrollHeight;
    const last = this.list.lastElementChild;
    if (last) last.scrollIntoView({ block: "end" }); // the page too, when the list does not scroll
    this.jump.hidden = true;
    requestAnimationFrame(() => (this.programmatic = false));
  }

  // "Waiting for the model…" from a sent message until the turn's first frame.
  waiting() {
    this.stopWaiting();
    this.waitNote = this.note("Waiting for the model…", "note waiting");
  }

  // A failed model call waits to be made again (model_retry): the waiting line says so (made
  // again if the reply had started a step before), and goes with the retry's first frame shown.
  retrying(d) {
    const why = { rate_limited: "rate limited", overloaded: "overloaded" }[d.reason] || "unavailable";
    const seconds = d.delayMs >= 10000 ? Math.round(d.delayMs / 1000) : Math.round(d.delayMs / 100) / 10;
    if (!this.waitNote) this.waitNote = this.note("", "note waiting");
    this.waitNote.classList.add("retrying");
    this.waitNote.textContent = `Provider busy (${why}), retrying in ${seconds}s (attempt ${d.attempt})…`;
  }

  stopWaiting() {
    if (this.waitNote) this.waitNote.remove();
    this.waitNote = null;
  }

  clear() {
    this.list.replaceChildren();
    this.reply = null; // the assistant bubble being streamed
    this.waitNote = null;
    this.cards = new Map(); // toolCallId -> tool card
  }

  add(node) {
    if (this.waitNote && node !== this.waitNote) this.waitNote.before(node);
    else this.list.append(node);
    this.follow();
    return node;
  }

  user(text) {
    const item = el("li", "message user");
    item.append(el("span", "who", "You"), el("p", "text", text));
    return this.add(item);
  }

  assistant(text = "") {
    const item = el("li", "message assistant");
    const body = el("div", "text markdown");
    setMarkdown(body, text);
    item.append(el("span", "who", "Agent"), body);
    return this.add(item);
  }

  note(text, className = "note") {
    return this.add(el("li", `message ${className}`, text));
  }

  card(toolCallId, toolName) {
    let card = this.cards.get(toolCallId);
    if (!card) {
      card = el("li", "message tool");
      card.dataset.callId = toolCallId;
      card.append(el("span", "who", "Tool call"), el("strong", "tool-name", toolName || "?"), el("span", "tool-state", "calling…"));
      this.cards.set(toolCallId, card);
      this.add(card);
    }
    return card;
  }

  setPart(card, className, label, text) {
    let part = card.querySelector(`.${className}`);
    if (!part) {
      part = el("div", className);
      part.append(el("span", "label", label), el("pre"));
      card.append(part);
    }
    part.querySelector("pre").textContent = text;
  }

  toolInput(toolCallId, toolName, input) {
    this.setPart(this.card(toolCallId, toolName), "tool-input", "Input", pretty(input));
  }

  toolResult(toolCallId, toolName, result, isError, content) {
    const card = this.card(toolCallId, toolName);
    this.setPart(card, "tool-result", isError ? "Error" : "Result", pretty(result));
    const part = card.querySelector(".tool-result");
    for (const old of part.querySelectorAll("img.tool-image")) old.remove();
    for (const p of content || []) {
      // a rich result's images (an MCP tool's screenshot); only types a browser shows as images
      if (p.type !== "media" || !SHOWN_IMAGE_TYPES.includes(p.mediaType)) continue;
      const img = document.createElement("img");
      img.className = "tool-image";
      img.alt = p.filename || `image (${p.mediaType})`;
      img.src = `data:${p.mediaType};base64,${p.data}`;
      part.appendChild(img);
    }
    card.classList.toggle("failed", Boolean(isError));
    card.querySelector(".tool-state").textContent = isError ? "failed" : "done";
    const ask = card.querySelector(".approval");
    if (ask) ask.remove();
  }

  approval({ turnId, toolCallId, toolName, input }) {
    const card = this.card(toolCallId, toolName);
    if (input !== undefined) this.toolInput(toolCallId, toolName, input);
    card.querySelector(".tool-state").textContent = "waiting for your approval";
    if (card.querySelector(".approval")) return;
    const ask = el("div", "approval");
    const approve = el("button", "approve", "Approve");
    const deny = el("button", "deny", "Deny");
    for (const [button, approved] of [[approve, true], [deny, false]]) {
      button.type = "button";
      button.setAttribute("aria-label", `${approved ? "Approve" : "Deny"} ${toolName}`);
      button.addEventListener("click", async () => {
        approve.disabled = deny.disabled = true;
        try {
          await this.onAnswer(turnId, toolCallId, approved);
          card.querySelector(".tool-state").textContent = approved ? "approved" : "denied";
          ask.remove();
        } catch (error) {
          approve.disabled = deny.disabled = false;
          card.querySelector(".tool-state").textContent = `not answered: ${error.message}`;
        }
      });
    }
    ask.append(approve, deny);
    card.append(ask);
  }

  // An MCP server asks the user during a call (tool_elicitation): a form in the call's card, one
  // field per property of its schema (a URL question: the link), Submit / Decline / Cancel.
  question(d) {
    const card = this.card(d.toolId, d.toolName);
    card.querySelector(".tool-state").textContent = "asks you";
    if ([...card.querySelectorAll("form.question")].some((f) => f.dataset.id === d.elicitationId)) return;
    const form = el("form", "question");
    form.dataset.id = d.elicitationId;
    form.append(el("p", "question-message", d.message));
    const fields = [];
    if (d.mode === "url") {
      const link = el("a", "question-url", d.url);
      link.href = d.url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      form.append(link);
    } else {
      const schema = d.requestedSchema || {};
      const required = schema.required || [];
      for (const [name, prop] of Object.entries(schema.properties || {})) {
        const label = el("label", null, `${prop.title || name}${required.includes(name) ? " *" : ""} `);
        const choices = choicesOf(prop);
        let input;
        if (prop.type === "boolean") {
          input = el("input");
          input.type = "checkbox";
          input.checked = prop.default === true;
        } else if (choices.length && prop.type !== "array") {
          input = el("select");
          for (const [value, text] of choices) {
            const option = el("option", null, text);
            option.value = value;
            input.append(option);
          }
          if (prop.default !== undefined) input.value = String(prop.default);
        } else {
          input = el("input");
          input.type = prop.type === "integer" || prop.type === "number" ? "number" : "text";
          if (prop.type === "number") input.step = "any";
          if (prop.default !== undefined) input.value = Array.isArray(prop.default) ? prop.default.join(", ") : String(prop.default);
          const items = choicesOf(prop.items || {});
          if (prop.type === "array" && items.length) input.placeholder = items.map(([v]) => v).join(", ");
        }
        input.name = name;
        if (prop.description) input.title = prop.description;
        label.append(input);
        form.append(label);
        fields.push([name, prop, input]);
      }
    }
    const buttons = el("div", "approval");
    const submit = el("button", "approve", d.mode === "url" ? "Accept" : "Submit");
    const decline = el("button", "deny", "Decline");
    const cancel = el("button", "cancel", "Cancel");
    submit.type = "submit";
    decline.type = cancel.type = "button";
    const error = el("p", "question-error");
    buttons.append(submit, decline, cancel);
    form.append(buttons, error);
    const answer = async (action) => {
      const content = action === "accept" && d.mode !== "url" ? contentOf(fields) : undefined;
      for (const button of [submit, decline, cancel]) button.disabled = true;
      try {
        await this.onElicit(d.elicitationId, action, content);
        form.remove();
        card.querySelector(".tool-state").textContent = `answered: ${action}`;
      } catch (err) {
        for (const button of [submit, decline, cancel]) button.disabled = false;
        error.textContent = err.message; // e.g. content the server's schema refuses: fix and submit again
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      answer("accept");
    });
    decline.addEventListener("click", () => answer("decline"));
    cancel.addEventListener("click", () => answer("cancel"));
    card.append(form);
  }

  questionEnded(d) {
    const card = this.card(d.toolId, d.toolName);
    for (const form of card.querySelectorAll("form.question")) if (form.dataset.id === d.elicitationId) form.remove();
    if (d.reason !== "answered") card.querySelector(".tool-state").textContent = `question ${d.reason.replace("_", " ")}`;
  }

  // Stored messages, oldest first (image_messages_request).
  history(messages) {
    this.clear();
    for (const m of messages) {
      if (m.subtype === "user") this.user(textOf(m.content));
      else if (m.subtype === "assistant") this.assistant(textOf(m.content));
      else if (m.subtype === "tool-call") this.toolInput(m.toolCall.id, m.toolCall.name, m.toolCall.input);
      else if (m.subtype === "tool-result") {
        const out = m.toolResult.output || {};
        const failed = ["error-text", "error-json", "execution-denied"].includes(out.type);
        if (out.type === "content") {
          const text = out.value.map((p) => (p.type === "text" ? p.text : `[${p.mediaType}]`)).join("\n");
          this.toolResult(m.toolCallId, m.toolResult.name, text, failed, out.value);
        } else this.toolResult(m.toolCallId, m.toolResult.name, out.value, failed);
      } else if (m.subtype === "error") this.note(`Error (${m.errorCode || "error"}): ${m.content}`, "error");
    }
    this.following = true;
    this.follow();
  }

  // One live frame of the current session.
  event(frame) {
    if (this.waitNote && SHOWN.includes(frame.type)) this.stopWaiting();
    this.apply(frame);
    this.follow();
  }

  apply(frame) {
    const d = frame.data || {};
    switch (frame.type) {
      case "message_start":
        this.reply = null; // a reply starts with its first text
        break;
      case "text_delta":
        if (!this.reply) this.reply = this.assistant();
        this.reply.classList.add("streaming");
        {
          const body = this.reply.querySelector(".text");
          setMarkdown(body, (body.dataset.raw || "") + d.text);
        }
        break;
      case "assistant_message":
        if (!this.reply) this.reply = this.assistant();
        setMarkdown(this.reply.querySelector(".text"), textOf(d.content));
        this.reply.classList.remove("streaming");
        break;
      case "message_stop":
        if (this.reply) this.reply.classList.remove("streaming");
        break;
      case "tool_use_start":
        this.card(d.toolCallId, d.toolName);
        break;
      case "tool_use_stop":
        this.toolInput(d.toolCallId, d.toolName, d.input);
        break;
      case "tool_result":
        this.toolResult(d.toolCallId, undefined, d.result, d.isError, d.content);
        break;
      case "tool_approval_requested":
        this.approval(d);
        break;
      case "client_tool_requested":
        this.card(d.toolCallId, d.toolName).querySelector(".tool-state").textContent =
          "waits for a client-side result (the playground runs no client tools: Stop cancels it)";
        break;
      case "tool_progress": {
        const total = d.total ? `/${d.total}` : "";
        const text = `running: ${d.progress}${total}${d.message ? ` ${d.message}` : ""}`;
        this.card(d.toolId, d.toolName).querySelector(".tool-state").textContent = text;
        break;
      }
      case "model_retry":
        this.retrying(d);
        break;
      case "tool_elicitation":
        this.question(d);
        break;
      case "tool_elicitation_ended":
        this.questionEnded(d);
        break;
      case "mcp_server_failed":
        this.note(`MCP server ${d.server} ${d.reason}`, "error");
        break;
      case "file_changed":
        this.note(`File ${d.change}: ${d.path} (${d.size} bytes)`);
        break;
      case "interrupted":
        this.note("Interrupted");
        break;
      case "conversation_end":
        if (this.reply) this.reply.classList.remove("streaming");
        this.reply = null;
        break;
      case "error_message":
        this.note(`Error (${d.errorCode || "error"}): ${d.content}`, "error");
        this.reply = null;
        break;
      case "session_destroyed":
        this.note("This image was stopped or deleted.");
        break;
      default:
        break;
    }
  }
}
