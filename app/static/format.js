/* How the console writes times, rates and lists. */

/** "just now", "12 s ago", "3 min ago", "2 h ago", "1 d ago"; "—" when unknown. */
export function relativeSeconds(seconds) {
  if (!Number.isFinite(seconds)) return "—";
  const s = Math.max(0, seconds);
  if (s < 1) return "just now";
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/* Fixed parts in a fixed order, whatever the browser's language: a time read off the
   console is compared with logs, so it carries its date and its zone. */
const CLOCK = new Intl.DateTimeFormat("en-US", {
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hourCycle: "h23",
  timeZoneName: "short",
});

/** A Unix time as the browser's local date, 24 h clock and zone: "2026-12-07 13:05:12 UTC"
 *  ("GMT+1", "PST", ... elsewhere); "" when unknown. */
export function clockTime(unixSeconds) {
  if (!Number.isFinite(unixSeconds) || unixSeconds <= 0) return "";
  const part = {};
  for (const { type, value } of CLOCK.formatToParts(new Date(unixSeconds * 1000))) part[type] = value;
  return `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}:${part.second} ${part.timeZoneName}`;
}

export function isoTime(unixSeconds) {
  return new Date(unixSeconds * 1000).toISOString();
}

/** "2 ms" under a second, else "1.25 s". */
export function duration(seconds) {
  if (!Number.isFinite(seconds)) return "";
  return seconds < 1 ? `${Math.round(seconds * 1000)} ms` : `${seconds.toFixed(2)} s`;
}

/** A per-second rate: "0.5/s", "42/s", "1.2k/s"; "—" when unknown. */
export function rate(value) {
  if (value === null || !Number.isFinite(value)) return "—";
  if (value >= 1000) return `${(value / 1000).toFixed(1)}k/s`;
  if (value >= 10) return `${Math.round(value)}/s`;
  return `${value.toFixed(1)}/s`;
}

/** "a, b, c"; "" for an empty or missing list. */
export function names(list) {
  return Array.isArray(list) && list.length ? list.join(", ") : "";
}

/**
 * One collator for every comparison: localeCompare with options builds a collator per
 * call, which made sorting a thousand workers' rows take seconds.
 */
const NATURAL = new Intl.Collator(undefined, { numeric: true });

/** Sort order for ids that carry numbers: w2 before w10. */
export function naturalOrder(a, b) {
  return NATURAL.compare(a, b);
}
