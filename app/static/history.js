/*
 * The whole stack's throughput and latency over the last 15 minutes: GET api/history when
 * a token is set (the admin app keeps its samples, so the chart has its history as soon
 * as the page opens), then GET api/history?after=<the newest sample's time> every 5 s
 * (the admin app samples that often), each new sample appended and the oldest ones
 * dropped past the app's capacity. Three charts share one time axis: requests/s,
 * tokens/s, and latency p50 (solid) and p95 (dashed). It answers while the router does not.
 */

import { clockTime, duration, rate } from "./format.js";
import { ui } from "./page.js";
import { api } from "./session.js";

export const HISTORY_POLL_MS = 5000;
/** Samples further apart than this many intervals are not joined by a line. */
const GAP_INTERVALS = 2.5;

/** What each chart draws, from a StackSample. */
const CHARTS = {
  requests: { lines: [{ value: (s) => s.requests_per_s }], text: (v) => rate(v) },
  tokens: { lines: [{ value: (s) => s.tokens_per_s }], text: (v) => rate(v) },
  latency: {
    lines: [{ value: (s) => s.latency_p50_s }, { value: (s) => s.latency_p95_s, dash: [4, 3] }],
    text: (v) => (Number.isFinite(v) ? duration(v) : "—"),
  },
};

function chartColours() {
  const style = window.getComputedStyle(document.documentElement);
  const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  return { line: read("--spark-line", "#2f5fb3"), base: read("--spark-base", "#c9ced8") };
}

/** Size `canvas` to its box at the device's pixel ratio; its 2D context, or null. */
function fitCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 300;
  const height = canvas.clientHeight || 72;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const ctx = canvas.getContext("2d");
  if (ctx) ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return { ctx, width, height };
}

/**
 * Draw each line's points ({at, v}; v null is a gap) on `canvas` over [start, end]
 * seconds, scaled from 0 to `peak`. Returns how many points it drew.
 */
function drawLines(canvas, lines, start, end, peak, maxGap, colours) {
  const { ctx, width, height } = fitCanvas(canvas);
  if (!ctx) return 0;
  ctx.clearRect(0, 0, width, height);
  const pad = 3;
  const base = height - pad;
  ctx.strokeStyle = colours.base;
  ctx.lineWidth = 1;
  ctx.setLineDash([]);
  ctx.beginPath();
  ctx.moveTo(0, base + 0.5);
  ctx.lineTo(width, base + 0.5);
  ctx.stroke();
  const x = (at) => ((at - start) / Math.max(1, end - start)) * (width - 2 * pad) + pad;
  // Headroom, so a steady rate is a line below the top edge, not glued to it.
  const y = (v) => base - (v / (peak * 1.15)) * (base - pad);
  let drawn = 0;
  for (const { points, dash } of lines) {
    ctx.strokeStyle = colours.line;
    ctx.fillStyle = colours.line;
    ctx.lineWidth = 1.5;
    ctx.lineJoin = "round";
    ctx.setLineDash(dash ?? []);
    ctx.beginPath();
    let previous = null;
    for (const { at, v } of points) {
      if (v === null || !Number.isFinite(v)) {
        previous = null;
        continue;
      }
      const joined = previous !== null && at - previous <= maxGap;
      if (joined) ctx.lineTo(x(at), y(v));
      else ctx.moveTo(x(at), y(v));
      // A lone point would draw nothing: a dot shows it.
      if (!joined) ctx.fillRect(x(at) - 1, y(v) - 1, 2, 2);
      previous = at;
      drawn++;
    }
    ctx.stroke();
  }
  ctx.setLineDash([]);
  return drawn;
}

export class StackHistoryChart {
  constructor() {
    /** StackSamples, oldest first. */
    this.samples = [];
    this.capacity = 180;
    this.intervalS = 5;
    this.available = null;
    this.timer = 0;
    this.reads = 0;
  }

  start() {
    this.stop();
    this.clear();
    const read = ++this.reads;
    const poll = async () => {
      const newest = this.samples.at(-1);
      const path = newest ? `api/history?after=${newest.at}` : "api/history";
      const answer = await api("GET", path);
      if (read !== this.reads) return;
      if (answer.ok && Array.isArray(answer.body?.samples)) this.add(answer.body);
      this.timer = window.setTimeout(poll, HISTORY_POLL_MS);
    };
    poll();
  }

  stop() {
    this.reads++;
    window.clearTimeout(this.timer);
  }

  clear() {
    this.samples = [];
    this.available = null;
    this.render();
  }

  /** A HistoryPage: its samples newer than the newest one shown are appended. */
  add(page) {
    this.available = Boolean(page.available);
    if (Number.isFinite(page.capacity) && page.capacity > 0) this.capacity = page.capacity;
    if (Number.isFinite(page.interval_s) && page.interval_s > 0) this.intervalS = page.interval_s;
    const newest = this.samples.at(-1)?.at ?? -Infinity;
    for (const sample of page.samples) {
      if (Number.isFinite(sample?.at) && sample.at > newest) this.samples.push(sample);
    }
    this.samples.sort((a, b) => a.at - b.at);
    if (this.samples.length > this.capacity) this.samples.splice(0, this.samples.length - this.capacity);
    this.render();
  }

  render() {
    const samples = this.samples;
    const end = samples.at(-1)?.at ?? Date.now() / 1000;
    const start = end - this.capacity * this.intervalS;
    const colours = chartColours();
    for (const [name, chart] of Object.entries(CHARTS)) {
      const lines = chart.lines.map(({ value, dash }) => ({
        dash,
        points: samples.map((s) => ({ at: s.at, v: value(s) ?? null })),
      }));
      const values = lines.flatMap((line) => line.points.map((p) => p.v)).filter(Number.isFinite);
      const peak = Math.max(name === "latency" ? 0.001 : 1, ...values);
      const canvas = ui.history[name];
      const drawn = drawLines(canvas, lines, start, end, peak, GAP_INTERVALS * this.intervalS, colours);
      canvas.dataset.points = String(drawn);
      const latest = chart.lines.map(({ value }) => value(samples.at(-1) ?? {}) ?? null);
      const figures = samples.length
        ? `now ${latest.map((v) => chart.text(v)).join(" / ")}, peak ${chart.text(peak)}`
        : "";
      ui.history[`${name}Now`].textContent = figures;
      canvas.setAttribute("aria-label", `${canvas.dataset.label}, last 15 minutes: ${figures || "no samples yet"}`);
    }
    ui.history.range.textContent = samples.length ? `${clockTime(start)} – ${clockTime(end)}` : "";
    ui.history.note.dataset.available = String(this.available);
    ui.history.note.textContent =
      this.available === false
        ? "Not available: the admin app reads no metrics directory."
        : samples.length
          ? `Every ${this.intervalS} s from the workers' metrics, the whole stack; ${samples.length} samples.`
          : "Waiting for the workers' metrics (a sample every 5 s)…";
  }
}
