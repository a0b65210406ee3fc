// The one EventSource behind everything live on the page.
//
// Views declare the watches they need (a watch is the path and query of a single stream, such as
// "/books/ID?fields=title"); this module keeps exactly one `events?watch=…&watch=…` stream open for
// their union. When the set changes it closes the stream and opens one with the new set and
// `lastEventId=<last frame id>`: watches that stay resume where they were (the id's tag names
// them), new ones start with a snapshot. A dropped connection is EventSource's own business: it
// reconnects after the server's `retry:` and sends Last-Event-ID, which the server prefers over
// the query's older lastEventId. Only a refused stream (401, 400, 503…) closes EventSource for
// good; then a plain fetch of the same URL tells which, and we retry with backoff or ask for a token.

import { tokens } from "./api.js";

export class LiveStream {
  /**
   * onState(state, detail): "idle" | "connecting" | "live" | "reconnecting" | "unauthorized" | "expired" | "error".
   * onFrame(record): every frame and connection event, for the inspector.
   */
  constructor({ onState, onFrame }) {
    this.onState = onState;
    this.onFrame = onFrame;
    this.handlers = new Map();
    this.key = "";
    this.source = null;
    this.lastId = "";
    this.retryTimer = 0;
    this.backoff = 1000;
    this.state = "idle";
  }

  /** handlers: Map of watch → (event, data) => void. Reconnects only when the set of watches changed. */
  setWatches(handlers) {
    this.handlers = handlers;
    const key = [...handlers.keys()].sort().join("\n");
    if (key === this.key && (this.source || this.retryTimer)) return;
    this.key = key;
    this.open(false);
  }

  /** Opens the stream again, resuming from the last frame (after new tokens, say). */
  restart() {
    this.open(false);
  }

  url() {
    const params = new URLSearchParams();
    for (const watch of [...this.handlers.keys()].sort()) params.append("watch", watch);
    if (this.lastId) params.set("lastEventId", this.lastId);
    const token = tokens.forReading;
    if (token) params.set("access_token", token);
    return `events?${params}`;
  }

  /** The stream's URL for people: one parameter a line, decoded, the token masked. */
  displayUrl() {
    const lines = [...this.handlers.keys()].sort().map((watch) => `  watch=${watch}`);
    if (this.lastId) lines.push(`  lastEventId=${this.lastId}`);
    if (tokens.forReading) lines.push("  access_token=•••");
    return `events?\n${lines.join("\n")}`;
  }

  open(retrying) {
    this.close();
    if (this.handlers.size === 0) {
      this.setState("idle");
      return;
    }
    const url = this.url();
    const source = new EventSource(url);
    this.source = source;
    this.setState(retrying ? "reconnecting" : "connecting");
    this.onFrame({ kind: "connect", url: this.displayUrl(), watches: this.handlers.size, resume: Boolean(this.lastId) });
    source.onopen = () => {
      if (source !== this.source) return;
      this.backoff = 1000;
      this.setState("live");
      this.onFrame({ kind: "open" });
    };
    source.onmessage = (message) => {
      if (source !== this.source) return;
      if (message.lastEventId) this.lastId = message.lastEventId;
      let entries;
      try {
        entries = JSON.parse(message.data);
      } catch {
        this.onFrame({ kind: "bad", id: message.lastEventId, text: message.data.slice(0, 200) });
        return;
      }
      this.onFrame({ kind: "frame", id: message.lastEventId, entries });
      for (const { watch, event, data } of entries) this.handlers.get(watch)?.(event, data);
    };
    // The signed token expired: the server ends the stream with this event (it carries no id,
    // so the next stream resumes from the last frame). Asking the user beats a reconnect's 401.
    source.addEventListener("expired", (message) => {
      if (source !== this.source) return;
      this.source = null;
      source.close();
      this.onFrame({ kind: "error", text: "the stream's token expired" });
      this.setState("expired", message.data);
    });
    source.onerror = () => {
      if (source !== this.source) return;
      if (source.readyState === EventSource.CONNECTING) {
        this.setState("reconnecting");
        this.onFrame({ kind: "error", text: "connection lost; the browser reconnects" });
      } else {
        this.source = null;
        source.close();
        this.diagnose(url);
      }
    };
  }

  async diagnose(url) {
    this.setState("reconnecting");
    let status = 0;
    let detail = "";
    const abort = new AbortController();
    try {
      const response = await fetch(url, { signal: abort.signal, cache: "no-store" });
      status = response.status;
      if (!response.ok) detail = (await response.json().catch(() => ({}))).detail || "";
    } catch {
      // unreachable: retry below
    } finally {
      abort.abort();
    }
    // A watch whose book or library is gone (deleted before the stream could start) is a 404 that
    // names it; its view treats that as the delete it is and drops the watch, which reopens.
    const refused = /^watch "(.+?)": /.exec(detail)?.[1];
    if (status === 404 && refused && this.handlers.has(refused)) {
      this.onFrame({ kind: "error", text: `stream refused: ${detail}` });
      this.handlers.get(refused)("delete", {});
      if (this.source || this.retryTimer) return;
    }
    if (status === 401) {
      this.setState("unauthorized", detail);
      this.onFrame({ kind: "error", text: "the stream needs a read token" });
      return;
    }
    this.onFrame({ kind: "error", text: status ? `stream refused: ${status} ${detail}` : "server unreachable" });
    if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
      // A watch the server rejects: the history it resumes from may be gone, start afresh.
      this.lastId = "";
      this.setState("error", detail);
    }
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = 0;
      this.open(true);
    }, this.backoff);
    this.backoff = Math.min(this.backoff * 2, 15000);
  }

  close() {
    clearTimeout(this.retryTimer);
    this.retryTimer = 0;
    if (this.source) {
      this.source.close();
      this.source = null;
    }
  }

  setState(state, detail = "") {
    this.state = state;
    this.onState(state, detail);
  }
}
