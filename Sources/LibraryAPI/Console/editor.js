// The editor dialog for one library or book: create, edit, delete, with optimistic concurrency.
//
// An edit starts from the version the user opened (its ETag) and sends only the fields the user
// changed, as a merge patch with If-Match. While it is open the resource is watched: fields the
// user has not touched follow the server; a touched one keeps the user's text and says what the
// server now has. A 412 fetches the current state, lists the fields that differ from the state the
// user started from, and offers to reapply the user's changes onto that version.

import { request, ApiError, newIdempotencyKey } from "./api.js";
import { display, flash } from "./ui.js";
import { watchText } from "./watch.js";

export const SCHEMAS = {
  book: {
    noun: "book",
    fields: [
      { name: "title", label: "Title", required: true },
      { name: "author", label: "Author" },
      { name: "isbn", label: "ISBN", nullable: true, hint: "ISBN-10 or ISBN-13, hyphens allowed" },
      { name: "publishedYear", label: "Published year", nullable: true, integer: true },
      { name: "available", label: "Available for loan", checkbox: true },
    ],
  },
  library: {
    noun: "library",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "address", label: "Address", nullable: true },
    ],
  },
};

export class Editor {
  /** setWatch(watch or null, handler): the app adds the editor's watch to the stream. */
  constructor(dialog, { setWatch, onCreated }) {
    this.dialog = dialog;
    this.setWatch = setWatch;
    this.onCreated = onCreated;
    this.form = dialog.querySelector("form");
    this.heading = dialog.querySelector("#editor-heading");
    this.banner = dialog.querySelector("#editor-banner");
    this.fieldsBox = dialog.querySelector("#editor-fields");
    this.conflict = dialog.querySelector("#conflict");
    this.saveButton = dialog.querySelector("#editor-save");
    this.deleteButton = dialog.querySelector("#editor-delete");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
    dialog.querySelector("#editor-cancel").addEventListener("click", () => this.close());
    this.deleteButton.addEventListener("click", () => this.deleteClicked());
    dialog.querySelector("#conflict-reapply").addEventListener("click", () => this.reapply());
    dialog.querySelector("#conflict-discard").addEventListener("click", () => this.discard());
    dialog.addEventListener("close", () => this.closed());
  }

  /** kind "book" | "library"; id for an edit, or null and createPath for a new one. */
  async open({ kind, id = null, createPath = null, defaults = {} }) {
    this.schema = SCHEMAS[kind];
    this.kind = kind;
    this.id = id;
    this.createPath = createPath;
    this.dirty = new Set();
    this.deleted = false;
    this.busy = false;
    this.lastBody = "";
    this.idempotencyKey = newIdempotencyKey();
    this.buildFields();
    this.showBanner("");
    this.hideConflict();
    this.disarmDelete();
    this.deleteButton.hidden = !id;
    this.dialog.dataset.kind = kind;
    this.dialog.dataset.mode = id ? "edit" : "create";
    this.dialog.dataset.state = id ? "loading" : "ready";
    this.heading.textContent = id ? `Edit ${this.schema.noun}` : `New ${this.schema.noun}`;
    if (!this.dialog.open) this.dialog.showModal();
    if (!id) {
      this.base = { ...defaults };
      this.version = null;
      for (const field of this.schema.fields) this.setInput(field, defaults[field.name] ?? (field.checkbox ? true : null));
      this.focusFirst();
      return;
    }
    try {
      const { data, version } = await request("GET", this.path());
      if (this.id !== id) return;
      this.base = data;
      this.version = version;
      for (const field of this.schema.fields) this.setInput(field, data[field.name]);
      this.heading.textContent = `Edit ${this.schema.noun}: ${data.title ?? data.name}`;
      this.dialog.dataset.state = "ready";
      this.dialog.dataset.version = String(version);
      const fields = this.schema.fields.map((field) => field.name);
      this.setWatch(watchText({ target: this.kind, id, fields }),
        (event, payload) => this.live(event, payload));
      this.focusFirst();
    } catch (error) {
      this.dialog.dataset.state = "error";
      this.showBanner(error.status === 404 ? `This ${this.schema.noun} no longer exists.` : error.message, "error");
    }
  }

  path() { return `${this.kind === "book" ? "books" : "libraries"}/${this.id}`; }

