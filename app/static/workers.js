/*
 * The workers table: one row per worker, live ones by id then departed ones, each with
 * its throughput chart and the worker actions the command catalogue offers.
 */

import { clockTime, duration, isoTime, naturalOrder, rate, relativeSeconds } from "./format.js";
import { $, access, clock, setAvailable, ui, VIEWER_WHY } from "./page.js";
import { errorText, latencyText } from "./stats.js";
import { drawSparkline, SPARK_SECONDS, ThroughputHistory } from "./throughput.js";

/** Row counts ride on heartbeats (1 s); the chart's right edge waits for them. */
const SPARK_LAG_S = 1.5;
/** A live worker whose last heartbeat is older than this is shown as late. */
const STALE_HEARTBEAT_S = 5;

/** "a, b or c". */
function either(words) {
  return words.length > 1 ? `${words.slice(0, -1).join(", ")} or ${words.at(-1)}` : words[0];
}

class WorkerRow {
  constructor(id, history) {
    this.id = id;
    this.history = history;
    this.worker = null;
    /** command name -> {command, button}, from the catalogue's worker actions. */
    this.actions = new Map();
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
    this.errors = $(".errors", this.tr);
    this.latency = $(".latency", this.tr);
    this.safe = $(".safe", this.tr);
    this.actionBox = $(".actions", this.tr);
    this.idText.textContent = id;
    this.idText.title = id;
    this.badge.dataset.testid = `state-${id}`;
    this.inflight.dataset.testid = `inflight-${id}`;
    this.heartbeat.dataset.testid = `heartbeat-${id}`;
    this.requests.dataset.testid = `requests-${id}`;
    this.canvas.dataset.testid = `spark-${id}`;
    this.safe.dataset.testid = `safe-${id}`;
    this.errors.dataset.testid = `errors-${id}`;
    this.latency.dataset.testid = `latency-${id}`;
    this.showStats(null);
  }

  /** The worker's WorkerStats over the window (null: none known). */
  showStats(stats) {
    this.errors.textContent = errorText(stats);
    this.errors.dataset.errors = stats ? String(stats.errors) : "";
    this.errors.dataset.requests = stats ? String(stats.requests) : "";
    this.errors.dataset.bad = String(Boolean(stats?.errors));
    this.errors.title = stats
      ? `${stats.errors} answered 5xx and ${stats.refused} 4xx, of ${stats.requests} requests`
      : "";
    this.latency.textContent = latencyText(stats);
    this.latency.dataset.p50 = stats?.latency_p50_s ?? "";
    this.latency.dataset.p95 = stats?.latency_p95_s ?? "";
    this.latency.title =
      stats && stats.generations
        ? `p50 / p95 of ${stats.generations} generations; mean ${duration(stats.latency_mean_s)}`
        : "";
  }

  /** One button per worker action of the catalogue; a press calls onAction(row, command). */
  setActions(commands, onAction) {
    this.actions.clear();
    const buttons = commands.map((command) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = `small ${command.name}`;
      button.textContent = command.console.label;
      button.dataset.testid = `${command.name}-${this.id}`;
      button.setAttribute("aria-label", `${command.console.label} ${this.id}`);
      button.addEventListener("click", () => onAction(this, command, button));
      this.actions.set(command.name, { command, button });
      return button;
    });
    this.actionBox.replaceChildren(...buttons);
    this.refreshButtons();
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

  /** Whether the worker's state allows ``command`` (a worker action of the catalogue). */
  applies(command) {
    return command.console.states.includes(this.worker?.state ?? "unknown");
  }

  refreshButtons() {
    for (const { command, button } of this.actions.values()) {
      const allowed = access.allows(command);
      const applies = this.applies(command);
      const why = !allowed ? VIEWER_WHY : applies ? "" : `only while ${either(command.console.states)}`;
      setAvailable(button, allowed && applies, why);
    }
  }

  tick(now, colours, size = null) {
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
    if (colours) this.drawSpark(now, colours, size);
  }

  drawSpark(now, colours, size = null) {
    const values = this.history.bins(now - SPARK_LAG_S);
    if (values.length === 0) return;
    const peak = drawSparkline(this.canvas, values, colours, size);
    const latest = [...values].reverse().find((v) => v !== null) ?? null;
    this.rate.textContent = rate(latest);
    this.canvas.dataset.rate = latest === null ? "" : String(latest);
    this.canvas.setAttribute(
      "aria-label",
      `${this.id} rows received per second, last ${SPARK_SECONDS} s: now ${rate(latest)}, peak ${rate(peak)}`,
    );
  }
}

/** Every worker's row; onAction(row, command, button) runs a worker action. */
export class WorkerTable {
  constructor(onAction) {
    this.onAction = onAction;
    this.rows = new Map();
    this.actions = [];
    /** The latest WorkerStats by worker id. */
    this.stats = {};
  }

  /** The catalogue's worker actions, for every row now and every row to come. */
  setActions(commands) {
    this.actions = commands;
    for (const row of this.rows.values()) row.setActions(commands, this.onAction);
  }

  upsert(worker) {
    if (!worker || typeof worker.id !== "string") return;
    clock.observe(worker);
    let row = this.rows.get(worker.id);
    if (row === undefined) {
      row = new WorkerRow(worker.id, new ThroughputHistory());
      row.setActions(this.actions, this.onAction);
      row.showStats(this.stats[worker.id] ?? null);
      this.rows.set(worker.id, row);
    }
    const at = Number.isFinite(worker.last_heartbeat_at) ? worker.last_heartbeat_at : clock.now();
    row.history.observe(at, worker.rows_received);
    row.update(worker);
  }

  remove(id) {
    this.rows.get(id)?.tr.remove();
    this.rows.delete(id);
  }

  replace(workers) {
    const seen = new Set();
    for (const worker of workers ?? []) {
      this.upsert(worker);
      seen.add(worker.id);
    }
    for (const id of [...this.rows.keys()]) if (!seen.has(id)) this.remove(id);
    this.order();
  }

  /** Put rows in order (live by id, then dead) moving only when the order changed. */
  order() {
    const dead = (row) => (row.worker?.state === "dead" ? 1 : 0);
    const rows = [...this.rows.values()].sort(
      (a, b) => dead(a) - dead(b) || naturalOrder(a.id, b.id),
    );
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

  refreshButtons() {
    for (const row of this.rows.values()) row.refreshButtons();
  }

  /** A WorkerStatsPage: each row shows its worker's figures, or none. */
  applyStats(page) {
    this.stats = page?.workers ?? {};
    for (const [id, row] of this.rows) row.showStats(this.stats[id] ?? null);
  }

  tick(now, colours) {
    // Every chart has the same size: read it once, before any row writes (each row
    // reading it after the rows before it wrote forced a layout of the whole table).
    const first = this.rows.values().next().value;
    const size = colours && first
      ? { width: first.canvas.clientWidth || 96, height: first.canvas.clientHeight || 24 }
      : null;
    for (const row of this.rows.values()) row.tick(now, colours, size);
  }
}
