// The token form: a signed token (the user's own, from the identity provider), or the server's
// read token and API token, typed once per tab.
//
// The boxes are always empty when the form opens: a saved token is never put back into the page,
// where it could be read off the screen or the DOM. An empty box on submit keeps what was saved,
// so adding the API token later does not mean typing the read token again.

import { tokens, onUnauthorized } from "./api.js";
import { describeIdentity } from "./identity.js";

const $ = (id) => document.getElementById(id);

/** onChanged() runs after the tokens were saved or forgotten, to load again with them. */
export function setUpTokenForm(onChanged) {
  const dialog = $("tokens");
  $("tokens-button").addEventListener("click", () => openTokenForm());
  $("tokens-cancel").addEventListener("click", () => dialog.close());
  $("tokens-clear").addEventListener("click", () => {
    tokens.save("", "", "");
    dialog.close();
    onChanged();
  });
  $("tokens-form").addEventListener("submit", (event) => {
    event.preventDefault();
    tokens.save($("read-token").value.trim() || tokens.read, $("api-token").value.trim() || tokens.write,
      $("signed-token").value.trim() || tokens.signed);
    for (const id of ["read-token", "api-token", "signed-token"]) $(id).value = "";
    dialog.close();
    onChanged();
  });
  onUnauthorized((error) => {
    const writing = error.method !== "GET" && error.method !== "HEAD";
    if (tokens.signed) {
      openTokenForm(`Your signed token was refused: ${error.message} Sign in again.`, "signed-token");
      return;
    }
    openTokenForm(writing
      ? "Changes need the API token (or a signed token that may write)."
      : "The server needs a token to show its data: a signed token, the read token or the API token.",
    writing ? "api-token" : "read-token");
  });
}

/** Opens the form; `reason` says why the page asks (a 401), `focus` is the box to type into. */
export function openTokenForm(reason = "", focus = "read-token") {
  const dialog = $("tokens");
  $("tokens-reason").textContent = reason;
  $("tokens-reason").hidden = !reason;
  dialog.dataset.reason = reason ? "unauthorized" : "";
  for (const [id, saved] of [["read-token", tokens.read], ["api-token", tokens.write],
    ["signed-token", tokens.signed]]) {
    $(id).value = "";
    $(id).placeholder = saved ? "(saved; type to replace)" : "";
  }
  if (!dialog.open) dialog.showModal();
  $(focus).focus();
}

/** Shows who the signed token names and what it may do in the header (hidden without one). */
export function showIdentity(nameOf) {
  const element = $("identity");
  const text = tokens.signed ? describeIdentity(tokens.signed, nameOf) : null;
  element.textContent = text || "";
  element.hidden = !text;
}