  buildFields() {
    const fragment = document.createDocumentFragment();
    this.inputs = new Map();
    for (const field of this.schema.fields) {
      const box = document.createElement("div");
      box.className = field.checkbox ? "field field-checkbox" : "field";
      box.dataset.field = field.name;
      const input = document.createElement("input");
      input.id = `edit-${field.name}`;
      input.name = field.name;
      if (field.checkbox) input.type = "checkbox";
      else {
        input.type = "text";
        input.autocomplete = "off";
        if (field.integer) input.inputMode = "numeric";
        if (field.required) input.setAttribute("aria-required", "true");
      }
      const label = document.createElement("label");
      label.htmlFor = input.id;
      label.textContent = field.label;
      const note = document.createElement("p");
      note.className = "server-note";
      note.id = `${input.id}-note`;
      note.hidden = true;
      const error = document.createElement("p");
      error.className = "field-error";
      error.id = `${input.id}-error`;
      error.dataset.errorFor = field.name;
      error.hidden = true;
      input.setAttribute("aria-describedby", `${error.id} ${note.id}`);
      if (field.hint) input.placeholder = field.hint;
      input.addEventListener(field.checkbox ? "change" : "input", () => this.touched(field));
      box.append(...(field.checkbox ? [input, label] : [label, input]), note, error);
      fragment.append(box);
      this.inputs.set(field.name, { field, input, note, error, box });
    }
    this.fieldsBox.replaceChildren(fragment);
  }

  focusFirst() { this.inputs.values().next().value?.input.focus(); }

  setInput(field, value) {
    const { input } = this.inputs.get(field.name);
    if (field.checkbox) input.checked = Boolean(value);
    else input.value = value === null || value === undefined ? "" : String(value);
  }

  readInput(field) {
    const { input } = this.inputs.get(field.name);
    if (field.checkbox) return input.checked;
    const text = input.value.trim();
    if (field.nullable && text === "") return null;
    if (field.integer && /^-?\d+$/.test(text)) return Number(text);
    return field.integer ? text : input.value; // a bad year goes to the server, which says why
  }

  touched(field) {
    const empty = field.checkbox ? false : field.nullable ? null : "";
    const same = this.readInput(field) === (this.base?.[field.name] ?? empty);
    if (same) this.dirty.delete(field.name);
    else this.dirty.add(field.name);
    this.inputs.get(field.name).box.dataset.dirty = String(!same);
    this.clearError(field.name);
  }

  /** An entry of the editor's watch: keep untouched fields current, flag touched ones. */
  live(event, data) {
    if (!this.dialog.open) return;
    if (event === "delete") {
      if (this.busy && this.action === "delete") return; // our own delete, reported by the stream first
      this.deleted = true;
      this.dialog.dataset.state = "deleted";
      this.saveButton.disabled = true;
      this.deleteButton.disabled = true;
      this.showBanner(`This ${this.schema.noun} was deleted by someone else.`, "deleted");
      this.setWatch(null);
      return;
    }
    for (const field of this.schema.fields) {
      if (!(field.name in data)) continue;
      const value = data[field.name];
      const entry = this.inputs.get(field.name);
      if (this.dirty.has(field.name)) {
        const differs = value !== this.readInput(field);
        entry.note.hidden = !differs;
        entry.note.textContent = differs ? `Now on the server: ${display(value)}` : "";
      } else if (value !== this.readInput(field)) {
        this.setInput(field, value);
        flash(entry.box);
      }
    }
  }

  body() {
    const body = {};
    for (const field of this.schema.fields) {
      if (this.id && !this.dirty.has(field.name)) continue;
      body[field.name] = this.readInput(field);
    }
    return body;
  }

  async save() {
    if (this.busy || this.deleted) return;
    this.clearErrors();
    this.hideConflict();
    const body = this.body();
    if (this.id && Object.keys(body).length === 0) {
      this.close();
      return;
    }
    const text = JSON.stringify(body);
    if (text !== this.lastBody) this.idempotencyKey = newIdempotencyKey(); // same key, other body is a 422
    this.lastBody = text;
    this.action = "save";
    await this.run(async () => {
      if (this.id) {
        await request("PATCH", this.path(), { body, version: this.version });
        this.close();
      } else {
        const { data } = await request("POST", this.createPath, { body, idempotencyKey: this.idempotencyKey });
        const kind = this.kind;
        this.close();
        this.onCreated?.(kind, data);
      }
    });
  }

  async run(action) {
    this.busy = true;
    this.dialog.dataset.busy = "true";
    try {
      await action();
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      await this.failed(error);
    } finally {
      this.busy = false;
      delete this.dialog.dataset.busy;
    }
  }

  async failed(error) {
    if (error.status === 412) return this.showConflict();
    if (error.status === 422 && error.errors.length) {
      const loose = [];
      for (const { field, message } of error.errors) {
        const entry = this.inputs.get(field);
        if (!entry) {
          loose.push(`${field}: ${message}`);
          continue;
        }
        entry.error.textContent = message;
        entry.error.hidden = false;
        entry.input.setAttribute("aria-invalid", "true");
      }
      this.showBanner(loose.length ? loose.join("; ") : "Please correct the fields marked below.", "error");
      const first = error.errors.find(({ field }) => this.inputs.has(field));
      if (first) this.inputs.get(first.field).input.focus();
      return;
    }
    if (error.status === 401) return this.showBanner("Saving needs the API token. Enter it, then save again.", "error");
    if (error.status === 404) {
      this.deleted = true;
      this.dialog.dataset.state = "deleted";
      return this.showBanner(`This ${this.schema.noun} no longer exists.`, "deleted");
    }
    this.showBanner(error.message, "error");
  }

