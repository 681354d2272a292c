// wfr console: small enhancements only; every page works without this script.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Filters: a changed select applies at once.
  const filters = document.getElementById("filters");
  if (filters) {
    for (const select of filters.querySelectorAll("select")) {
      select.addEventListener("change", () => filters.submit());
    }
  }
  // "/" focuses the first filter field, as in most consoles.
  document.addEventListener("keydown", (event) => {
    const field = document.querySelector("form.filters input[type=text]");
    if (event.key === "/" && field && document.activeElement === document.body) {
      event.preventDefault();
      field.focus();
    }
  });
  // A confirmation form is sent once: the button is disabled after the first click.
  for (const form of document.querySelectorAll("form.confirm")) {
    form.addEventListener("submit", () => {
      const button = form.querySelector("button[type=submit]");
      if (button) {
        button.disabled = true;
        button.textContent = "Working…";
      }
    });
  }
});
