// Small helpers the views share.

/** A field's value as a person reads it. */
export function display(value) {
  if (value === null || value === undefined || value === "") return "(empty)";
  if (value === true) return "yes";
  if (value === false) return "no";
  return String(value);
}

/**
 * A changed value glows briefly, so a person sees what the stream just did. The Web Animations
 * API restarts cleanly on each change and, unlike toggling a class, forces no layout, so a burst of
 * a thousand changes stays cheap (getAnimations() would flush style on each call, hence the map).
 */
const reducedMotion = matchMedia("(prefers-reduced-motion: reduce)");
const flashes = new WeakMap();
export function flash(element) {
  if (reducedMotion.matches || !element.animate) return;
  flashes.get(element)?.cancel();
  flashes.set(element, element.animate([{ backgroundColor: "var(--flash)" }, { backgroundColor: "transparent" }],
    { duration: 1600, easing: "ease-out" }));
}

/** Stops an element's glow, when what it showed is replaced by something else. */
export function unflash(element) {
  flashes.get(element)?.cancel();
}
