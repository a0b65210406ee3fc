// REST calls with the console's tokens, problem+json errors and entity tags.
//
// Every path is relative ("libraries?limit=50", never "/libraries"), so the console works when a
// proxy serves the whole application under a prefix such as /library/.

const READ_KEY = "library-console.read-token";
const WRITE_KEY = "library-console.api-token";
const SIGNED_KEY = "library-console.signed-token";

// sessionStorage, not localStorage: a token should not outlive the tab that was given it.
export const tokens = {
  get read() { return sessionStorage.getItem(READ_KEY) || ""; },
  get write() { return sessionStorage.getItem(WRITE_KEY) || ""; },
  /** A signed token (JWT) of the user's own: the server decides what it may do, library by library. */
  get signed() { return sessionStorage.getItem(SIGNED_KEY) || ""; },
  save(read, write, signed = this.signed) {
    for (const [key, value] of [[READ_KEY, read], [WRITE_KEY, write], [SIGNED_KEY, signed]]) {
      if (value) sessionStorage.setItem(key, value);
      else sessionStorage.removeItem(key);
    }
  },
  // A signed token is the user's identity and goes with everything; otherwise the write token
  // grants reads too, so a user who has only that one can still browse.
  get forReading() { return this.signed || this.read || this.write; },
  get forWriting() { return this.signed || this.write; },
};

/** A failed request: `status`, the problem document (when there is one) and its field errors. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.errors = Array.isArray(problem?.errors) ? problem.errors : [];
  }
}

const listeners = { unauthorized: new Set() };
/** Called with the ApiError of every 401, so one place can ask the user for a token. */
export function onUnauthorized(callback) { listeners.unauthorized.add(callback); }

/**
 * One request. `body` is sent as JSON; `version` becomes If-Match; `idempotencyKey` protects a
 * POST that the user retries. Resolves to {status, data, version}; rejects with ApiError.
 */
export async function request(method, path, { body, version, idempotencyKey, signal } = {}) {
  const headers = { Accept: "application/json" };
  const writing = method !== "GET" && method !== "HEAD";
  const token = writing ? tokens.forWriting : tokens.forReading;
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (version !== undefined && version !== null) headers["If-Match"] = `"${version}"`;
  if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
  let response;
  try {
    response = await fetch(path, {
      method, headers, signal, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, { title: "The server cannot be reached", detail: "The server cannot be reached." });
  }
  const text = response.status === 204 ? "" : await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { detail: text.slice(0, 200) }; }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    error.method = method;
    if (response.status === 401) for (const callback of listeners.unauthorized) callback(error);
    throw error;
  }
  return { status: response.status, data, version: versionOf(response.headers.get("ETag")) ?? data?.version };
}

function versionOf(etag) {
  const match = /^(?:W\/)?"(\d+)"$/.exec(etag || "");
  return match ? Number(match[1]) : undefined;
}

/** A query string from pairs, leaving out empty values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.append(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** One page of a list: {items, nextCursor}. */
export async function page(path, params) {
  const { data } = await request("GET", path + query(params));
  return { items: data?.items || [], nextCursor: data?.nextCursor ?? null };
}

/** A fresh key for one create attempt: a retried POST then creates nothing twice. */
export function newIdempotencyKey() {
  return crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}
