/*
 * Switchboard operator console: plain JavaScript, no framework, no build step.
 *
 * The token comes from the URL fragment (#token=...) on load, is kept in sessionStorage
 * (this tab only) and leaves the address bar at once (history.replaceState). Every API
 * call sends it as "Authorization: Bearer <token>"; there are no cookies, so no CSRF.
 * Live state arrives on GET api/events, read with fetch() and a ReadableStream (an
 * EventSource cannot send a header) and parsed here; the stream reconnects with backoff.
 *
 * Stable hooks for tests (data-testid; <id> is a worker id):
 *   connection         the event stream's state; data-connection = idle | connecting |
 *                      live | retrying | unauthorized
 *   token-panel, token-form, token-input, token-submit, token-error, sign-out
 *   pause-state        data-paused = true | false | unknown, data-mode = the pause mode
 *   pause-mode         <select>: abort | retract | in_place
 *   pause-timeout      barrier timeout in seconds
 *   pause-button, continue-button
 *   op-result          aria-live result of the last action; data-kind = info | ok |
 *                      warning | error, data-status = the HTTP status
 *   operations         <ol> of recent operations, newest first; each item is
 *                      operation-<op_id> with data-action, data-mode, data-complete,
 *                      data-acked and data-stragglers (space-separated names)
 *   operations-empty, viewer-note
 *   engine-load, engine-live, load-running, load-waiting, load-usage, load-age
 *   workers            the <table>; worker-count, workers-empty
 *   worker-row-<id>    <tr> with data-state = starting | serving | paused | draining |
 *                      drained | dead
 *   state-<id>, inflight-<id>, heartbeat-<id>, requests-<id>
 *   spark-<id>         <canvas>, rows received per second over the last 60 s;
 *                      data-rate = the latest rate
 *   safe-<id>          "yes" | "no"; data-safe = true | false
 *   drain-<id>, undrain-<id>
 *                      <button>s; aria-disabled="true" when the state does not allow it
 *   versions
 */

import {
  clockTime,
  duration,
  isoTime,
  names,
  naturalOrder,
  rate,
  relativeSeconds,
} from "./format.js";
import { EventFeed } from "./sse.js";
import { drawSparkline, SPARK_SECONDS, sparkColours, ThroughputHistory } from "./throughput.js";

const TOKEN_KEY = "switchboard.console.token";
/** Row counts ride on heartbeats (1 s); the chart's right edge waits for them. */
const SPARK_LAG_S = 1.5;
/** A live worker whose last heartbeat is older than this is shown as late. */
const STALE_HEARTBEAT_S = 5;
const TICK_MS = 500;
const MAX_OPERATIONS = 8;
const ALLOWED = {
  drain: new Set(["starting", "serving", "paused"]),
  undrain: new Set(["draining", "drained"]),
};

const $ = (selector, root = document) => root.querySelector(selector);
const byTestId = (id, root = document) => root.querySelector(`[data-testid="${id}"]`);

// ---------------------------------------------------------------- the token

const memoryStore = new Map();
const store = {
  get() {
    try {
      return window.sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return memoryStore.get(TOKEN_KEY) ?? null;
    }
  },
  set(token) {
    try {
      window.sessionStorage.setItem(TOKEN_KEY, token);
    } catch {
      memoryStore.set(TOKEN_KEY, token);
    }
  },
  clear() {
    try {
      window.sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage refused: the memory copy is all there is */
    }
    memoryStore.delete(TOKEN_KEY);
  },
};

