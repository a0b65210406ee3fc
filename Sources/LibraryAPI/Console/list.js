// A list on screen kept in step with a collection watch, one DOM row per item, keyed by id.
//
// A change touches the cells of the one row it names, never the rest of the list, so a title
// edited elsewhere repaints one cell and the other rows stay the same nodes. Rows are built into a
// DocumentFragment and inserted at once, which keeps 1,000 rows well under a second.
//
// The rows shown are a prefix of the server's list order (creation order) when more pages remain
// (`complete` false), or all of it. Items that join are placed by `createdAt` where it is known;
// an item the page never saw is located first (its createdAt fetched) and shown only when it falls
// within the loaded prefix, since the next page would bring it otherwise.

export class KeyedList {
  /**
   * container: the element the rows go in. makeRow(item) → element; updateRow(element, fields)
   * repaints the given fields of one row; locate(id) → Promise<createdAt or null>;
   * onChange() after the set of rows changed (to show an empty state, a count).
   */
  constructor({ container, makeRow, updateRow, locate, onChange }) {
    Object.assign(this, { container, makeRow, updateRow, locate, onChange });
    this.rows = new Map(); // id → {element, item}
    this.createdAt = new Map(); // id → createdAt, for every item ever seen with one
    this.complete = true;
    this.generation = 0; // bumped by clear(): a pending locate() for an older list is dropped
  }

  get size() { return this.rows.size; }

  clear() {
    this.generation += 1;
    this.rows.clear();
    this.container.replaceChildren();
    this.onChange?.();
  }

  /** Appends a page of items from the REST list; returns the milliseconds it took, layout included. */
  append(items, complete) {
    const started = performance.now();
    const fragment = document.createDocumentFragment();
    for (const item of items) {
      if (item.createdAt) this.createdAt.set(item.id, item.createdAt);
      const existing = this.rows.get(item.id);
      if (existing) {
        this.merge(existing, item);
        continue;
      }
      fragment.append(this.add(item));
    }
    this.container.append(fragment);
    this.complete = complete;
    void this.container.offsetHeight; // force style and layout, so the figure is the real cost
    this.onChange?.();
    return performance.now() - started;
  }

  /** A collection snapshot (every item, in list order): brings the rows to exactly that state. */
  applySnapshot(items) {
    const present = new Set(items.map((item) => item.id));
    for (const id of [...this.rows.keys()]) if (!present.has(id)) this.remove(id);
    let lastShown = -1;
    items.forEach((item, index) => { if (this.rows.has(item.id)) lastShown = index; });
    // Walk backwards so each missing item is inserted before the next shown one.
    let next = null;
    for (let index = items.length - 1; index >= 0; index -= 1) {
      const item = items[index];
      const row = this.rows.get(item.id);
      if (row) {
        this.merge(row, item);
        next = row.element;
      } else if (this.complete || index < lastShown) {
        const element = this.add(item);
        this.container.insertBefore(element, next);
        next = element;
      }
    }
    this.onChange?.();
  }

  /** A collection change: {added, removed, changed}. */
  applyChange({ added = [], removed = [], changed = [] }) {
    for (const id of removed) this.remove(id);
    for (const item of changed) {
      const row = this.rows.get(item.id);
      if (row) this.merge(row, item);
    }
    for (const item of added) this.place(item);
    this.onChange?.();
  }

  async place(item) {
    const existing = this.rows.get(item.id);
    if (existing) {
      this.merge(existing, item);
      return;
    }
    let createdAt = this.createdAt.get(item.id);
    if (!createdAt) {
      const generation = this.generation;
      createdAt = await this.locate(item.id).catch(() => null);
      if (generation !== this.generation) return;
      if (createdAt) this.createdAt.set(item.id, createdAt);
      const raced = this.rows.get(item.id);
      if (raced) {
        this.merge(raced, item);
        return;
      }
      if (!createdAt && !this.pendingGone?.has(item.id)) return; // gone again meanwhile
    }
    let before = null;
    for (const [id, row] of this.rows) {
      const other = this.createdAt.get(id);
      if (other && createdAt && other > createdAt) {
        before = row.element;
        break;
      }
    }
    if (!before && !this.complete) return; // belongs to a page not loaded yet
    this.container.insertBefore(this.add(item), before);
    this.reorderMap();
    this.onChange?.();
  }

  add(item) {
    const element = this.makeRow(item);
    this.rows.set(item.id, { element, item: { ...item } });
    return element;
  }

  merge(row, fields) {
    const changed = {};
    let any = false;
    for (const [name, value] of Object.entries(fields)) {
      if (name === "id" || row.item[name] === value) continue;
      row.item[name] = value;
      changed[name] = value;
      any = true;
    }
    if (any) this.updateRow(row.element, changed, row.item);
  }

  remove(id) {
    const row = this.rows.get(id);
    if (!row) return;
    row.element.remove();
    this.rows.delete(id);
  }

  item(id) { return this.rows.get(id)?.item; }

  // The Map's order is what place() scans; keep it the DOM's after an insertion in the middle.
  reorderMap() {
    const byElement = new Map([...this.rows].map(([id, row]) => [row.element, [id, row]]));
    const ordered = [];
    for (const element of this.container.children) {
      const entry = byElement.get(element);
      if (entry) ordered.push(entry);
    }
    this.rows = new Map(ordered);
  }
}
