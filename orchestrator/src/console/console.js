// The orchestrator console: every call carries the key kept in this tab's
// sessionStorage; everything shown is built with textContent (no HTML from
// data), through `visible` (no invisible or direction-changing characters
// from data either).
"use strict";

const KEY = "orchestrator-console-key";
let tools = [];

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
  }
  return node;
}

// Shows `text` as `node`'s only content, spelled out by `visible`.
function setText(node, text) {
  node.textContent = visible(text);
}

function showError(message) {
  const box = document.getElementById("error");
  setText(box, message);
  box.hidden = !message;
}

// One API call; a non-2xx answer throws the server's `error` text with the status.
async function api(method, path, body) {
  const key = sessionStorage.getItem(KEY);
  const headers = { "Accept": "application/json" };
  if (key) headers["Authorization"] = "Bearer " + key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new Error("the orchestrator cannot be reached: " + error.message);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) {
    const reason = data && data.error ? data.error : text || response.statusText;
    const hint = response.status === 401 ? " Enter a valid API key above." : "";
    throw new Error(`${method} ${path}: ${response.status} ${reason}.${hint}`);
  }
  return data;
}

// `text` with every invisible or direction-changing character (Unicode's
// format and control characters but the line feed, line and paragraph
// separators, and the letters, marks and symbols that show as nothing:
// Hangul fillers, the braille blank, variation selectors, the combining
// grapheme joiner; the same list as `spelled_out` in mcp/approval.rs)
// written as `\uXXXX`: JSON.stringify leaves most of them as they are, and
// a hostile model's arguments could otherwise show the person who approves
// them other text than what runs (a right-to-left override, a zero-width
// space) or hide data in characters that take no room, and a module's
// descriptions, results or errors could do the same. Text already spelled
// out comes back as it is.
function visible(text) {
  return String(text).replace(/[^\P{Cc}\n]|[\p{Cf}\u2028\u2029\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u2800\u3164\ufe00-\ufe0f\uffa0\u{e0100}-\u{e01ef}]/gu, (found) =>
    Array.from({ length: found.length }, (_, i) => "\\u" + found.charCodeAt(i).toString(16).padStart(4, "0")).join(""));
}

function when(text) {
  if (!text) return "-";
  const date = new Date(text);
  return isNaN(date) ? text : date.toLocaleString();
}

async function loadModules() {
  const data = await api("GET", "/modules");
  const body = document.querySelector("#modules tbody");
  body.replaceChildren(...data.modules.map((m) => el("tr", { "data-module": m.name },
    el("td", {}, m.name),
    el("td", { class: "state-" + m.state }, m.state),
    el("td", {}, m.tool_count),
    el("td", {}, when(m.last_success)),
    el("td", {}, m.last_error || "-"))));
}

// Whether `value` is a JSON object (not null, not an array).
function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// The type of a schema property (an object), its `null` alternative dropped.
// Manifests are only checked at their schema's root, so nothing inside is
// trusted to have the shape JSON Schema gives it.
function typeOf(schema) {
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => typeof t === "string" && t !== "null") || "string";
  if (typeof type === "string") return type;
  if (Array.isArray(schema.anyOf)) {
    const other = schema.anyOf.find((s) => isObject(s) && typeof s.type === "string" && s.type !== "null");
    if (other) return typeOf(other);
  }
  return Array.isArray(schema.enum) ? "string" : "object";
}

// A tool's arguments. A property whose schema is not an object (`true`, or
// a malformed `null`) takes any value, as JSON.
function propertiesOf(tool) {
  const schema = tool.input_schema;
  if (isObject(schema) && isObject(schema.properties)) {
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    return Object.entries(schema.properties).map(([name, given]) => {
      const property = isObject(given) ? given : {};
      return {
        name, schema: property, type: isObject(given) ? typeOf(given) : "any", required: required.has(name),
        description: typeof property.description === "string" ? property.description : "",
        allowed: Array.isArray(property.enum) ? property.enum : null,
      };
    });
  }
  return (Array.isArray(tool.parameters) ? tool.parameters : []).map((p) => ({
    name: p.name, schema: {}, type: p.type, required: p.required, description: p.description, allowed: Array.isArray(p.enum) ? p.enum : null,
  }));
}

function limits(schema) {
  const parts = [];
  if (schema.minimum !== undefined) parts.push("min " + schema.minimum);
  if (schema.maximum !== undefined) parts.push("max " + schema.maximum);
  if (schema.minLength !== undefined) parts.push("at least " + schema.minLength + " chars");
  if (schema.maxLength !== undefined) parts.push("at most " + schema.maxLength + " chars");
  if (schema.default !== undefined) parts.push("default " + JSON.stringify(schema.default));
  if (schema.format) parts.push(schema.format);
  return parts.join(", ");
}

