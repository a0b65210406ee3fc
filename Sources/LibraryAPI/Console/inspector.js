// The event inspector: the stream's frames as they arrive, newest first, the last LIMIT kept.
// It shows what the server really sends, so a person can see that a title-only view gets titles
// only. Tokens never reach it: the stream URL it shows has access_token masked.

const LIMIT = 200;
const MAX_DATA = 4000; // a 1,000-book snapshot would otherwise make one entry megabytes of text

const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

export class Inspector {
  constructor(list, counter, clearButton) {
    this.list = list;
    this.counter = counter;
    this.total = 0;
    clearButton.addEventListener("click", () => {
      this.list.replaceChildren();
      this.total = 0;
      this.counter.textContent = "0";
    });
  }

  record(record) {
    const item = document.createElement("li");
    item.className = `frame frame-${record.kind}`;
    item.dataset.kind = record.kind;
    const head = document.createElement("div");
    head.className = "frame-head";
    const time = document.createElement("time");
    time.textContent = clock.format(new Date());
    head.append(time, " ");
    if (record.kind === "frame") {
      item.dataset.frameId = record.id || "";
      head.append(label("message", "type"), " ", label(`id ${record.id || "–"}`, "id"));
      item.append(head);
      for (const entry of record.entries) item.append(this.entry(entry));
    } else {
      const text = record.kind === "connect" ? `connecting with ${record.watches} watch${record.watches === 1 ? "" : "es"}${record.resume ? ", resuming" : ""}`
        : record.kind === "open" ? "stream open" : record.text || record.kind;
      head.append(label(record.kind, "type"), " ", text);
      item.append(head);
    }
    this.list.prepend(item);
    while (this.list.childElementCount > LIMIT) this.list.lastElementChild.remove();
    if (record.kind === "frame") {
      this.total += 1;
      this.counter.textContent = String(this.total);
    }
  }

  entry({ watch, event, data }) {
    const block = document.createElement("div");
    block.className = "entry";
    block.dataset.watch = watch;
    block.dataset.event = event;
    const head = document.createElement("div");
    const watchCode = document.createElement("code");
    watchCode.className = "watch";
    watchCode.textContent = watch;
    head.append(label(event, `event event-${event}`), " ", watchCode);
    const body = document.createElement("pre");
    body.className = "data";
    let text = JSON.stringify(data);
    if (text.length > MAX_DATA) {
      block.dataset.truncated = "true";
      text = `${text.slice(0, MAX_DATA)}… (${text.length.toLocaleString()} characters)`;
    }
    body.textContent = text;
    block.append(head, body);
    return block;
  }
}

function label(text, className) {
  const span = document.createElement("span");
  span.className = className;
  span.textContent = text;
  return span;
}
