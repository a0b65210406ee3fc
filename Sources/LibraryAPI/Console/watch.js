// How the console spells its watches: the server's watch grammar, in the one spelling of the
// shared table of cases (Tests/WatchGrammar/cases.json; scripts/console-check.py holds this
// module to it in Chromium, as the server's and the Swift client's tests hold theirs): filters and
// fields in the field table's order (LibraryModel/Fields.swift), filter values percent-encoded but
// for ASCII letters, digits and -._~, fields=id when only existence is asked, a library's own
// fields then books.

export const LIBRARY_FIELDS = ["name", "address", "bookCount", "version", "createdAt", "updatedAt"];
export const BOOK_FIELDS = ["libraryId", "title", "author", "isbn", "publishedYear", "available", "version",
  "createdAt", "updatedAt"];
const FILTERS = ["libraryId", "author", "available"];

/** Every byte but ASCII letters, digits and -._~ as %XX (encodeURIComponent leaves !'()* too). */
export function percentEncoded(text) {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function inOrder(order, names) {
  return order.filter((name) => names.includes(name));
}

/**
 * The watch of `target` ("book", "library", "libraries" or "books"), with `id` for one resource,
 * the `fields` asked in any order (for a library: its own, "books", or "books.<field>"), and for
 * "books" its `filters` ({libraryId, author, available}).
 */
export function watchText({ target, id = "", fields = [], filters = {} }) {
  const parameters = [];
  let names;
  let path;
  switch (target) {
    case "book":
      path = `/books/${id}`;
      names = inOrder(BOOK_FIELDS, fields);
      break;
    case "library": {
      path = `/libraries/${id}`;
      const members = inOrder(BOOK_FIELDS, fields.filter((f) => f.startsWith("books.")).map((f) => f.slice(6)));
      names = inOrder(LIBRARY_FIELDS, fields).concat(
        members.length > 0 ? members.map((f) => `books.${f}`) : fields.includes("books") ? ["books"] : []);
      break;
    }
    case "libraries":
      path = "/libraries";
      names = inOrder(LIBRARY_FIELDS, fields);
      break;
    default:
      path = "/books";
      for (const name of FILTERS) {
        if (filters[name] !== undefined && filters[name] !== null && filters[name] !== "") {
          parameters.push(`${name}=${percentEncoded(String(filters[name]))}`);
        }
      }
      names = inOrder(BOOK_FIELDS, fields);
  }
  parameters.push(`fields=${names.length > 0 ? names.join(",") : "id"}`);
  return `${path}?${parameters.join("&")}`;
}
