/*
 * Server-sent events over fetch(): an EventSource cannot send an Authorization header,
 * so the console reads GET api/events as a stream and parses it here.
 */

/**
 * Incremental text/event-stream parser: feed() it decoded text in any chunking; it calls
 * onEvent(type, data) for each event a blank line ends. Lines end with \n, \r\n or \r;
 * ":" lines are comments; several "data" lines join with \n; an event with no data is
 * not dispatched; "id" and "retry" are ignored (a reconnect starts with a snapshot).
 */
export class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.type = "";
    this.data = [];
  }

  feed(text) {
    this.buffer += text;
    const eol = /\r\n|\r|\n/g;
    let start = 0;
    for (;;) {
      eol.lastIndex = start;
      const found = eol.exec(this.buffer);
      if (found === null) break;
      // A \r that ends the buffer may be the first half of a \r\n split across chunks.
      if (found[0] === "\r" && found.index === this.buffer.length - 1) break;
      this.line(this.buffer.slice(start, found.index));
      start = found.index + found[0].length;
    }
    this.buffer = this.buffer.slice(start);
  }

  line(text) {
    if (text === "") {
      if (this.data.length > 0) this.onEvent(this.type || "message", this.data.join("\n"));
      this.type = "";
      this.data = [];
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
  }
}

/** Waits between reconnects, in ms (each +-20 %); the last one repeats. */
export const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 15000];
/** The app sends a keep-alive every 15 s; this much silence means the stream is dead. */
export const STREAM_IDLE_MS = 45000;

/**
 * The live feed: GET `url` with `headers()`, reconnecting with backoff until stop().
 *
 * Callbacks: onEvent(type, payload) with each event's JSON; onConnection(kind, delayMs,
 * failure) with kind connecting | live (a snapshot arrived) | retrying, and for retrying
 * why the last attempt ended: {status, code, message} (status 0: no answer or the stream
 * broke; code and message from the app's error body when it refused the stream);
 * onUnauthorized(status, body) on 401 or 403, after which the feed stops until start()
 * is called again.
 */
export class EventFeed {
  constructor({ url, headers, onEvent, onConnection, onUnauthorized }) {
    this.url = url;
    this.headers = headers;
    this.onEvent = onEvent;
    this.onConnection = onConnection;
    this.onUnauthorized = onUnauthorized;
    this.generation = 0;
    this.controller = null;
    this.wake = null;
  }

  start() {
    this.stop();
    this.run(++this.generation);
  }

  stop() {
    this.generation++;
    this.controller?.abort();
    this.controller = null;
    this.retryNow();
  }

  /** Cut a backoff wait short (the browser is back online). */
  retryNow() {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  async run(generation) {
    let attempt = 0;
    const current = () => generation === this.generation;
    while (current()) {
      this.onConnection("connecting", 0);
      const controller = new AbortController();
      this.controller = controller;
      let failure = { status: 0, code: "network", message: "the event stream ended" };
      try {
        const response = await fetch(this.url(), {
          headers: { Accept: "text/event-stream", ...this.headers() },
          cache: "no-store",
          credentials: "omit",
          signal: controller.signal,
        });
        if (response.status === 401 || response.status === 403) {
          const body = await response.json().catch(() => null);
          if (current()) this.onUnauthorized(response.status, body);
          return;
        }
        if (!response.ok || !response.body) {
          const error = (await response.json().catch(() => null))?.error;
          failure = {
            status: response.status,
            code: error?.code ?? `http_${response.status}`,
            message: error?.message ?? response.statusText,
          };
          throw new Error(`HTTP ${response.status}`);
        }
        await this.read(response.body, controller, current, () => {
          attempt = 0;
        });
      } catch (err) {
        if (!current()) return;
        console.debug("switchboard console: event stream ended:", err);
      } finally {
        controller.abort();
      }
      if (!current()) return;
      const base = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
      const delay = Math.round(base * (0.8 + Math.random() * 0.4));
      attempt++;
      this.onConnection("retrying", delay, failure);
      await new Promise((resolve) => {
        const timer = window.setTimeout(resolve, delay);
        this.wake = () => {
          window.clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  async read(stream, controller, current, onSnapshot) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let idle = 0;
    const arm = () => {
      window.clearTimeout(idle);
      idle = window.setTimeout(() => controller.abort(), STREAM_IDLE_MS);
    };
    const parser = new SseParser((type, data) => {
      if (!current()) return;
      let payload;
      try {
        payload = JSON.parse(data);
      } catch {
        console.warn("switchboard console: an event that is not JSON:", type, data);
        return;
      }
      if (type === "snapshot") {
        onSnapshot();
        this.onConnection("live", 0);
      }
      this.onEvent(type, payload);
    });
    arm();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || !current()) break;
        arm();
        parser.feed(decoder.decode(value, { stream: true }));
      }
    } finally {
      window.clearTimeout(idle);
      reader.releaseLock();
    }
  }
}