function toolCard(tool) {
  const badges = [el("span", { class: "badge" }, tool.required_permission)];
  if (tool.requires_approval) badges.push(el("span", { class: "badge warn" }, "needs approval"));
  if (tool.risk_level) badges.push(el("span", { class: "badge " + (tool.risk_level === "high" ? "danger" : "warn") }, "risk " + tool.risk_level));
  if (tool.annotations && tool.annotations.destructive) badges.push(el("span", { class: "badge danger" }, "destructive"));
  if (tool.annotations && tool.annotations.read_only) badges.push(el("span", { class: "badge" }, "read-only"));
  const rows = propertiesOf(tool).map((p) => el("tr", {},
    el("td", {}, p.name, p.required ? el("span", { class: "required", title: "required" }, " *") : null),
    el("td", {}, p.allowed ? "one of " + p.allowed.map((v) => typeof v === "string" ? v : JSON.stringify(v)).join(", ") : p.type),
    el("td", {}, p.description, limits(p.schema) ? el("small", {}, " (" + limits(p.schema) + ")") : null)));
  return el("div", { class: "tool", "data-name": tool.name },
    el("div", { class: "tool-head" },
      el("span", { class: "tool-name" }, tool.name), badges,
      el("button", { type: "button", class: "use secondary", onclick: () => openForm(tool) }, "Call")),
    el("div", {}, tool.description),
    rows.length ? el("table", { class: "params" }, el("tbody", {}, rows)) : el("div", { class: "hint" }, "No arguments."));
}

// A tool's card; one the page cannot show says so, and hides no other tool.
function safeToolCard(tool) {
  try {
    return toolCard(tool);
  } catch (error) {
    return el("div", { class: "tool", "data-name": tool.name, "data-broken": true },
      el("div", { class: "tool-head" }, el("span", { class: "tool-name" }, tool.name)),
      el("div", { class: "hint" }, "This tool's manifest cannot be shown: " + error.message));
  }
}

function renderTools() {
  const filter = document.getElementById("tool-filter").value.trim().toLowerCase();
  const shown = tools.filter((t) => !filter || t.name.toLowerCase().includes(filter) || t.description.toLowerCase().includes(filter));
  const list = document.getElementById("tools");
  list.replaceChildren(...(shown.length ? shown.map(safeToolCard) : [el("p", { class: "hint" }, "No tools for this key.")]));
}

async function loadTools() {
  tools = await api("GET", "/tools?format=raw");
  renderTools();
}

// The id of the input for parameter `name`.
function inputId(name) {
  return "arg-" + name;
}

