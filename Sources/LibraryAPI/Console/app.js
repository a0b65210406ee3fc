// The console's views: libraries on the left, the open library's books in the middle, the event
// inspector on the right (below, on a narrow screen), and the editor and token dialogs.
//
// Loading and paging: lists come from REST in pages (`limit`, then `nextCursor`). Libraries load
// 100 at a time; books load up to 1,000 at once (two requests of 500, the most one request may
// ask for) and then 500 more per "Load more books". Rows already shown stay live through the one
// event stream (live.js): the list's watch names exactly the columns on screen, so hiding a column
// drops that field from the stream too. The REST answer is drawn first and the stream opened after
// it; the watch's snapshot then reconciles anything that changed in between.

import { request, page, ApiError } from "./api.js";
import { LiveStream } from "./live.js";
import { KeyedList } from "./list.js";
import { Inspector } from "./inspector.js";
import { Editor } from "./editor.js";
import { flash, unflash } from "./ui.js";
import { libraryRow, updateLibraryRow, bookRow, updateBookRow, BOOK_COLUMNS } from "./rows.js";
import { setUpTokenForm, openTokenForm, showIdentity } from "./tokens.js";
import { watchText } from "./watch.js";

const LIBRARY_PAGE = 100;
const BOOK_PAGE = 500;
const BOOKS_AT_FIRST = 1000;
const LIBRARY_FIELDS = ["name", "bookCount"];
const HEADER_FIELDS = ["name", "address", "bookCount"];

const $ = (id) => document.getElementById(id);

const state = {
  library: null, // the open library's id
  libraryCursor: null,
  bookCursor: null,
  filters: { author: "", available: "" },
  columns: ["author", "publishedYear", "available"],
  editorWatch: null, // {watch, handler} while the editor is open on an existing item
  generation: 0, // bumped whenever the book list starts over; older loads are dropped
};

// --- the stream and the inspector ----------------------------------------------------------

const inspector = new Inspector($("frames"), $("frame-count"), $("inspector-clear"));
const STATE_TEXT = {
  idle: "Not connected", connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…",
  unauthorized: "Needs a token", expired: "Token expired", error: "Stream refused; retrying",
};
const live = new LiveStream({
  onState(name, detail) {
    const element = $("connection");
    element.dataset.state = name;
    $("connection-text").textContent = STATE_TEXT[name] || name;
    element.title = detail || "";
    if (name === "unauthorized") openTokenForm("The event stream needs a token: a signed one, the read token or the API token.");
    if (name === "expired") openTokenForm("Your signed token has expired: sign in with a new one to go on live.", "signed-token");
  },
  onFrame(record) {
    if (record.kind === "connect") $("stream-url").textContent = record.url;
    inspector.record(record);
  },
});

function refreshWatches() {
  const handlers = new Map([[watchText({ target: "libraries", fields: LIBRARY_FIELDS }), onLibrariesEvent]]);
  if (state.library) {
    // Each handler is bound to its watch: until the new stream opens, the old one may still
    // deliver a frame for the list the user just left.
    const library = state.library;
    const list = bookListWatch();
    handlers.set(watchText({ target: "library", id: library, fields: HEADER_FIELDS }), (event, data) => {
      if (state.library === library) onHeaderEvent(event, data);
    });
    handlers.set(list, (event, data) => {
      if (bookListWatch() === list) onBooksEvent(event, data);
    });
  }
  if (state.editorWatch) handlers.set(state.editorWatch.watch, state.editorWatch.handler);
  live.setWatches(handlers);
}

function bookListWatch() {
  const { author, available } = state.filters;
  return watchText({ target: "books", filters: { libraryId: state.library, author, available },
    fields: ["title", ...state.columns] });
}

// --- libraries --------------------------------------------------------------------------------

const libraries = new KeyedList({
  container: $("libraries"),
  makeRow: (item) => libraryRow(item, item.id === state.library, () => selectLibrary(item.id)),
  updateRow: updateLibraryRow,
  locate: (id) => request("GET", `libraries/${id}?fields=createdAt`).then(({ data }) => data.createdAt,
    (error) => (error.status === 404 ? null : Promise.reject(error))),
  onChange() {
    $("libraries-empty").hidden = libraries.size > 0;
  },
});

