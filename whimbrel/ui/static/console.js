/* Whimbrel console. Live parts of a page are replaced every few seconds (htmx polling);
   keep what the reader opened (JSON outputs, errors) open across those refreshes, and
   say so when refreshes fail: what is shown is then as old as the last good one. */
(function () {
  "use strict";
  var open = new Set();
  var lastGood = new Date();
  document.addEventListener("htmx:beforeSwap", function () {
    open = new Set();
    document.querySelectorAll("details[open][id]").forEach(function (d) { open.add(d.id); });
  });
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("details[id]").forEach(function (d) {
      if (open.has(d.id)) { d.open = true; }
    });
  });

  function stale(why) {
    var box = document.getElementById("stale");
    if (!box) { return; }
    box.textContent = "Not refreshed since " + lastGood.toLocaleTimeString() + ": " + why +
      ". What this page shows may be out of date; it keeps trying.";
    box.hidden = false;
  }
  document.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail && e.detail.successful) {
      lastGood = new Date();
      var box = document.getElementById("stale");
      if (box) { box.hidden = true; }
    }
  });
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail && e.detail.xhr;
    stale("the console answered " + (xhr ? xhr.status : "an error"));
  });
  document.addEventListener("htmx:sendError", function () {
    stale("the console did not answer");
  });
  document.addEventListener("htmx:timeout", function () {
    stale("the refresh timed out");
  });
})();