  /** 412: what changed on the server since the user opened the editor. */
  async showConflict() {
    let current;
    try {
      ({ data: current } = await request("GET", this.path()));
    } catch (error) {
      if (error.status === 404) return this.failed(error);
      return this.showBanner(error.message, "error");
    }
    this.current = current;
    const list = this.conflict.querySelector("#conflict-fields");
    list.replaceChildren();
    for (const field of this.schema.fields) {
      const before = this.base[field.name] ?? null;
      const now = current[field.name] ?? null;
      if (before === now) continue;
      const row = document.createElement("tr");
      row.dataset.field = field.name;
      const mine = this.dirty.has(field.name) ? display(this.readInput(field)) : "—";
      for (const [text, tag] of [[field.label, "th"], [display(before), "td"], [display(now), "td"], [mine, "td"]]) {
        const cell = document.createElement(tag);
        if (tag === "th") cell.scope = "row";
        cell.textContent = text;
        row.append(cell);
      }
      list.append(row);
    }
    this.conflict.hidden = false;
    this.dialog.dataset.state = "conflict";
    const deleting = this.action === "delete";
    this.conflict.querySelector("#conflict-reapply").textContent = deleting ? "Delete anyway" : "Reapply my edit";
    this.conflict.querySelector("#conflict-discard").textContent = deleting ? "Keep it" : "Discard my edit";
    this.showBanner(`Someone changed this ${this.schema.noun} while you ${deleting ? "had it open" : "were editing"} `
      + `(now version ${current.version}).`, "conflict");
    this.conflict.querySelector("#conflict-reapply").focus();
  }

  /** Applies the user's changes (or delete) onto the version the conflict showed. */
  async reapply() {
    this.rebase(this.current);
    this.dialog.dataset.state = "ready";
    if (this.action === "delete") await this.deleteNow();
    else await this.save();
  }

  discard() {
    this.dirty.clear();
    this.rebase(this.current);
    for (const field of this.schema.fields) this.setInput(field, this.current[field.name]);
    for (const entry of this.inputs.values()) entry.box.dataset.dirty = "false";
    this.dialog.dataset.state = "ready";
    this.hideConflict();
    this.showBanner("");
  }

  rebase(current) {
    this.base = current;
    this.version = current.version;
    this.dialog.dataset.version = String(current.version);
    for (const field of this.schema.fields) {
      const entry = this.inputs.get(field.name);
      entry.note.hidden = true;
      if (!this.dirty.has(field.name)) this.setInput(field, current[field.name]);
    }
  }

  // Two presses, so a stray Enter or click never deletes; no window.confirm (it blocks the page).
  async deleteClicked() {
    if (this.deleteButton.dataset.armed !== "true") {
      this.deleteButton.dataset.armed = "true";
      this.deleteButton.textContent = this.kind === "library" ? "Delete with all its books?" : "Really delete?";
      clearTimeout(this.disarmTimer);
      this.disarmTimer = setTimeout(() => this.disarmDelete(), 5000);
      return;
    }
    this.disarmDelete();
    await this.deleteNow();
  }

  async deleteNow() {
    this.hideConflict();
    this.action = "delete";
    await this.run(async () => {
      await request("DELETE", this.path(), { version: this.version });
      this.close();
    });
  }

  disarmDelete() {
    clearTimeout(this.disarmTimer);
    this.deleteButton.dataset.armed = "false";
    this.deleteButton.textContent = "Delete";
  }

  showBanner(text, tone = "") {
    this.banner.textContent = text;
    this.banner.hidden = !text;
    this.banner.dataset.tone = tone;
  }

  hideConflict() { this.conflict.hidden = true; }

  clearError(name) {
    const entry = this.inputs.get(name);
    entry.error.hidden = true;
    entry.error.textContent = "";
    entry.input.removeAttribute("aria-invalid");
  }

  clearErrors() { for (const name of this.inputs.keys()) this.clearError(name); }

  // The close event comes later, as a task: stop following the item now, so that the stream's
  // news of our own delete is not shown as someone else's.
  close() {
    if (this.dialog.open) this.dialog.close();
    this.closed();
  }

  closed() {
    // The close event is queued: when the editor was opened again before it ran, it is stale.
    if (this.dialog.open) return;
    this.id = null;
    this.saveButton.disabled = false;
    this.deleteButton.disabled = false;
    this.dialog.dataset.state = "closed";
    this.setWatch(null);
    this.onClosed?.();
  }
}
