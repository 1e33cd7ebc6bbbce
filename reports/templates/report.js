(function () {
  "use strict";
  var query = document.getElementById("search");
  var status = document.getElementById("status-filter");
  var counter = document.getElementById("shown-count");
  function apply() {
    var text = query ? query.value.trim().toLowerCase() : "";
    var wanted = status ? status.value : "";
    var shown = 0;
    document.querySelectorAll("[data-search]").forEach(function (el) {
      var hit = el.getAttribute("data-search").indexOf(text) >= 0 &&
        (!wanted || el.getAttribute("data-status") === wanted);
      el.hidden = !hit;
      if (hit && el.tagName === "TR") { shown += 1; }
    });
    if (counter) { counter.textContent = String(shown); }
  }
  function openTarget() {
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }
  if (query) { query.addEventListener("input", apply); }
  if (status) { status.addEventListener("change", apply); }
  window.addEventListener("hashchange", openTarget);
  // Closed sections would print empty: open them all before printing.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });
  openTarget();
  // Marks a page whose script ran to the end (the browser test checks it).
  document.body.setAttribute("data-ready", "1");
})();