/** Move a #token=... fragment into storage and out of the address bar; true if found. */
function adoptFragmentToken() {
  const fragment = window.location.hash.replace(/^#/, "");
  if (!fragment) return false;
  const params = new URLSearchParams(fragment);
  const token = params.get("token");
  if (token === null) return false;
  params.delete("token");
  const rest = params.toString();
  const clean = window.location.pathname + window.location.search + (rest ? `#${rest}` : "");
  window.history.replaceState(window.history.state, "", clean);
  if (!token.trim()) return false;
  store.set(token.trim());
  return true;
}

// ---------------------------------------------------------------- HTTP

const apiUrl = (path) => new URL(path, document.baseURI).toString();

function authHeaders() {
  const token = store.get();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/**
 * One JSON call to the admin API. Never throws: the answer is
 * {status, ok, body, code, message}; status 0 when the app could not be reached.
 */
async function api(method, path, body, timeoutMs = 30000) {
  const controller = new AbortController();
  const timer = window.setTimeout(() => controller.abort(), timeoutMs);
  const init = {
    method,
    headers: { Accept: "application/json", ...authHeaders() },
    cache: "no-store",
    credentials: "omit",
    signal: controller.signal,
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const response = await fetch(apiUrl(path), init);
    let parsed = null;
    try {
      parsed = await response.json();
    } catch {
      parsed = null;
    }
    const error = parsed && typeof parsed === "object" ? parsed.error : undefined;
    return {
      status: response.status,
      ok: response.ok,
      body: parsed,
      code: error?.code ?? (response.ok ? "" : `http_${response.status}`),
      message: error?.message ?? (response.ok ? "" : response.statusText),
    };
  } catch (err) {
    const aborted = err && err.name === "AbortError";
    return {
      status: 0,
      ok: false,
      body: null,
      code: aborted ? "client_timeout" : "network",
      message: aborted ? `no answer within ${Math.round(timeoutMs / 1000)} s` : String(err),
    };
  } finally {
    window.clearTimeout(timer);
  }
}

// ---------------------------------------------------------------- the clock

/** Server time, estimated from worker views (last heartbeat at + seconds since). */
const clock = {
  offset: 0,
  observe(worker) {
    const at = worker.last_heartbeat_at;
    const ago = worker.last_heartbeat_s_ago;
    if (Number.isFinite(at) && Number.isFinite(ago) && at > 0) {
      this.offset = at + ago - Date.now() / 1000;
    }
  },
  now() {
    return Date.now() / 1000 + this.offset;
  },
};

// ---------------------------------------------------------------- the page's parts

const ui = {
  connection: byTestId("connection"),
  connectionText: $(".connection-text"),
  signOut: byTestId("sign-out"),
  tokenPanel: byTestId("token-panel"),
  tokenForm: byTestId("token-form"),
  tokenInput: byTestId("token-input"),
  tokenError: byTestId("token-error"),
  pauseState: byTestId("pause-state"),
  pauseMode: byTestId("pause-mode"),
  pauseTimeout: byTestId("pause-timeout"),
  pauseButton: byTestId("pause-button"),
  continueButton: byTestId("continue-button"),
  viewerNote: byTestId("viewer-note"),
  result: byTestId("op-result"),
  operations: byTestId("operations"),
  operationsEmpty: byTestId("operations-empty"),
  engineLive: byTestId("engine-live"),
  loadRunning: byTestId("load-running"),
  loadWaiting: byTestId("load-waiting"),
  loadUsage: byTestId("load-usage"),
  usageMeter: $("#usage-meter"),
  loadAge: byTestId("load-age"),
  workerBody: $("[data-testid='workers'] tbody"),
  workerCount: byTestId("worker-count"),
  workersEmpty: byTestId("workers-empty"),
  versions: byTestId("versions"),
  rowTemplate: $("#worker-row-template"),
  operationTemplate: $("#operation-template"),
};

const state = {
  /** "operator" | "viewer" | "unknown": from /api/whoami (or a 403 on an action). */
  role: "unknown",
  status: null,
  load: null,
  loadSeenAt: 0,
  rows: new Map(),
  histories: new Map(),
};

function showResult(kind, text, status = "") {
  ui.result.dataset.kind = kind;
  ui.result.dataset.status = String(status);
  ui.result.textContent = text;
}

function setConnection(kind, detail) {
  ui.connection.dataset.connection = kind;
  const texts = {
    idle: "Not connected",
    connecting: "Connecting…",
    live: "Live",
    retrying: `Reconnecting in ${Math.max(1, Math.round((detail ?? 0) / 1000))} s`,
    unauthorized: "Token refused",
  };
  ui.connectionText.textContent = texts[kind] ?? kind;
  document.body.dataset.stale = kind === "live" ? "false" : "true";
}

function setRole(role) {
  state.role = role;
  ui.viewerNote.hidden = role !== "viewer";
  refreshAvailability();
}

/** aria-disabled (not disabled) keeps a pressed button focused when it turns unavailable. */
function setAvailable(button, available, why = "") {
  button.setAttribute("aria-disabled", available ? "false" : "true");
  if (why) button.title = why;
  else button.removeAttribute("title");
}

function refreshAvailability() {
  const viewer = state.role === "viewer";
  const why = viewer ? "this token can view but not operate" : "";
  setAvailable(ui.pauseButton, !viewer, why);
  setAvailable(ui.continueButton, !viewer, why);
  for (const row of state.rows.values()) row.refreshButtons();
}

function showTokenPanel(message) {
  ui.tokenPanel.hidden = false;
  ui.signOut.hidden = true;
  ui.tokenError.hidden = !message;
  ui.tokenError.textContent = message ?? "";
  ui.tokenInput.value = "";
  ui.tokenInput.focus();
}

// ---------------------------------------------------------------- workers

class WorkerRow {
  constructor(id) {
    this.id = id;
    this.worker = null;
    const fragment = ui.rowTemplate.content.cloneNode(true);
    this.tr = fragment.querySelector("tr");
    this.tr.dataset.testid = `worker-row-${id}`;
    this.tr.dataset.workerId = id;
    this.idText = $(".id", this.tr);
    this.sub = $(".sub", this.tr);
    this.badge = $(".badge", this.tr);
    this.inflight = $(".inflight", this.tr);
    this.heartbeat = $(".heartbeat", this.tr);
    this.requests = $(".requests", this.tr);
    this.canvas = $(".spark", this.tr);
    this.rate = $(".rate", this.tr);
    this.safe = $(".safe", this.tr);
    this.drain = $(".drain", this.tr);
    this.undrain = $(".undrain", this.tr);
    this.idText.textContent = id;
    this.idText.title = id;
    this.badge.dataset.testid = `state-${id}`;
    this.inflight.dataset.testid = `inflight-${id}`;
    this.heartbeat.dataset.testid = `heartbeat-${id}`;
    this.requests.dataset.testid = `requests-${id}`;
    this.canvas.dataset.testid = `spark-${id}`;
    this.safe.dataset.testid = `safe-${id}`;
    this.drain.dataset.testid = `drain-${id}`;
    this.undrain.dataset.testid = `undrain-${id}`;
    this.drain.setAttribute("aria-label", `Drain ${id}`);
    this.undrain.setAttribute("aria-label", `Undrain ${id}`);
    this.drain.addEventListener("click", () => workerAction(this, "drain"));
    this.undrain.addEventListener("click", () => workerAction(this, "undrain"));
  }

  update(worker) {
    this.worker = worker;
    const st = worker.state ?? "unknown";
    this.tr.dataset.state = st;
    this.badge.dataset.state = st;
    this.badge.textContent = st;
    const where = [worker.host, worker.pid ? `pid ${worker.pid}` : ""].filter(Boolean).join(" · ");
    this.sub.textContent = st === "dead" && worker.departure_reason ? worker.departure_reason : where;
    this.sub.title = [where, worker.endpoint, worker.version ? `v${worker.version}` : ""]
      .filter(Boolean)
      .join("\n");
    this.inflight.textContent = String(worker.inflight ?? "—");
    this.requests.textContent = Number.isFinite(worker.requests_sent)
      ? worker.requests_sent.toLocaleString()
      : "—";
    const safe = worker.safe_to_delete === true;
    this.safe.dataset.safe = String(safe);
    this.safe.textContent = safe ? "yes" : "no";
    this.refreshButtons();
    this.tick(clock.now());
  }

  refreshButtons() {
    const st = this.worker?.state ?? "unknown";
    const viewer = state.role === "viewer";
    const viewerWhy = "this token can view but not operate";
    setAvailable(
      this.drain,
      !viewer && ALLOWED.drain.has(st),
      viewer ? viewerWhy : ALLOWED.drain.has(st) ? "" : `not while ${st}`,
    );
    setAvailable(
      this.undrain,
      !viewer && ALLOWED.undrain.has(st),
      viewer ? viewerWhy : ALLOWED.undrain.has(st) ? "" : `only while draining or drained`,
    );
  }

  tick(now, colours) {
    const w = this.worker;
    if (w === null) return;
    if (w.state === "dead") {
      this.heartbeat.textContent = Number.isFinite(w.last_heartbeat_at)
        ? relativeSeconds(now - w.last_heartbeat_at)
        : "—";
      this.heartbeat.dataset.stale = "false";
    } else {
      const age = Number.isFinite(w.last_heartbeat_at) ? now - w.last_heartbeat_at : NaN;
      this.heartbeat.textContent = relativeSeconds(age);
      this.heartbeat.dataset.stale = String(age > STALE_HEARTBEAT_S);
    }
    if (Number.isFinite(w.last_heartbeat_at)) {
      this.heartbeat.title = `${clockTime(w.last_heartbeat_at)} (${isoTime(w.last_heartbeat_at)})`;
    }
    if (colours) this.drawSpark(now, colours);
  }

  drawSpark(now, colours) {
    const history = state.histories.get(this.id);
    const values = history ? history.bins(now - SPARK_LAG_S) : [];
    if (values.length === 0) return;
    const peak = drawSparkline(this.canvas, values, colours);
    const latest = [...values].reverse().find((v) => v !== null) ?? null;
    this.rate.textContent = rate(latest);
    this.canvas.dataset.rate = latest === null ? "" : String(latest);
    this.canvas.setAttribute(
      "aria-label",
      `${this.id} rows received per second, last ${SPARK_SECONDS} s: now ${rate(latest)}, peak ${rate(peak)}`,
    );
  }
}

function workerSortKey(row) {
  return [row.worker?.state === "dead" ? 1 : 0, row.id];
}

/** Put rows in order (live by id, then dead) moving only when the order changed. */
function orderRows() {
  const rows = [...state.rows.values()].sort((a, b) => {
    const [ka, ia] = workerSortKey(a);
    const [kb, ib] = workerSortKey(b);
    return ka - kb || naturalOrder(ia, ib);
  });
  const current = [...ui.workerBody.children];
  if (rows.length !== current.length || rows.some((row, i) => row.tr !== current[i])) {
    for (const row of rows) ui.workerBody.appendChild(row.tr);
  }
  const live = rows.filter((row) => row.worker?.state !== "dead").length;
  ui.workersEmpty.hidden = rows.length > 0;
  ui.workerCount.textContent = rows.length
    ? `(${live} live${rows.length > live ? `, ${rows.length - live} gone` : ""})`
    : "";
}

function upsertWorker(worker) {
  if (!worker || typeof worker.id !== "string") return;
  clock.observe(worker);
  let row = state.rows.get(worker.id);
  if (row === undefined) {
    row = new WorkerRow(worker.id);
    state.rows.set(worker.id, row);
  }
  let history = state.histories.get(worker.id);
  if (history === undefined) {
    history = new ThroughputHistory();
    state.histories.set(worker.id, history);
  }
  const at = Number.isFinite(worker.last_heartbeat_at) ? worker.last_heartbeat_at : clock.now();
  history.observe(at, worker.rows_received);
  row.update(worker);
}

function removeWorker(id) {
  const row = state.rows.get(id);
  row?.tr.remove();
  state.rows.delete(id);
  state.histories.delete(id);
}

function replaceWorkers(workers) {
  const seen = new Set();
  for (const worker of workers ?? []) {
    upsertWorker(worker);
    seen.add(worker.id);
  }
  for (const id of [...state.rows.keys()]) if (!seen.has(id)) removeWorker(id);
  orderRows();
}

// ---------------------------------------------------------------- pause state, operations

function renderPauseState() {
  const status = state.status;
  if (!status) return;
  const el = ui.pauseState;
  el.dataset.paused = String(Boolean(status.paused));
  el.dataset.mode = status.pause_mode ?? "";
  const since = status.pause_state_since;
  const when = Number.isFinite(since) && since > 0
    ? ` since ${clockTime(since)} (${relativeSeconds(clock.now() - since)})`
    : "";
  el.textContent = status.paused
    ? `Paused${status.pause_mode ? ` (${status.pause_mode})` : ""}${when}`
    : `Serving${when}`;
  // The likely next action stands out: Continue while paused.
  ui.continueButton.classList.toggle("primary", Boolean(status.paused));
  if (Number.isFinite(since) && since > 0) el.title = isoTime(since);
}

function operationKey(op) {
  return Number.isFinite(op.seq) ? op.seq : (op.finished_at ?? 0);
}

function renderOperations() {
  const ops = [...(state.status?.recent_operations ?? [])]
    .sort((a, b) => operationKey(b) - operationKey(a))
    .slice(0, MAX_OPERATIONS);
  const items = ops.map((op) => {
    const li = ui.operationTemplate.content.firstElementChild.cloneNode(true);
    li.dataset.testid = `operation-${op.op_id}`;
    li.dataset.action = op.action ?? "";
    li.dataset.mode = op.mode ?? "";
    li.dataset.complete = String(Boolean(op.complete));
    li.dataset.acked = (op.acked ?? []).join(" ");
    li.dataset.stragglers = (op.stragglers ?? []).join(" ");
    const badge = $(".op-badge", li);
    badge.dataset.kind = op.complete ? "ok" : "warning";
    badge.textContent = op.complete ? "all acknowledged" : "timed out";
    const action = op.action === "pause" ? "Pause" : op.action === "continue" ? "Continue" : op.action;
    $(".op-title", li).textContent = op.mode ? `${action} · ${op.mode}` : action;
    const time = $(".op-time", li);
    if (Number.isFinite(op.finished_at)) {
      time.dateTime = isoTime(op.finished_at);
      time.textContent = clockTime(op.finished_at);
    }
    $(".op-elapsed", li).textContent = duration(op.elapsed_s);
    const acked = names(op.acked);
    $(".op-acked", li).textContent = acked ? `Acknowledged: ${acked}` : "Acknowledged by nobody";
    const stragglers = names(op.stragglers);
    if (stragglers) $(".op-stragglers", li).textContent = `No acknowledgement: ${stragglers}`;
    const departed = names(op.departed);
    if (departed) $(".op-departed", li).textContent = `Departed meanwhile: ${departed}`;
    return li;
  });
  ui.operations.replaceChildren(...items);
  ui.operationsEmpty.hidden = items.length > 0;
}

function applyStatus(status) {
  if (!status || typeof status !== "object") return;
  state.status = status;
  renderPauseState();
  renderOperations();
  if (status.engine) {
    ui.engineLive.textContent = status.engine.live ? "connected" : "not connected";
    ui.engineLive.dataset.live = String(Boolean(status.engine.live));
    if (status.engine.load !== undefined) applyLoad(status.engine.load);
  }
  const versions = status.versions ?? {};
  const parts = [];
  if (versions.admin) parts.push(`admin ${versions.admin}`);
  if (versions.router) parts.push(`router ${versions.router}`);
  if (status.router?.pid) parts.push(`router pid ${status.router.pid}`);
  ui.versions.textContent = parts.length ? `Switchboard: ${parts.join(" · ")}` : "";
}

function applyLoad(load) {
  state.load = load ?? null;
  state.loadSeenAt = Date.now() / 1000;
  if (!load) {
    ui.loadRunning.textContent = "—";
    ui.loadWaiting.textContent = "—";
    ui.loadUsage.textContent = "—";
    ui.usageMeter.value = 0;
    ui.loadAge.textContent = "The engine has not reported its load.";
    return;
  }
  ui.loadRunning.textContent = Number.isFinite(load.max_running)
    ? `${load.running} / ${load.max_running}`
    : String(load.running ?? "—");
  ui.loadWaiting.textContent = String(load.waiting ?? "—");
  const usage = Number(load.token_usage);
  ui.loadUsage.textContent = Number.isFinite(usage) ? `${(usage * 100).toFixed(0)}%` : "—";
  ui.usageMeter.value = Number.isFinite(usage) ? Math.min(1, Math.max(0, usage)) : 0;
  renderLoadAge();
}

function renderLoadAge() {
  if (!state.load) return;
  const age = (state.load.age_s ?? 0) + (Date.now() / 1000 - state.loadSeenAt);
  ui.loadAge.textContent = `Reported ${relativeSeconds(age)}`;
}

// ---------------------------------------------------------------- actions

function describeFailure(what, answer) {
  if (answer.status === 0) return `${what} failed: the admin app did not answer (${answer.message}).`;
  if (answer.status === 401) return `${what} refused (401): the token was not accepted.`;
  if (answer.status === 403) return `${what} refused (403 forbidden): this token can view but not operate.`;
  const detail = answer.message ? `: ${answer.message}` : "";
  return `${what} failed (${answer.status} ${answer.code})${detail}`;
}

function handleAuthFailure(answer) {
  if (answer.status === 401) {
    store.clear();
    feed.stop();
    setConnection("unauthorized");
    showTokenPanel("The admin app refused the token (401). Enter a valid token.");
  } else if (answer.status === 403) {
    setRole("viewer");
  }
}

async function busy(button, work) {
  if (button.getAttribute("aria-busy") === "true") return;
  button.setAttribute("aria-busy", "true");
  try {
    await work();
  } finally {
    button.removeAttribute("aria-busy");
  }
}

function barrierTimeout() {
  const value = Number(ui.pauseTimeout.value);
  return Number.isFinite(value) && value > 0 && value <= 600 ? value : null;
}

function noteOperation(op) {
  if (!op || !op.op_id || !state.status) return;
  const ops = state.status.recent_operations ?? [];
  if (ops.some((known) => known.op_id === op.op_id)) return;
  state.status = { ...state.status, recent_operations: [...ops, op] };
  renderOperations();
}

async function barrier(action, button) {
  if (button.getAttribute("aria-disabled") === "true") {
    showResult("warning", "This token can view but not operate (viewer).");
    return;
  }
  const timeout = barrierTimeout();
  if (timeout === null) {
    showResult("error", "The timeout must be a number of seconds above 0 and at most 600.");
    ui.pauseTimeout.focus();
    return;
  }
  const mode = ui.pauseMode.value;
  const label = action === "pause" ? `Pause (${mode})` : "Continue";
  await busy(button, async () => {
    showResult("info", `${label}: waiting for every worker and the engine to acknowledge…`);
    const body = action === "pause" ? { mode, timeout_s: timeout } : { timeout_s: timeout };
    const answer = await api("POST", `api/${action}`, body, (timeout + 15) * 1000);
    const op = answer.body;
    if ((answer.status === 200 || answer.status === 504) && op && Array.isArray(op.acked)) {
      noteOperation(op);
      const acked = names(op.acked) || "nobody";
      const took = Number.isFinite(op.elapsed_s) ? ` in ${duration(op.elapsed_s)}` : "";
      if (answer.status === 200 && op.complete) {
        const done = action === "pause" ? `Paused (${op.mode ?? mode})` : "Continued";
        showResult("ok", `${done}: acknowledged by ${acked}${took}.`, answer.status);
      } else {
        const stragglers = names(op.stragglers) || "unknown";
        showResult(
          "warning",
          `${label} timed out after ${timeout} s: no acknowledgement from ${stragglers}. ` +
            `Acknowledged by ${acked}.`,
          answer.status,
        );
      }
      return;
    }
    handleAuthFailure(answer);
    showResult("error", describeFailure(label, answer), answer.status);
  });
}

async function workerAction(row, action) {
  const verb = action === "drain" ? "Drain" : "Undrain";
  const button = action === "drain" ? row.drain : row.undrain;
  if (button.getAttribute("aria-disabled") === "true") {
    const st = row.worker?.state ?? "unknown";
    showResult(
      "warning",
      state.role === "viewer"
        ? "This token can view but not operate (viewer)."
        : `${verb} ${row.id}: not available while it is ${st}.`,
    );
    return;
  }
  await busy(button, async () => {
    showResult("info", `${verb} ${row.id}…`);
    const answer = await api("POST", `api/workers/${encodeURIComponent(row.id)}/${action}`);
    if (answer.ok && answer.body && answer.body.id === row.id) {
      upsertWorker(answer.body);
      orderRows();
      const st = answer.body.state;
      const safe = answer.body.safe_to_delete ? "; safe to delete" : "";
      showResult("ok", `${verb} ${row.id}: now ${st}${safe}.`, answer.status);
      return;
    }
    handleAuthFailure(answer);
    showResult("error", describeFailure(`${verb} ${row.id}`, answer), answer.status);
  });
}

// ---------------------------------------------------------------- events

const eventHandlers = {
  snapshot(payload) {
    replaceWorkers(payload.workers);
    applyStatus(payload.status);
  },
  worker(payload) {
    if (payload.change === "removed" && payload.worker?.id) removeWorker(payload.worker.id);
    else upsertWorker(payload.worker);
    orderRows();
  },
  pause(payload) {
    applyStatus(payload.status);
  },
  load(payload) {
    applyLoad(payload.load);
  },
};

const feed = new EventFeed({
  url: () => apiUrl("api/events"),
  headers: authHeaders,
  onEvent(type, payload) {
    const handler = eventHandlers[type];
    if (handler && payload && typeof payload === "object") handler(payload);
  },
  onConnection(kind, delay) {
    setConnection(kind, delay);
    if (kind === "live") {
      ui.tokenPanel.hidden = true;
      ui.signOut.hidden = false;
    }
  },
  onUnauthorized(status, body) {
    const message = body?.error?.message ? ` (${body.error.message})` : "";
    store.clear();
    setConnection("unauthorized");
    showTokenPanel(`The admin app refused the token: ${status}${message}. Enter a valid token.`);
  },
});

function connect() {
  ui.tokenPanel.hidden = true;
  ui.signOut.hidden = false;
  setRole("unknown");
  feed.start();
  learnRole();
}

/** Ask the app what this token may do, so a viewer never sees actions it cannot take. */
async function learnRole() {
  const answer = await api("GET", "api/whoami");
  if (answer.ok && (answer.body?.role === "viewer" || answer.body?.role === "operator")) {
    setRole(answer.body.role);
  }
}

function forget() {
  feed.stop();
  store.clear();
  replaceWorkers([]);
  state.status = null;
  renderOperations();
  setConnection("idle");
  showResult("info", "Token forgotten.");
  showTokenPanel();
}

// ---------------------------------------------------------------- the ticker

function tick() {
  const now = clock.now();
  const colours = sparkColours();
  for (const row of state.rows.values()) row.tick(now, colours);
  renderPauseState();
  renderLoadAge();
}

// ---------------------------------------------------------------- start

function start() {
  ui.tokenForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const token = ui.tokenInput.value.trim();
    if (!token) return;
    store.set(token);
    ui.tokenInput.value = "";
    connect();
  });
  ui.signOut.addEventListener("click", forget);
  ui.pauseButton.addEventListener("click", () => barrier("pause", ui.pauseButton));
  ui.continueButton.addEventListener("click", () => barrier("continue", ui.continueButton));
  window.addEventListener("online", () => feed.retryNow());
  window.addEventListener("hashchange", () => {
    if (adoptFragmentToken()) connect();
  });
  window.setInterval(tick, TICK_MS);
  setConnection("idle");
  if (store.get()) connect();
  else showTokenPanel();
}

// The fragment leaves the address bar before anything else happens.
adoptFragmentToken();
start();
