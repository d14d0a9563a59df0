// The admin UI: every screen is drawn from the JSON API (/api/*); nothing is built or bundled.
"use strict";

let csrf = null;
let tools = [];
let logStream = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(child ?? ""));
  }
  return node;
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (options.method && options.method !== "GET" && csrf) headers["X-Admin-CSRF"] = csrf;
  const response = await fetch(path, Object.assign({}, options, { headers, credentials: "same-origin" }));
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = (body.error && body.error.message) || response.statusText;
    const err = new Error(message);
    err.status = response.status;
    throw err;
  }
  return body;
}

function show(view) {
  for (const section of document.querySelectorAll("section.view")) section.hidden = section.id !== view;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.view === view);
  $("status").textContent = "";
  if (view !== "logs" && logStream) { logStream.close(); logStream = null; }
  const load = { servers: loadServers, tools: loadTools, sessions: loadSessions, logs: loadLogs, audit: loadAudit }[view];
  if (load) load().catch((err) => { $("status").textContent = err.message; });
}

async function loadServers() {
  const { servers } = await api("/api/servers");
  $("server-rows").replaceChildren(...servers.map((s) => el("tr", { "data-server": s.name },
    el("td", {}, s.name),
    el("td", { class: "status-" + s.status }, s.status),
    el("td", {}, String(s.toolCount)),
    el("td", {}, String(s.restarts)),
    el("td", {}, s.lastError || ""))));
}

async function loadTools() {
  ({ tools } = await api("/api/tools"));
  drawTools();
}

function drawTools() {
  const words = $("tool-search").value.trim().toLowerCase();
  const shown = (Array.isArray(tools) ? tools : []).filter((t) => !words || (String(t && t.name) + " " + String((t && t.description) || "")).toLowerCase().includes(words));
  // One odd tool must not blank the view: a card that cannot be drawn is drawn plainly.
  $("tool-list").replaceChildren(...shown.map((t) => { try { return toolCard(t); } catch (err) { return toolCard(t, err); } }));
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const hint = (v) => (typeof v === "string" ? v : JSON.stringify(v));

// One field of the form for property `name` with schema `prop`: checkbox for booleans, number
// for numbers, text for strings, JSON otherwise (and for a schema that is not an object).
function field(name, prop, required) {
  const p = isObject(prop) ? prop : null;
  let type = p && (Array.isArray(p.type) ? p.type.find((t) => typeof t === "string" && t !== "null") : p.type);
  if (p && type === undefined) type = "string";
  if (!["boolean", "number", "integer", "string"].includes(type)) type = "json";
  let input;
  if (type === "boolean") input = el("input", { type: "checkbox", name });
  else if (type === "number" || type === "integer") input = el("input", { type: "number", name, step: type === "integer" ? "1" : "any" });
  else if (type === "json") input = el("textarea", { name, rows: "2", placeholder: "JSON" });
  else input = el("input", { type: "text", name });
  if (p && p.enum !== undefined) input.setAttribute("placeholder", Array.isArray(p.enum) ? p.enum.map(hint).join(" | ") : hint(p.enum));
  if (required) input.required = true;
  input.dataset.type = type;
  return el("label", {}, name + (required ? " *" : ""), input);
}

// A "try it" form from the tool's input schema: one field per property; when the properties
// cannot be read as fields (or drawing failed: `broken`), one raw JSON field for the arguments.
function toolCard(tool, broken) {
  tool = isObject(tool) ? tool : { name: hint(tool) };
  const schema = isObject(tool.inputSchema) ? tool.inputSchema : {};
  const properties = schema.properties === undefined ? {} : schema.properties;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = isObject(properties) && !broken
    ? Object.entries(properties).map(([name, prop]) => field(name, prop, required.has(name)))
    : [el("label", {}, "arguments (JSON object)", el("textarea", { name: "arguments", rows: "3", placeholder: "{}", "data-type": "raw" }))];
  const result = el("pre", { class: "result", hidden: "" });
  const form = el("form", { "data-tool": hint(tool.name) }, ...fields, el("button", { type: "submit" }, "Call"), result);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const args = {};
    try {
      for (const input of form.querySelectorAll("input, textarea")) {
        const type = input.dataset.type;
        if (type === "boolean") { args[input.name] = input.checked; continue; }
        if (input.value === "") continue;
        if (type === "raw") {
          const raw = JSON.parse(input.value);
          if (!isObject(raw)) throw new Error("the arguments must be a JSON object");
          Object.assign(args, raw);
        }
        else if (type === "number" || type === "integer") args[input.name] = Number(input.value);
        else if (type === "json") args[input.name] = JSON.parse(input.value);
        else args[input.name] = input.value;
      }
      const answer = await api("/api/tools/" + encodeURIComponent(tool.name) + "/call", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ arguments: args }),
      });
      const text = (answer.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
      result.textContent = (answer.isError ? "error: " : "") + (text || JSON.stringify(answer, null, 2));
    } catch (err) {
      result.textContent = "error: " + err.message;
    }
    result.hidden = false;
  });
  const meta = el("div", { class: "meta" }, "server " + hint(tool.server) + (tool.restricted ? " · restricted" : "") + (broken ? " · schema not drawn: " + broken.message : ""));
  return el("div", { class: "tool", "data-tool": hint(tool.name) }, el("h3", {}, hint(tool.name)), meta, el("p", {}, hint(tool.description || "")), form);
}

