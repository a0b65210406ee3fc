// The token form: a read token and an API token, typed once per tab.
//
// The boxes are always empty when the form opens: a saved token is never put back into the page,
// where it could be read off the screen or the DOM. An empty box on submit keeps what was saved,
// so adding the API token later does not mean typing the read token again.

import { tokens, onUnauthorized } from "./api.js";

const $ = (id) => document.getElementById(id);

/** onChanged() runs after the tokens were saved or forgotten, to load again with them. */
export function setUpTokenForm(onChanged) {
  const dialog = $("tokens");
  $("tokens-button").addEventListener("click", () => openTokenForm());
  $("tokens-cancel").addEventListener("click", () => dialog.close());
  $("tokens-clear").addEventListener("click", () => {
    tokens.save("", "");
    dialog.close();
    onChanged();
  });
  $("tokens-form").addEventListener("submit", (event) => {
    event.preventDefault();
    tokens.save($("read-token").value.trim() || tokens.read, $("api-token").value.trim() || tokens.write);
    for (const id of ["read-token", "api-token"]) $(id).value = "";
    dialog.close();
    onChanged();
  });
  onUnauthorized((error) => {
    const writing = error.method !== "GET" && error.method !== "HEAD";
    openTokenForm(writing
      ? "Changes need the API token."
      : "The server needs a token to show its data: the read token or the API token.",
    writing ? "api-token" : "read-token");
  });
}

/** Opens the form; `reason` says why the page asks (a 401), `focus` is the box to type into. */
export function openTokenForm(reason = "", focus = "read-token") {
  const dialog = $("tokens");
  $("tokens-reason").textContent = reason;
  $("tokens-reason").hidden = !reason;
  dialog.dataset.reason = reason ? "unauthorized" : "";
  for (const [id, saved] of [["read-token", tokens.read], ["api-token", tokens.write]]) {
    $(id).value = "";
    $(id).placeholder = saved ? "(saved; type to replace)" : "";
  }
  if (!dialog.open) dialog.showModal();
  $(focus).focus();
}
