/* The page's parts, and the few ways every other module changes them. */

import { clockTime, isoTime } from "./format.js";

export const $ = (selector, root = document) => root.querySelector(selector);
export const byTestId = (id, root = document) => root.querySelector(`[data-testid="${id}"]`);

/** Why an operator's control is unavailable to a viewer's token. */
export const VIEWER_WHY = "this token can view but not operate";

export const ui = {
  connection: byTestId("connection"),
  connectionText: $(".connection-text"),
  connectionDetail: byTestId("connection-detail"),
  signOut: byTestId("sign-out"),
  tokenPanel: byTestId("token-panel"),
  tokenForm: byTestId("token-form"),
  tokenInput: byTestId("token-input"),
  tokenError: byTestId("token-error"),
  pauseState: byTestId("pause-state"),
  pauseTimeout: byTestId("pause-timeout"),
  continueButton: byTestId("continue-button"),
  viewerNote: byTestId("viewer-note"),
  result: byTestId("op-result"),
  operations: byTestId("operations"),
  operationsEmpty: byTestId("operations-empty"),
  operationsToggle: byTestId("operations-toggle"),
  engineLive: byTestId("engine-live"),
  engineActions: byTestId("engine-actions"),
  loadRunning: byTestId("load-running"),
  loadWaiting: byTestId("load-waiting"),
  loadWeights: byTestId("load-weights"),
  loadUsage: byTestId("load-usage"),
  usageMeter: $("#usage-meter"),
  loadAge: byTestId("load-age"),
  workerBody: $("[data-testid='workers'] tbody"),
  workerCount: byTestId("worker-count"),
  workersEmpty: byTestId("workers-empty"),
  statsWindow: byTestId("stats-window"),
  history: {
    requests: byTestId("history-requests"),
    tokens: byTestId("history-tokens"),
    latency: byTestId("history-latency"),
    requestsNow: byTestId("history-requests-now"),
    tokensNow: byTestId("history-tokens-now"),
    latencyNow: byTestId("history-latency-now"),
    range: byTestId("history-range"),
    note: byTestId("history-note"),
  },
  auditBody: $("[data-testid='audit'] tbody"),
  auditCount: byTestId("audit-count"),
  auditEmpty: byTestId("audit-empty"),
  auditTemplate: $("#audit-row-template"),
  versions: byTestId("versions"),
  rowTemplate: $("#worker-row-template"),
  operationTemplate: $("#operation-template"),
};

/** Server time, estimated from worker views (last heartbeat at + seconds since). */
export const clock = {
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

export function showResult(kind, text, status = "") {
  ui.result.dataset.kind = kind;
  ui.result.dataset.status = String(status);
  ui.result.textContent = text;
}

/** The connection as the header shows it. */
const connection = { kind: "idle", retryMs: 0, since: null, error: "" };

/**
 * kind: idle | connecting | live | retrying | unauthorized | unreachable (the admin app
 * answers but the router does not). detail: the retry delay in ms (retrying), or
 * {since, error, retryMs} (unreachable: since when, in Unix seconds, and why).
 */
export function setConnection(kind, detail) {
  connection.kind = kind;
  connection.retryMs = kind === "retrying" ? (detail ?? 0) : (detail?.retryMs ?? 0);
  if (kind === "unreachable") {
    // A later refusal of the stream keeps the since a router event gave, if any.
    if (Number.isFinite(detail?.since)) connection.since = detail.since;
    connection.error = detail?.error ?? connection.error;
  } else {
    connection.since = null;
    connection.error = "";
  }
  ui.connection.dataset.connection = kind;
  document.body.dataset.stale = kind === "live" ? "false" : "true";
  renderConnection();
}

/** Set an element's text only when it changes (a live region announces every change). */
function say(element, text) {
  if (element.textContent !== text) element.textContent = text;
}

function renderConnection() {
  const { kind, retryMs, since, error } = connection;
  const retry = `${Math.max(1, Math.round(retryMs / 1000))} s`;
  const texts = {
    idle: "Not connected",
    connecting: "Connecting…",
    live: "Live",
    retrying: `Reconnecting in ${retry}`,
    unauthorized: "Token refused",
  };
  let text = texts[kind] ?? kind;
  if (kind === "unreachable") {
    const when = Number.isFinite(since) ? ` since ${clockTime(since)}` : "";
    text = `Router unreachable${when}${retryMs ? `; retrying in ${retry}` : ""}`;
    ui.connection.dataset.since = Number.isFinite(since) ? String(since) : "";
    if (Number.isFinite(since)) ui.connection.title = isoTime(since);
  } else {
    delete ui.connection.dataset.since;
    ui.connection.removeAttribute("title");
  }
  say(ui.connectionText, text);
  ui.connectionDetail.hidden = kind !== "unreachable";
  say(
    ui.connectionDetail,
    kind === "unreachable"
      ? `The admin app cannot reach the router${error ? `: ${error}` : ""}. ` +
          "The figures below are the last ones it saw; actions will fail until it answers."
      : "",
  );
}

/** aria-disabled (not disabled) keeps a pressed button focused when it turns unavailable. */
export function setAvailable(button, available, why = "") {
  button.setAttribute("aria-disabled", available ? "false" : "true");
  if (why) button.title = why;
  else button.removeAttribute("title");
}

export function showTokenPanel(message) {
  ui.tokenPanel.hidden = false;
  ui.signOut.hidden = true;
  ui.tokenError.hidden = !message;
  ui.tokenError.textContent = message ?? "";
  ui.tokenInput.value = "";
  ui.tokenInput.focus();
}

/** Run work() with button marked busy; a second press while it runs does nothing. */
export async function busy(button, work) {
  if (button.getAttribute("aria-busy") === "true") return;
  button.setAttribute("aria-busy", "true");
  try {
    await work();
  } finally {
    button.removeAttribute("aria-busy");
  }
}

/** What this token may do: "operator" | "viewer" | "unknown" (from api/whoami, or a 403). */
export const access = {
  role: "unknown",
  /** Whether a catalogue command is open to this token (unknown: let the API decide). */
  allows(command) {
    return command.role !== "operator" || this.role !== "viewer";
  },
};