// The input for parameter `p`. It has no `name`: a form's named elements
// hide the form's own properties (an input named `replaceChildren` would
// replace the method), so the form's inputs are kept in a Map instead.
function inputFor(p) {
  const id = inputId(p.name);
  let input;
  if (p.allowed) {
    input = el("select", { id },
      p.required ? null : el("option", { value: "" }, "(none)"),
      // An option's value is its index, so a number, boolean, null or
      // object in `enum` is sent as itself, not as its text.
      p.allowed.map((v, i) => el("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
  } else if (p.type === "boolean") {
    input = el("input", { id, type: "checkbox", checked: p.schema.default === true });
  } else if (p.type === "integer" || p.type === "number") {
    input = el("input", { id, type: "number", step: p.type === "integer" ? "1" : "any",
      min: p.schema.minimum, max: p.schema.maximum,
      placeholder: p.schema.default === undefined ? undefined : visible(JSON.stringify(p.schema.default)) });
  } else if (p.type === "array" || p.type === "object" || p.type === "any") {
    const placeholder = { array: "[ ... ] as JSON", object: "{ ... } as JSON", any: "any value, as JSON" }[p.type];
    input = el("textarea", { id, rows: 3, placeholder });
  } else {
    input = el("textarea", { id, rows: 3, maxlength: p.schema.maxLength });
  }
  input.dataset.type = p.type;
  return input;
}

// Parameter `p`'s input with its label and description.
function field(p, input) {
  return el("div", { class: "field" },
    el("label", { for: inputId(p.name) }, p.name, p.required ? el("span", { class: "required" }, " *") : null),
    input, el("small", {}, [p.description, limits(p.schema)].filter(Boolean).join(" — ")));
}

// The arguments read from `inputs` (parameter name to input), in an object
// without a prototype, so that a parameter named `__proto__` is a key too.
function readArguments(inputs, properties) {
  const args = Object.create(null);
  for (const p of properties) {
    const input = inputs.get(p.name);
    if (p.type === "boolean") { args[p.name] = input.checked; continue; }
    const raw = input.value;
    if (raw === "") {
      if (p.required) throw new Error(`\`${p.name}\` is required`);
      continue;
    }
    if (p.allowed) args[p.name] = p.allowed[Number(raw)];
    else if (p.type === "string") args[p.name] = raw;
    else if (p.type === "integer" || p.type === "number") {
      const number = Number(raw);
      if (!Number.isFinite(number)) throw new Error(`\`${p.name}\` must be a number`);
      args[p.name] = number;
    } else {
      try { args[p.name] = JSON.parse(raw); } catch (_) { throw new Error(`\`${p.name}\` must be JSON (${p.type})`); }
    }
  }
  return args;
}

function showResult(result) {
  const box = document.getElementById("result");
  box.className = result.success ? "success" : "failure";
  box.dataset.success = String(result.success);
  setText(box, JSON.stringify(result, null, 2));
}

function openForm(tool) {
  const properties = propertiesOf(tool);
  const form = document.getElementById("call-form");
  setText(document.getElementById("call-tool"), tool.name);
  const result = document.getElementById("result");
  result.textContent = "";
  result.className = "";
  delete result.dataset.success;
  const inputs = new Map(properties.map((p) => [p.name, inputFor(p)]));
  form.replaceChildren(...properties.map((p) => field(p, inputs.get(p.name))),
    el("button", { id: "call-submit", type: "submit" }, "Run " + tool.name));
  form.onsubmit = async (event) => {
    event.preventDefault();
    showError("");
    try {
      const args = readArguments(inputs, properties);
      showResult(await api("POST", "/execute", { tool_name: tool.name, arguments: args }));
      await loadApprovals();
    } catch (error) {
      showError(error.message);
    }
  };
  document.getElementById("call-section").hidden = false;
  document.getElementById("call-section").scrollIntoView();
}

function approvalCard(approval) {
  const reason = el("input", { type: "text", class: "reason", placeholder: "Reason (optional)" });
  const outcome = el("pre", { class: "outcome", hidden: true });
  const decide = async (decision) => {
    showError("");
    try {
      const answer = await api("POST", "/approvals/" + encodeURIComponent(approval.id), { decision, reason: reason.value || undefined });
      outcome.hidden = false;
      outcome.dataset.status = answer.approval.status;
      setText(outcome, answer.approval.status + ": " + JSON.stringify(answer.result, null, 2));
      card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    } catch (error) {
      showError(error.message);
    }
  };
  const card = el("div", { class: "approval", "data-id": approval.id, "data-status": approval.status },
    el("div", { class: "tool-head" }, el("span", { class: "tool-name" }, approval.tool_name),
      el("span", { class: "badge warn" }, approval.status)),
    el("div", { class: "hint" }, `for ${approval.user_id || "(no user)"}, asked by ${approval.requested_by} at ${when(approval.created_at)}; expires ${when(approval.expires_at)}`),
    // The server's JSON text: parsed here, integers past 2^53 would show rounded.
    el("pre", { class: "arguments" }, approval.arguments_json),
    approval.status === "pending" ? el("div", { class: "actions" }, reason,
      el("button", { type: "button", class: "approve", onclick: () => decide("approve") }, "Approve"),
      el("button", { type: "button", class: "deny", onclick: () => decide("deny") }, "Deny")) : null,
    outcome);
  return card;
}

async function loadApprovals() {
  const data = await api("GET", "/approvals");
  const pending = data.approvals.filter((a) => a.status === "pending");
  const list = document.getElementById("approvals");
  list.replaceChildren(...(pending.length ? pending.map(approvalCard) : [el("p", { class: "hint", id: "no-approvals" }, "Nothing waits for you.")]));
}

async function loadAll() {
  showError("");
  const who = document.getElementById("who");
  who.textContent = sessionStorage.getItem(KEY) ? "key set for this tab" : "no key";
  const results = await Promise.allSettled([loadModules(), loadTools(), loadApprovals()]);
  const failed = results.find((r) => r.status === "rejected");
  if (failed) showError(failed.reason.message);
  document.body.dataset.loaded = failed ? "error" : "ok";
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = document.getElementById("key").value.trim();
    if (key) sessionStorage.setItem(KEY, key);
    document.getElementById("key").value = "";
    loadAll();
  });
  document.getElementById("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    loadAll();
  });
  document.getElementById("refresh").addEventListener("click", async () => {
    try { await api("POST", "/refresh-tools"); } catch (error) { showError(error.message); return; }
    loadAll();
  });
  document.getElementById("tool-filter").addEventListener("input", renderTools);
  loadAll();
});
