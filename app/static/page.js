/* The page's parts, and the few ways every other module changes them. */

export const $ = (selector, root = document) => root.querySelector(selector);
export const byTestId = (id, root = document) => root.querySelector(`[data-testid="${id}"]`);

/** Why an operator's control is unavailable to a viewer's token. */
export const VIEWER_WHY = "this token can view but not operate";

export const ui = {
  connection: byTestId("connection"),
  connectionText: $(".connection-text"),
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
  engineLive: byTestId("engine-live"),
  engineActions: byTestId("engine-actions"),
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

export function setConnection(kind, detail) {
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
