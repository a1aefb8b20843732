/*
 * The audit trail panel: the latest mutations sent to this admin app (who, what, on what,
 * with what result), newest first. It reads GET api/audit when the stream goes live (a
 * new token, a reconnect) and adds each `audit` event of the stream as it comes.
 */

import { clockTime, isoTime } from "./format.js";
import { $, ui } from "./page.js";
import { api } from "./session.js";

/** Rows the panel shows; older ones leave it (GET api/audit keeps more). */
export const AUDIT_ROWS = 50;

/** The badge colour of a result: the text says it, colour only helps. */
const RESULT_KIND = { ok: "ok", timeout: "warning", refused: "warning", error: "bad" };

export class AuditPanel {
  constructor() {
    /** seq -> {entry, tr}, for the entries shown. */
    this.rows = new Map();
    this.loads = 0;
  }

  /** Read the latest records again (they replace what is shown). */
  async load() {
    const load = ++this.loads;
    const answer = await api("GET", `api/audit?limit=${AUDIT_ROWS}`);
    if (load !== this.loads || !answer.ok || !Array.isArray(answer.body?.records)) return;
    this.clear();
    // Oldest first, so that each add() puts the next newer one on top.
    for (const entry of [...answer.body.records].reverse()) this.add(entry);
  }

  clear() {
    this.rows.clear();
    ui.auditBody.replaceChildren();
    this.render();
  }

  /** One AuditEntry (from the API or an `audit` event); a seq already shown is skipped. */
  add(entry) {
    if (!entry || !Number.isFinite(entry.seq) || this.rows.has(entry.seq)) return;
    const tr = this.row(entry);
    // Rows are newest first: this one goes before the first older one.
    const older = [...ui.auditBody.children].find((row) => Number(row.dataset.seq) < entry.seq);
    ui.auditBody.insertBefore(tr, older ?? null);
    this.rows.set(entry.seq, { entry, tr });
    this.trim();
    this.render();
  }

  row(entry) {
    const tr = ui.auditTemplate.content.firstElementChild.cloneNode(true);
    tr.dataset.testid = `audit-row-${entry.seq}`;
    tr.dataset.seq = String(entry.seq);
    tr.dataset.action = entry.action ?? "";
    tr.dataset.result = entry.result ?? "";
    tr.dataset.who = entry.who ?? "";
    const time = $(".audit-time", tr);
    if (Number.isFinite(entry.time)) {
      time.dateTime = isoTime(entry.time);
      time.textContent = clockTime(entry.time);
      time.title = isoTime(entry.time);
    }
    $(".audit-who", tr).textContent = entry.who ?? "—";
    $(".audit-action", tr).textContent = entry.action ?? "";
    $(".audit-target", tr).textContent = entry.target ?? "";
    const result = $(".audit-result", tr);
    result.textContent = entry.result ?? "";
    result.dataset.kind = RESULT_KIND[entry.result] ?? "";
    const status = $(".audit-status", tr);
    status.textContent = entry.status === null || entry.status === undefined ? "—" : String(entry.status);
    const detail = [entry.reason, entry.detail].filter(Boolean).join(": ");
    const cell = $(".audit-detail", tr);
    cell.textContent = detail;
    cell.title = [detail, entry.client ? `from ${entry.client}` : ""].filter(Boolean).join("\n");
    return tr;
  }

  /** Keep the newest AUDIT_ROWS rows. */
  trim() {
    const seqs = [...this.rows.keys()].sort((a, b) => b - a);
    for (const seq of seqs.slice(AUDIT_ROWS)) {
      this.rows.get(seq).tr.remove();
      this.rows.delete(seq);
    }
  }

  render() {
    ui.auditEmpty.hidden = this.rows.size > 0;
    ui.auditCount.textContent = this.rows.size ? `(${this.rows.size} latest)` : "";
  }
}