async function loadSessions() {
  const { sessions } = await api("/api/sessions");
  $("session-rows").replaceChildren(...sessions.map((s) => el("tr", { "data-session": s.id },
    el("td", { title: s.id }, s.id.slice(0, 12)),
    el("td", {}, s.principal),
    el("td", {}, [s.clientName, s.clientVersion].filter(Boolean).join(" ")),
    el("td", {}, s.startedAt),
    el("td", {}, s.lastActivityAt),
    el("td", {}, String(s.requests)),
    el("td", {}, el("button", { type: "button", class: "end", onclick: async () => {
      try { await api("/api/sessions/" + encodeURIComponent(s.id), { method: "DELETE" }); await loadSessions(); }
      catch (err) { $("status").textContent = err.message; }
    } }, "End")))));
}

async function loadLogs() {
  const out = $("log-lines");
  out.textContent = "";
  logStream = new EventSource("/api/logs?follow&tail=200");
  logStream.addEventListener("log", (event) => {
    const line = JSON.parse(event.data);
    out.append(line.time + " " + line.level.padEnd(5) + " " + line.target + ": " + line.message + "\n");
    out.scrollTop = out.scrollHeight;
  });
}

async function loadAudit() {
  try {
    const audit = await api("/api/audit?tail=100");
    const v = audit.verification;
    $("audit-state").textContent = audit.path + ": " + v.state + (v.message ? " (" + v.message + ")" : "") + (v.records !== undefined ? ", " + v.records + " record(s)" : "");
    $("audit-rows").replaceChildren(...audit.records.slice().reverse().map((r) => el("tr", {},
      el("td", {}, String(r.seq ?? "")), el("td", {}, r.time || r.ts || ""), el("td", {}, r.principal || r.identity || ""),
      el("td", {}, r.method || ""), el("td", {}, r.tool || r.target || r.resource || ""), el("td", {}, r.outcome || ""))));
  } catch (err) {
    $("audit-state").textContent = err.message;
    $("audit-rows").replaceChildren();
  }
}

async function start() {
  try {
    const me = await api("/api/whoami");
    csrf = me.csrf;
    $("whoami").textContent = "signed in as " + me.subject;
    $("nav").hidden = false;
    $("login").hidden = true;
    const route = () => show((location.hash || "#servers").slice(1));
    window.addEventListener("hashchange", route);
    route();
  } catch (err) {
    $("login").hidden = false;
    $("login-failed").hidden = location.hash !== "#login-failed";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("tool-search").addEventListener("input", drawTools);
  $("logout").addEventListener("click", async () => {
    await api("/ui/logout", { method: "POST" }).catch(() => {});
    location.href = "/ui/";
  });
  start();
});
