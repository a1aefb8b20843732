/*
 * Per-worker throughput: rows received per second over the last minute, from the
 * rows_received counts workers report on their heartbeats, drawn on a <canvas>.
 */

export const SPARK_SECONDS = 60;
/** Workers heartbeat (and so report their counts) about once a second. */
export const HEARTBEAT_S = 1.0;

/**
 * A worker's rows_received over time (server seconds, from its heartbeats). The count
 * between two samples is taken as linear, so each one-second bin's rate is the count's
 * rise across it. Counts arrive only when they change; a gap longer than two heartbeat
 * intervals therefore means the count stood still until the interval before the new
 * sample. A count that goes down (a restarted worker) starts the history again.
 */
export class ThroughputHistory {
  constructor() {
    this.samples = [];
  }

  observe(at, count) {
    if (!Number.isFinite(at) || !Number.isFinite(count)) return;
    const last = this.samples[this.samples.length - 1];
    if (last !== undefined) {
      if (at <= last.at) {
        if (at === last.at) last.count = count;
        return;
      }
      if (count < last.count) this.samples = [];
      else if (at - last.at > 2 * HEARTBEAT_S + 0.5) {
        this.samples.push({ at: at - HEARTBEAT_S, count: last.count });
      }
    }
    this.samples.push({ at, count });
    const horizon = at - SPARK_SECONDS - 10;
    while (this.samples.length > 2 && this.samples[1].at < horizon) this.samples.shift();
  }

  /** The count at server time `at`: null before the first sample, flat after the last. */
  countAt(at) {
    const s = this.samples;
    if (s.length === 0 || at < s[0].at) return null;
    const newest = s[s.length - 1];
    if (at >= newest.at) return newest.count;
    let lo = 0;
    let hi = s.length - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (s[mid].at <= at) lo = mid;
      else hi = mid;
    }
    const a = s[lo];
    const b = s[hi];
    return a.count + ((b.count - a.count) * (at - a.at)) / (b.at - a.at);
  }

  /** Rows per second in each of the SPARK_SECONDS one-second bins ending at `end`
   *  (null where the history does not reach). */
  bins(end) {
    const out = [];
    for (let i = SPARK_SECONDS; i > 0; i--) {
      const a = this.countAt(end - i);
      const b = this.countAt(end - i + 1);
      out.push(a === null || b === null ? null : Math.max(0, b - a));
    }
    return out;
  }
}

/** The sparkline colours, from the stylesheet's variables (light or dark scheme). */
export function sparkColours() {
  const style = window.getComputedStyle(document.documentElement);
  const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  return {
    line: read("--spark-line", "#2f5fb3"),
    fill: read("--spark-fill", "rgba(47,95,179,0.14)"),
    base: read("--spark-base", "#c9ced8"),
  };
}

/**
 * Draw `values` (nulls are gaps) on `canvas` as a filled line over a baseline, scaled to
 * its own peak (at least 1), sharp at any devicePixelRatio. Returns the peak. `size`
 * ({width, height} in CSS pixels) spares reading the canvas's own: a read after a write
 * to the page forces a layout, and a table of a thousand charts read one by one
 * between writes took seconds per frame.
 */
export function drawSparkline(canvas, values, colours, size = null) {
  const ratio = window.devicePixelRatio || 1;
  const width = size?.width || canvas.clientWidth || 96;
  const height = size?.height || canvas.clientHeight || 24;
  if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const known = values.filter((v) => v !== null);
  const peak = Math.max(1, ...known);
  const ctx = canvas.getContext("2d");
  if (!ctx) return peak;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const pad = 2;
  const base = height - pad;
  ctx.strokeStyle = colours.base;
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(0, base + 0.5);
  ctx.lineTo(width, base + 0.5);
  ctx.stroke();
  const step = width / Math.max(1, values.length - 1);
  // Headroom, so a steady rate is a line below the top edge, not glued to it.
  const y = (v) => base - (v / (peak * 1.15)) * (base - pad);
  let run = [];
  const flush = () => {
    if (run.length === 0) return;
    ctx.beginPath();
    ctx.moveTo(run[0][0], base);
    for (const [px, py] of run) ctx.lineTo(px, py);
    ctx.lineTo(run[run.length - 1][0], base);
    ctx.closePath();
    ctx.fillStyle = colours.fill;
    ctx.fill();
    ctx.beginPath();
    run.forEach(([px, py], i) => (i === 0 ? ctx.moveTo(px, py) : ctx.lineTo(px, py)));
    ctx.strokeStyle = colours.line;
    ctx.lineWidth = 1.5;
    ctx.lineJoin = "round";
    ctx.stroke();
    run = [];
  };
  values.forEach((v, i) => {
    if (v === null) flush();
    else run.push([i * step, y(v)]);
  });
  flush();
  return peak;
}
