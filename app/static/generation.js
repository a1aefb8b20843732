/*
 * The stack's state as the status shows it: the pause banner, the latest operations,
 * the engine's liveness and load, and the versions in the footer.
 */

import { clockTime, duration, isoTime, names, relativeSeconds } from "./format.js";
import { $, clock, ui } from "./page.js";

/** Operations shown until "Show all" is pressed: more would push the workers off screen. */
export const COLLAPSED_OPERATIONS = 5;
/** The router keeps its latest 20; a longer list is cut here all the same. */
const MAX_OPERATIONS = 50;

const view = {
  status: null,
  load: null,
  loadSeenAt: 0,
  allOperations: false,
};

export function renderPauseState() {
  const status = view.status;
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

function operationItem(op) {
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
}

function renderOperations() {
  const known = [...(view.status?.recent_operations ?? [])]
    .sort((a, b) => operationKey(b) - operationKey(a))
    .slice(0, MAX_OPERATIONS);
  const shown = view.allOperations ? known : known.slice(0, COLLAPSED_OPERATIONS);
  ui.operations.replaceChildren(...shown.map(operationItem));
  ui.operations.dataset.expanded = String(view.allOperations);
  ui.operations.dataset.total = String(known.length);
  // Scrollable once expanded, so it takes the focus then for the arrow keys to scroll it.
  if (view.allOperations && known.length > COLLAPSED_OPERATIONS) ui.operations.tabIndex = 0;
  else ui.operations.removeAttribute("tabindex");
  ui.operationsEmpty.hidden = known.length > 0;
  const toggle = ui.operationsToggle;
  toggle.hidden = known.length <= COLLAPSED_OPERATIONS;
  toggle.setAttribute("aria-expanded", String(view.allOperations));
  toggle.textContent = view.allOperations
    ? `Show the latest ${COLLAPSED_OPERATIONS}`
    : `Show all ${known.length}`;
}

/** "Show all" / "Show the latest 5": the whole list, or the newest few. */
export function toggleOperations() {
  view.allOperations = !view.allOperations;
  renderOperations();
}

/** Show an operation a barrier just answered, before the event stream brings it. */
export function noteOperation(op) {
  if (!op || !op.op_id || !view.status) return;
  const ops = view.status.recent_operations ?? [];
  if (ops.some((known) => known.op_id === op.op_id)) return;
  view.status = { ...view.status, recent_operations: [...ops, op] };
  renderOperations();
}

/** A Status from the API (a snapshot or a pause event). */
export function applyStatus(status) {
  if (!status || typeof status !== "object") return;
  view.status = status;
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

/** Forget the status (the token was forgotten). */
export function forgetStatus() {
  view.status = null;
  renderOperations();
}

/** A Load from the API (null before the engine's first report). */
export function applyLoad(load) {
  view.load = load ?? null;
  view.loadSeenAt = Date.now() / 1000;
  if (!load) {
    ui.loadRunning.textContent = "—";
    ui.loadWaiting.textContent = "—";
    ui.loadWeights.textContent = "—";
    ui.loadUsage.textContent = "—";
    ui.usageMeter.value = 0;
    ui.loadAge.textContent = "The engine has not reported its load.";
    return;
  }
  ui.loadRunning.textContent = Number.isFinite(load.max_running)
    ? `${load.running} / ${load.max_running}`
    : String(load.running ?? "—");
  ui.loadWaiting.textContent = String(load.waiting ?? "—");
  // The engine's own weights have no version until an update names one.
  ui.loadWeights.textContent = load.weight_version || "default (the engine's own)";
  const usage = Number(load.token_usage);
  ui.loadUsage.textContent = Number.isFinite(usage) ? `${(usage * 100).toFixed(0)}%` : "—";
  ui.usageMeter.value = Number.isFinite(usage) ? Math.min(1, Math.max(0, usage)) : 0;
  renderLoadAge();
}

export function renderLoadAge() {
  if (!view.load) return;
  const age = (view.load.age_s ?? 0) + (Date.now() / 1000 - view.loadSeenAt);
  ui.loadAge.textContent = `Reported ${relativeSeconds(age)}`;
}