async function loadLibraries(more = false) {
  libraries.startLoad();
  try {
    const result = await page("libraries", { limit: LIBRARY_PAGE, cursor: more ? state.libraryCursor : null });
    if (!more) libraries.clear({ keepHeld: true });
    state.libraryCursor = result.nextCursor;
    libraries.append(result.items, !result.nextCursor);
    $("libraries-more").hidden = !result.nextCursor;
    showIdentity((id) => libraries.item(id)?.name);
    showNotice("");
    return true;
  } catch (error) {
    showNotice(`Could not load the libraries: ${error.message}`);
    return false;
  } finally {
    libraries.finishLoad();
  }
}

function onLibrariesEvent(event, data) {
  if (event === "snapshot") libraries.applySnapshot(data.items);
  else if (event === "change") libraries.applyChange(data);
}

function onHeaderEvent(event, data) {
  if (event === "delete") {
    showNotice("The library you had open was deleted.");
    selectLibrary(null);
    return;
  }
  if ("name" in data) {
    $("library-name").textContent = data.name;
    if (event === "change") flash($("library-name"));
  }
  if ("address" in data) $("library-address").textContent = data.address || "No address";
  if ("bookCount" in data) {
    $("library-count").textContent = `${data.bookCount.toLocaleString()} book${data.bookCount === 1 ? "" : "s"} in all`;
    if (event === "change") flash($("library-count"));
  }
}

// --- books ------------------------------------------------------------------------------------

const books = new KeyedList({
  container: $("books"),
  makeRow: bookRow,
  updateRow: updateBookRow,
  locate: (id) => request("GET", `books/${id}?fields=createdAt`).then(({ data }) => data.createdAt,
    (error) => (error.status === 404 ? null : Promise.reject(error))),
  onChange: summarizeBooks,
});

// One listener for every row: 1,000 rows need no 1,000 closures.
$("books").addEventListener("click", (event) => {
  const button = event.target.closest("button.link");
  const row = button?.closest("tr[data-book-id]");
  if (row) editor.open({ kind: "book", id: row.dataset.bookId });
});

function summarizeBooks() {
  const count = books.size;
  const more = state.bookCursor ? ", more to load" : "";
  const filtered = state.filters.author || state.filters.available ? " matching the filter" : "";
  $("books-summary").textContent = `${count.toLocaleString()} book${count === 1 ? "" : "s"}${filtered}${more}.`;
  $("books-empty").hidden = count > 0;
}

async function loadBooks(more = false) {
  const generation = state.generation;
  const table = $("books-table");
  table.dataset.state = "loading";
  let items = [];
  let cursor = more ? state.bookCursor : null;
  books.startLoad();
  try {
    do {
      const result = await page("books", {
        libraryId: state.library, author: state.filters.author, available: state.filters.available,
        limit: BOOK_PAGE, cursor,
      });
      if (generation !== state.generation) return;
      items = items.concat(result.items);
      cursor = result.nextCursor;
    } while (cursor && !more && items.length < BOOKS_AT_FIRST);
  } catch (error) {
    if (generation !== state.generation) return;
    table.dataset.state = "error";
    books.finishLoad();
    showNotice(`Could not load the books: ${error.message}`);
    return;
  }
  if (!more) books.clear({ keepHeld: true });
  state.bookCursor = cursor;
  const milliseconds = books.append(items, !cursor);
  books.finishLoad();
  table.dataset.state = "ready";
  table.dataset.renderedRows = String(items.length);
  table.dataset.renderMs = milliseconds.toFixed(1);
  $("books-more").hidden = !cursor;
  summarizeBooks();
  showNotice("");
}

function onBooksEvent(event, data) {
  if (event === "snapshot") books.applySnapshot(data.items);
  else if (event === "change") books.applyChange(data);
}

function applyColumns() {
  const table = $("books-table");
  for (const field of BOOK_COLUMNS.slice(1)) {
    table.classList.toggle(`hide-${field}`, !state.columns.includes(field));
  }
}

// --- the open library -------------------------------------------------------------------------

