/*
 * Switchboard operator console: plain JavaScript modules, no framework, no build step.
 *
 * This module starts the page and wires its parts: the session (session.js: the token,
 * API calls), the page's elements (page.js), the workers table (workers.js), the status
 * (generation.js), the stack's charts (history.js) and the actions the command catalogue
 * offers (actions.js). Live state
 * arrives on GET api/events, read with fetch() and a ReadableStream (an EventSource
 * cannot send a header) and parsed by sse.js; the stream reconnects with backoff.
 *
 * Stable hooks for tests (data-testid; <id> is a worker id):
 *   connection         the event stream's state; data-connection = idle | connecting |
 *                      live | retrying | unauthorized | unreachable (the admin app
 *                      answers, the router does not; data-since = since when, Unix s)
 *   connection-detail  the banner saying why the router is unreachable (the last error)
 *   token-panel, token-form, token-input, token-submit, token-error, sign-out
 *   pause-state        data-paused = true | false | unknown, data-mode = the pause mode
 *   pause-mode         <select>: abort | retract | in_place (retract at first: it loses
 *                      nothing; a pause that names no mode is abort, as SGLang's)
 *   pause-timeout      barrier timeout in seconds
 *   pause-button, continue-button
 *   op-result          aria-live result of the last action; data-kind = info | ok |
 *                      warning | error, data-status = the HTTP status
 *   operations         <ol> of recent operations, newest first; each item is
 *                      operation-<op_id> with data-action, data-mode, data-complete,
 *                      data-acked and data-stragglers (space-separated names)
 *                      (the latest 5 unless expanded; data-expanded, data-total)
 *   operations-toggle  "Show all N" / "Show the latest 5" (aria-expanded)
 *   operations-empty, viewer-note
 *   engine-load, engine-live, load-running, load-waiting, load-usage, load-age
 *   engine-actions     the engine panel's actions: <name>-button for each (freeze-gc-button)
 *   workers            the <table>; worker-count, workers-empty
 *   worker-row-<id>    <tr> with data-state = starting | serving | paused | draining |
 *                      drained | unresponsive | dead
 *   state-<id>, inflight-<id>, heartbeat-<id>, requests-<id>
 *   spark-<id>         <canvas>, rows received per second over the last 60 s;
 *                      data-rate = the latest rate
 *   safe-<id>          "yes" | "no"; data-safe = true | false
 *   errors-<id>        5xx answers over the window; data-errors, data-requests
 *   latency-<id>       "p50 / p95" of finished generations; data-p50, data-p95 (s)
 *   stats-window       what the errors and latency cover; data-available
 *   history-panel      the stack's last 15 minutes (GET api/history, then every 5 s)
 *   history-requests, history-tokens, history-latency
 *                      <canvas>; data-points = points drawn; history-<name>-now the
 *                      latest figures; history-range the times covered; history-note
 *                      (data-available)
 *   audit-panel, audit (the <table>), audit-count, audit-empty
 *   audit-row-<seq>    one audit record, newest first; data-seq, data-action,
 *                      data-result (ok | timeout | refused | error), data-who
 *   <action>-<id>      a worker action's <button> (drain-<id>, undrain-<id>);
 *                      aria-disabled="true" when the state does not allow it
 *   skip-link          the link to the workers table, first in the tab order
 *   versions
 */

import { Actions } from "./actions.js";
import { AuditPanel } from "./audit.js";
import {
  applyLoad,
  applyStatus,
  forgetStatus,
  renderLoadAge,
  renderPauseState,
  toggleOperations,
} from "./generation.js";
import { StackHistoryChart } from "./history.js";
import { access, clock, setConnection, showResult, showTokenPanel, ui } from "./page.js";
import { adoptFragmentToken, api, apiUrl, authHeaders, store } from "./session.js";
import { EventFeed } from "./sse.js";
import { StatsPoller } from "./stats.js";
import { sparkColours } from "./throughput.js";
import { WorkerTable } from "./workers.js";

const TICK_MS = 500;
/** The worker event changes that can move a row (live by id, then dead). */
const ORDER_CHANGES = new Set(["registered", "departed", "removed"]);

const workers = new WorkerTable((row, command, button) => actions.workerAction(row, command, button));
const actions = new Actions({ workers, onAuthFailure: handleAuthFailure });
const audit = new AuditPanel();
const stats = new StatsPoller((page) => workers.applyStats(page));
const history = new StackHistoryChart();

function setRole(role) {
  access.role = role;
  ui.viewerNote.hidden = role !== "viewer";
  actions.refresh();
}

function handleAuthFailure(answer) {
  if (answer.status === 401) {
    store.clear();
    feed.stop();
    stats.stop();
    history.stop();
    setConnection("unauthorized");
    showTokenPanel("The admin app refused the token (401). Enter a valid token.");
  } else if (answer.status === 403) {
    setRole("viewer");
  }
}

// ---------------------------------------------------------------- events

const eventHandlers = {
  snapshot(payload) {
    workers.replace(payload.workers);
    applyStatus(payload.status);
  },
  worker(payload) {
    if (payload.change === "removed" && payload.worker?.id) workers.remove(payload.worker.id);
    else workers.upsert(payload.worker);
    // Only a new row, or one turning dead or back, can move: each heartbeat's "updated"
    // (a thousand a second with a thousand workers) must not sort the table again.
    if (ORDER_CHANGES.has(payload.change)) workers.order();
  },
  pause(payload) {
    applyStatus(payload.status);
  },
  load(payload) {
    applyLoad(payload.load);
  },
  audit(payload) {
    audit.add(payload);
  },
  router(payload) {
    if (payload.reachable) setConnection("live");
    else setConnection("unreachable", { since: payload.since, error: payload.error ?? "" });
  },
};

const feed = new EventFeed({
  url: () => apiUrl("api/events"),
  headers: authHeaders,
  onEvent(type, payload) {
    const handler = eventHandlers[type];
    if (handler && payload && typeof payload === "object") handler(payload);
  },
  onConnection(kind, delay, failure) {
    if (kind === "retrying" && failure?.code === "router_unavailable") {
      setConnection("unreachable", { error: failure.message, retryMs: delay });
      return;
    }
    // While the router is unreachable, a new attempt is no news until it succeeds.
    if (kind === "connecting" && ui.connection.dataset.connection === "unreachable") return;
    setConnection(kind, delay);
    if (kind === "live") {
      ui.tokenPanel.hidden = true;
      ui.signOut.hidden = false;
      audit.load();
    }
  },
  onUnauthorized(status, body) {
    const message = body?.error?.message ? ` (${body.error.message})` : "";
    store.clear();
    stats.stop();
    history.stop();
    setConnection("unauthorized");
    showTokenPanel(`The admin app refused the token: ${status}${message}. Enter a valid token.`);
  },
});

// ---------------------------------------------------------------- the token

function connect() {
  ui.tokenPanel.hidden = true;
  ui.signOut.hidden = false;
  setRole("unknown");
  feed.start();
  stats.start();
  history.start();
  learnRole();
  actions.load();
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
  stats.stop();
  history.stop();
  history.clear();
  store.clear();
  workers.replace([]);
  audit.clear();
  forgetStatus();
  setConnection("idle");
  showResult("info", "Token forgotten.");
  showTokenPanel();
}

// ---------------------------------------------------------------- start

function tick() {
  workers.tick(clock.now(), sparkColours());
  renderPauseState();
  renderLoadAge();
}

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
  ui.operationsToggle.addEventListener("click", toggleOperations);
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
