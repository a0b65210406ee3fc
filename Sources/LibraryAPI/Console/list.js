// A list on screen kept in step with a collection watch, one DOM row per item, keyed by id.
//
// A change touches the cells of the one row it names, never the rest of the list, so a title
// edited elsewhere repaints one cell and the other rows stay the same nodes. Rows are built into a
// DocumentFragment and inserted at once, which keeps 1,000 rows well under a second.
//
// The rows shown are a prefix of the server's list order (creation order) when more pages remain
// (`complete` false), or all of it. Items that join are placed by `createdAt` where it is known.
// The stream does not say where an item the page never saw goes (its watch names only the fields
// on screen), so its createdAt is fetched; meanwhile a complete list shows it last, where a new
// book belongs. In a partly loaded list it shows only when it falls within the loaded prefix,
// since the next page brings it otherwise. (createdAt has millisecond precision: of two books
// made in the same millisecond the page cannot tell which the list puts first, and puts the one
// that joins second; a reload shows the server's order.)

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
    this.gone = new Set(); // ids removed by the stream: a page or locate() answered earlier must not revive them
    this.generation = 0; // bumped by clear(): a pending locate() for an older list is dropped
  }

  get size() { return this.rows.size; }

  /** Empties the list; a list that starts over also drops the stream updates held for the old one. */
  clear({ keepHeld = false } = {}) {
    this.generation += 1;
    if (!keepHeld && this.held) this.held = [];
    this.rows.clear();
    this.gone.clear();
    this.container.replaceChildren();
    this.onChange?.();
  }

  /** Appends a page of items from the REST list; returns the milliseconds it took, layout included. */
  append(items, complete) {
    const started = performance.now();
    const fragment = document.createDocumentFragment();
    for (const item of items) {
      if (item.createdAt) this.createdAt.set(item.id, item.createdAt);
      if (this.gone.has(item.id)) continue;
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

  // While a REST page loads, stream updates wait and are applied after it, in order: the page
  // may have been read before or after any of them, and replaying them in order is right either
  // way (the last update of each field wins), where applying them first would let an older page
  // overwrite, or drop, what the stream already said.
  startLoad() { this.held ??= []; }

  finishLoad() {
    const held = this.held || [];
    this.held = null;
    for (const [kind, data] of held) {
      if (kind === "snapshot") this.applySnapshot(data);
      else this.applyChange(data);
    }
  }

  /** A collection snapshot (every item, in list order): brings the rows to exactly that state. */
  applySnapshot(items) {
    if (this.held) {
      this.held.push(["snapshot", items]);
      return;
    }
    const present = new Set(items.map((item) => item.id));
    for (const id of [...this.rows.keys()]) if (!present.has(id)) this.remove(id);
    let lastShown = -1;
    items.forEach((item, index) => { if (this.rows.has(item.id)) lastShown = index; });
    // Walk backwards so each missing item is inserted before the next shown one.
    let next = null;
    let inserted = false;
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
        inserted = true;
      }
    }
    if (inserted) this.reorderMap();
    this.onChange?.();
  }

  /** A collection change: {added, removed, changed}. */
  applyChange(change) {
    if (this.held) {
      this.held.push(["change", change]);
      return;
    }
    const { added = [], removed = [], changed = [] } = change;
    for (const id of removed) this.remove(id);
    for (const item of changed) {
      const row = this.rows.get(item.id);
      if (row) this.merge(row, item);
    }
    for (const item of added) this.place(item);
    this.onChange?.();
  }

  async place(item) {
    this.gone.delete(item.id);
    const existing = this.rows.get(item.id);
    if (existing) {
      this.merge(existing, item);
      return;
    }
    const createdAt = this.createdAt.get(item.id);
    if (createdAt) {
      this.position(this.add(item), item.id, createdAt);
      return;
    }
    // Never seen: most likely just created, so last. Show it there at once when the whole list is
    // loaded; where it really goes is known once its createdAt comes back.
    if (this.complete) {
      this.container.append(this.add(item));
      this.onChange?.();
    }
    const generation = this.generation;
    const found = await this.locateQueued(item.id);
    if (generation !== this.generation || this.gone.has(item.id) || !found) return;
    this.createdAt.set(item.id, found);
    const row = this.rows.get(item.id);
    this.position(row ? row.element : this.add(item), item.id, found);
  }

  /** Puts a row where its createdAt says, or takes it off when that is past the loaded prefix. */
  position(element, id, createdAt) {
    let before = null;
    for (const [other, row] of this.rows) {
      if (other === id) continue;
      const otherCreatedAt = this.createdAt.get(other);
      if (otherCreatedAt && otherCreatedAt > createdAt) {
        before = row.element;
        break;
      }
    }
    if (!before && !this.complete) {
      element.remove();
      this.rows.delete(id); // its page, when loaded, brings it
    } else if (element.nextElementSibling !== before || !element.isConnected) {
      this.container.insertBefore(element, before);
      this.reorderMap();
    }
    this.onChange?.();
  }

  // At most two lookups at a time: a burst of new books must not take every connection the
  // browser allows this origin (six), which the user's own saves need too.
  locateQueued(id) {
    this.waiting ??= [];
    this.inFlight ??= 0;
    return new Promise((resolve) => {
      this.waiting.push([id, resolve]);
      this.pump();
    });
  }

  pump() {
    while (this.inFlight < 2 && this.waiting.length) {
      const [id, resolve] = this.waiting.shift();
      this.inFlight += 1;
      this.locate(id).catch(() => null).then((createdAt) => {
        this.inFlight -= 1;
        resolve(createdAt);
        this.pump();
      });
    }
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
    this.gone.add(id);
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
