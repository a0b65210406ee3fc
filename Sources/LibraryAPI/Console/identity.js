// Who the signed-in token says its holder is, and what its rights claim lets it do, for the
// header. Read from the token's payload without verifying it: the server verifies every request
// and decides; this only tells the person at the screen what to expect. The rights are read from
// the claim `libraries` (the server's default `--jwt-claim`).

/** The claims of a JWT, or null when `token` is not one. */
export function claimsOf(token) {
  const payload = token.split(".")[1];
  if (!payload || token.split(".").length !== 3) return null;
  try {
    const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
    const text = atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, "="));
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0))));
    return claims && typeof claims === "object" && !Array.isArray(claims) ? claims : null;
  } catch {
    return null;
  }
}

/**
 * "Signed in as SUB · reads A, B · writes A · until 14:05", or null for a token that is not a
 * JWT. `nameOf(id)` gives a library's name when the page knows it.
 */
export function describeIdentity(token, nameOf = () => undefined) {
  const claims = claimsOf(token);
  if (!claims) return null;
  const rights = claims.libraries && typeof claims.libraries === "object" ? claims.libraries : {};
  const ids = (value) => (Array.isArray(value) ? value.filter((id) => typeof id === "string") : []);
  const list = (values) => {
    if (values.includes("*")) return "every library";
    if (values.length === 0) return "nothing";
    return values.map((id) => nameOf(id) || id.slice(0, 8)).join(", ");
  };
  const writes = ids(rights.write);
  const reads = [...new Set([...ids(rights.read), ...writes])];
  const what = rights.admin === true
    ? "admin: reads and writes every library"
    : `reads ${list(reads)} · writes ${list(writes)}`;
  const who = typeof claims.sub === "string" ? claims.sub : "(no sub)";
  const until = Number.isInteger(claims.exp)
    ? ` · until ${new Date(claims.exp * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}`
    : "";
  return `Signed in as ${who} · ${what}${until}`;
}
