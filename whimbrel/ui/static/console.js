/* Whimbrel console. Live parts of a page are replaced every few seconds (htmx polling);
   keep what the reader opened (JSON outputs, errors) open across those refreshes. */
(function () {
  "use strict";
  var open = new Set();
  document.addEventListener("htmx:beforeSwap", function () {
    open = new Set();
    document.querySelectorAll("details[open][id]").forEach(function (d) { open.add(d.id); });
  });
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("details[id]").forEach(function (d) {
      if (open.has(d.id)) { d.open = true; }
    });
  });
})();
