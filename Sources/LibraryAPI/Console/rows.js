// The DOM of one row: a library in the list on the left, a book in the table.
//
// A book row is cloned from a prototype built once, which is about twice as fast as building each
// cell with createElement: it counts when a library of 1,000 books opens. Updates find a cell by
// its position, so nothing is kept per row beyond the row itself.

import { flash } from "./ui.js";

export const BOOK_COLUMNS = ["title", "author", "publishedYear", "isbn", "available"];

let bookPrototype = null;

function makeBookPrototype() {
  const row = document.createElement("tr");
  for (const field of BOOK_COLUMNS) {
    const cell = document.createElement(field === "title" ? "th" : "td");
    cell.dataset.field = field;
    if (field === "title") {
      cell.scope = "row";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "link"; // opens the editor (one listener on the table body, in app.js)
      cell.append(button);
    }
    row.append(cell);
  }
  return row;
}

export function bookRow(item) {
  bookPrototype ??= makeBookPrototype();
  const row = bookPrototype.cloneNode(true);
  row.dataset.bookId = item.id;
  const cells = row.children;
  cells[0].firstChild.textContent = item.title ?? "";
  for (let index = 1; index < BOOK_COLUMNS.length; index += 1) {
    paintBookCell(cells[index], BOOK_COLUMNS[index], item[BOOK_COLUMNS[index]]);
  }
  return row;
}

/** Repaints the changed fields of one book row, and only those cells. */
export function updateBookRow(row, changed) {
  for (const [field, value] of Object.entries(changed)) {
    const index = BOOK_COLUMNS.indexOf(field);
    if (index < 0) continue;
    const cell = row.children[index];
    if (field === "title") cell.firstChild.textContent = value ?? "";
    else paintBookCell(cell, field, value);
    flash(cell);
  }
}

function paintBookCell(cell, field, value) {
  if (field === "available") {
    cell.textContent = value === undefined ? "" : value ? "Yes" : "No";
    cell.dataset.value = String(value);
  } else {
    cell.textContent = value === null || value === undefined ? "" : String(value);
  }
}

/** A library in the list: a button with its name and its number of books. */
export function libraryRow(item, selected, onSelect) {
  const row = document.createElement("li");
  row.dataset.libraryId = item.id;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "library-item";
  const name = document.createElement("span");
  name.className = "library-name";
  name.dataset.field = "name";
  name.textContent = item.name ?? "";
  const count = document.createElement("span");
  count.className = "count";
  count.dataset.field = "bookCount";
  paintCount(count, item.bookCount ?? 0);
  button.append(name, count);
  if (selected) button.setAttribute("aria-current", "true");
  button.addEventListener("click", onSelect);
  row.append(button);
  return row;
}

export function updateLibraryRow(row, changed) {
  const [name, count] = row.firstChild.children;
  if ("name" in changed) {
    name.textContent = changed.name ?? "";
    flash(name);
  }
  if ("bookCount" in changed) {
    paintCount(count, changed.bookCount);
    flash(count);
  }
}

function paintCount(element, count) {
  element.textContent = count.toLocaleString();
  element.setAttribute("aria-label", `${count} book${count === 1 ? "" : "s"}`);
}