async function selectLibrary(id) {
  state.library = id;
  state.generation += 1;
  state.bookCursor = null;
  for (const button of document.querySelectorAll("#libraries button[aria-current]")) button.removeAttribute("aria-current");
  writeAddress();
  $("no-library").hidden = Boolean(id);
  $("library-view").hidden = !id;
  books.clear();
  if (!id) {
    refreshWatches();
    return;
  }
  const row = document.querySelector(`#libraries li[data-library-id="${CSS.escape(id)}"]`);
  row?.querySelector("button").setAttribute("aria-current", "true");
  const known = libraries.item(id);
  $("library-name").textContent = known?.name ?? "";
  $("library-address").textContent = "";
  $("library-count").textContent = "";
  for (const id of ["library-name", "library-count"]) unflash($(id)); // a glow of the library before
  $("library-view").dataset.libraryId = id;
  // A watch on a library that is gone would make the server refuse the whole stream: check first.
  const [found] = await Promise.all([
    request("GET", `libraries/${id}`).then(({ data }) => data, (error) => (error.status === 404 ? null : undefined)),
    loadBooks(),
  ]);
  if (state.library !== id) return;
  if (found === null) {
    showNotice("That library does not exist (any more).");
    await selectLibrary(null);
    return;
  }
  if (found) onHeaderEvent("snapshot", found);
  refreshWatches();
}

$("filters").addEventListener("submit", (event) => {
  event.preventDefault();
  state.filters = { author: $("filter-author").value.trim(), available: $("filter-available").value };
  selectLibrary(state.library);
});
$("filter-available").addEventListener("change", () => $("filters").requestSubmit());
$("filters").addEventListener("change", (event) => {
  if (event.target.name !== "column") return;
  state.columns = [...document.querySelectorAll("#filters input[name=column]:checked")].map((box) => box.value);
  applyColumns();
  refreshWatches(); // a new field set is a new watch: its snapshot fills the column back in
});

$("libraries-more").addEventListener("click", () => loadLibraries(true));
$("books-more").addEventListener("click", () => loadBooks(true));

// --- the editor -------------------------------------------------------------------------------

const editor = new Editor($("editor"), {
  setWatch(watch, handler) {
    state.editorWatch = watch ? { watch, handler } : null;
    refreshWatches();
  },
  onCreated(kind, item) {
    if (kind === "library") selectLibrary(item.id); // who makes a library wants to fill it next
  },
});
$("new-library").addEventListener("click", () => editor.open({ kind: "library", createPath: "libraries" }));
$("edit-library").addEventListener("click", () => editor.open({ kind: "library", id: state.library }));
$("new-book").addEventListener("click", () =>
  editor.open({ kind: "book", createPath: `libraries/${state.library}/books`,
    defaults: { author: state.filters.author || "", available: state.filters.available !== "false" } }));

// --- tokens -----------------------------------------------------------------------------------

setUpTokenForm(restartAfterTokens);

async function restartAfterTokens() {
  showIdentity((id) => libraries.item(id)?.name);
  if (await loadLibraries()) {
    const library = state.library ?? libraryInAddress();
    if (library) await selectLibrary(library);
    live.restart();
    refreshWatches();
  }
}

// The open library and its filters are kept in the address (#library=ID&author=…&available=…),
// so a reload or a shared link reopens the same view.
function writeAddress() {
  if (!state.library) {
    history.replaceState(null, "", location.pathname + location.search);
    return;
  }
  const params = new URLSearchParams({ library: state.library });
  if (state.filters.author) params.set("author", state.filters.author);
  if (state.filters.available) params.set("available", state.filters.available);
  history.replaceState(null, "", `#${params}`);
}

/** The library the address names (its filters go into the form), or null. */
function libraryInAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const library = params.get("library");
  if (!/^[0-9a-fA-F-]{36}$/.test(library || "")) return null;
  const available = params.get("available");
  state.filters = { author: params.get("author") || "", available: available === "true" || available === "false" ? available : "" };
  $("filter-author").value = state.filters.author;
  $("filter-available").value = state.filters.available;
  return library;
}

// --- the page ---------------------------------------------------------------------------------

function showNotice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

$("inspector-toggle").addEventListener("click", () => {
  const hidden = document.body.classList.toggle("inspector-hidden");
  $("inspector-toggle").setAttribute("aria-expanded", String(!hidden));
});

window.addEventListener("unhandledrejection", (event) => {
  // Failures the views already explain (a 401 opens the token form) need no second word here.
  if (event.reason instanceof ApiError) {
    event.preventDefault();
    showNotice(event.reason.message);
  }
});

async function start() {
  applyColumns();
  const loaded = await loadLibraries();
  const library = loaded ? libraryInAddress() : null;
  if (library) await selectLibrary(library);
  else if (loaded) refreshWatches();
  document.body.dataset.ready = "true";
}

// For people reading the page with devtools, and for scripts/console-check.py.
window.libraryConsole = { state, live, books, libraries, editor };
start();
