/*
 * Each worker's errors and latency over the last minute: GET api/worker_stats, read every
 * few seconds while a token is set (the admin app samples the workers' metrics every 5 s,
 * so a faster read would show nothing new). It answers while the router does not.
 */

import { duration } from "./format.js";
import { ui } from "./page.js";
import { api } from "./session.js";

export const STATS_POLL_MS = 5000;

/** "last 60 s", "last 23 s" or "since the workers started", for a WorkerStatsPage. */
function coverage(page) {
  if (page.covered_s === null || page.covered_s === undefined) return "since the workers started";
  return `last ${Math.round(Math.min(page.covered_s, page.window_s))} s`;
}

/** An error count as the table shows it: "0", or "3 (2.5%)". */
export function errorText(stats) {
  if (!stats) return "—";
  if (!stats.errors) return "0";
  const ratio = Number.isFinite(stats.error_ratio) ? ` (${(stats.error_ratio * 100).toFixed(1)}%)` : "";
  return `${stats.errors}${ratio}`;
}

/** "120 ms / 480 ms", or "—" without generations. */
export function latencyText(stats) {
  if (!stats || !Number.isFinite(stats.latency_p50_s)) return "—";
  return `${duration(stats.latency_p50_s)} / ${duration(stats.latency_p95_s)}`;
}

export class StatsPoller {
  /** onStats(page): a WorkerStatsPage read from the API. */
  constructor(onStats) {
    this.onStats = onStats;
    this.timer = 0;
    this.reads = 0;
  }

  start() {
    this.stop();
    const read = ++this.reads;
    const poll = async () => {
      const answer = await api("GET", "api/worker_stats");
      if (read !== this.reads) return;
      if (answer.ok && answer.body && typeof answer.body.workers === "object") {
        this.show(answer.body);
      }
      this.timer = window.setTimeout(poll, STATS_POLL_MS);
    };
    poll();
  }

  stop() {
    this.reads++;
    window.clearTimeout(this.timer);
  }

  show(page) {
    this.onStats(page);
    ui.statsWindow.dataset.available = String(Boolean(page.available));
    if (!page.available) {
      ui.statsWindow.textContent =
        "Errors and latency are not available: the admin app reads no metrics directory.";
    } else if (Object.keys(page.workers).length === 0) {
      ui.statsWindow.textContent = "Errors and latency: no worker has written metrics yet.";
    } else {
      ui.statsWindow.textContent =
        `Errors (5xx answers) and latency (p50 / p95 of finished generations, arrival to ` +
        `last token): ${coverage(page)}, from the workers' metrics.`;
    }
  }
}
