/*
 * The console's session with the admin API: the token and the one way to call the API.
 *
 * The token comes from the URL fragment (#token=...) on load, is kept in sessionStorage
 * (this tab only) and leaves the address bar at once (history.replaceState). Every API
 * call sends it as "Authorization: Bearer <token>"; there are no cookies, so no CSRF.
 */

const TOKEN_KEY = "switchboard.console.token";

const memoryStore = new Map();

/** The token of this tab: sessionStorage, or memory when storage is refused. */
export const store = {
  get() {
    try {
      return window.sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return memoryStore.get(TOKEN_KEY) ?? null;
    }
  },
  set(token) {
    try {
      window.sessionStorage.setItem(TOKEN_KEY, token);
    } catch {
      memoryStore.set(TOKEN_KEY, token);
    }
  },
  clear() {
    try {
      window.sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage refused: the memory copy is all there is */
    }
    memoryStore.delete(TOKEN_KEY);
  },
};

/** Move a #token=... fragment into storage and out of the address bar; true if found. */
export function adoptFragmentToken() {
  const fragment = window.location.hash.replace(/^#/, "");
  if (!fragment) return false;
  const params = new URLSearchParams(fragment);
  const token = params.get("token");
  if (token === null) return false;
  params.delete("token");
  const rest = params.toString();
  const clean = window.location.pathname + window.location.search + (rest ? `#${rest}` : "");
  window.history.replaceState(window.history.state, "", clean);
  if (!token.trim()) return false;
  store.set(token.trim());
  return true;
}

/** A path of the API (no leading slash) relative to the page, so a proxy prefix holds. */
export const apiUrl = (path) => new URL(path, document.baseURI).toString();

export function authHeaders() {
  const token = store.get();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/**
 * One JSON call to the admin API. Never throws: the answer is
 * {status, ok, body, code, message}; status 0 when the app could not be reached.
 */
export async function api(method, path, body, timeoutMs = 30000) {
  const controller = new AbortController();
  const timer = window.setTimeout(() => controller.abort(), timeoutMs);
  const init = {
    method,
    headers: { Accept: "application/json", ...authHeaders() },
    cache: "no-store",
    credentials: "omit",
    signal: controller.signal,
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const response = await fetch(apiUrl(path), init);
    let parsed = null;
    try {
      parsed = await response.json();
    } catch {
      parsed = null;
    }
    const error = parsed && typeof parsed === "object" ? parsed.error : undefined;
    return {
      status: response.status,
      ok: response.ok,
      body: parsed,
      code: error?.code ?? (response.ok ? "" : `http_${response.status}`),
      message: error?.message ?? (response.ok ? "" : response.statusText),
    };
  } catch (err) {
    const aborted = err && err.name === "AbortError";
    return {
      status: 0,
      ok: false,
      body: null,
      code: aborted ? "client_timeout" : "network",
      message: aborted ? `no answer within ${Math.round(timeoutMs / 1000)} s` : String(err),
    };
  } finally {
    window.clearTimeout(timer);
  }
}
