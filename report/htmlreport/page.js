// widetp report page: switches the picture between every rank and folded runs, selects processes
// (picture, table, violations), filters the process table. Data is read from the page itself and
// written back only through textContent, never as markup.
(function () {
  "use strict";
  var records = JSON.parse(document.getElementById("widetp-records").textContent || "[]");
  var pictures = Array.prototype.slice.call(document.querySelectorAll("svg.topology"));
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.procs tbody tr"));
  var rowByIndex = {};
  rows.forEach(function (r) { rowByIndex[r.getAttribute("data-p")] = r; });
  var selected = null; // null, or an object whose keys are process indices

  function members(el) {
    return (el.getAttribute("data-p") || "").split(" ").filter(function (s) { return s !== ""; });
  }

  function visiblePicture() {
    for (var i = 0; i < pictures.length; i++) {
      if (pictures[i].style.display !== "none") { return pictures[i]; }
    }
    return null;
  }

  function showView(view) {
    pictures.forEach(function (svg) {
      svg.style.display = svg.getAttribute("data-view") === view ? "" : "none";
    });
    document.querySelectorAll(".views button").forEach(function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-view") === view ? "true" : "false");
    });
    markPicture();
  }

  function markPicture() {
    var svg = visiblePicture();
    if (!svg) { return; }
    svg.querySelectorAll("g.p").forEach(function (g) {
      var on = false;
      if (selected) {
        var ms = members(g);
        for (var i = 0; i < ms.length; i++) { if (selected[ms[i]]) { on = true; break; } }
      }
      g.classList.toggle("selected", on);
    });
  }

  function select(indices, pulse) {
    var detail = document.getElementById("detail");
    if (!indices || indices.length === 0) {
      selected = null;
      detail.hidden = true;
    } else {
      selected = {};
      indices.forEach(function (i) { selected[i] = true; });
      var shown = indices.slice(0, 12).map(function (i) { return records[+i]; });
      var title = indices.length === 1 && records[+indices[0]] ? String(records[+indices[0]].id) : indices.length + " processes";
      document.getElementById("detail-title").textContent = title;
      var body = shown.map(function (r) { return JSON.stringify(r, null, 2); }).join("\n\n");
      if (indices.length > shown.length) { body += "\n\n… and " + (indices.length - shown.length) + " more (see the table)"; }
      document.getElementById("detail-body").textContent = body;
      detail.hidden = false;
    }
    rows.forEach(function (r) { r.classList.toggle("selected", !!(selected && selected[r.getAttribute("data-p")])); });
    markPicture();
    if (pulse) {
      var svg = visiblePicture();
      if (svg) {
        svg.querySelectorAll("g.p.selected").forEach(function (g) {
          g.classList.remove("pulse");
          void g.getBoundingClientRect();
          g.classList.add("pulse");
        });
      }
    }
    filter();
  }

  pictures.forEach(function (svg) {
    svg.addEventListener("click", function (ev) {
      var g = ev.target.closest ? ev.target.closest("g.p") : null;
      if (!g) { return; }
      var ms = members(g);
      if (ms.length > 1 && svg.getAttribute("data-view") === "compact" && pictures.length > 1) {
        showView("expanded");
        select(ms, true);
        return;
      }
      select(ms, false);
    });
    svg.addEventListener("keydown", function (ev) {
      if ((ev.key === "Enter" || ev.key === " ") && ev.target.closest && ev.target.closest("g.p")) {
        ev.preventDefault();
        ev.target.closest("g.p").dispatchEvent(new MouseEvent("click", { bubbles: true }));
      }
    });
  });

  document.querySelectorAll(".views button").forEach(function (b) {
    b.addEventListener("click", function () { showView(b.getAttribute("data-view")); });
  });

  var clear = document.getElementById("detail-clear");
  if (clear) { clear.addEventListener("click", function () { select(null); }); }

  document.querySelectorAll("a.ref").forEach(function (a) {
    a.addEventListener("click", function () { select(members(a), true); });
  });
  rows.forEach(function (r) {
    r.addEventListener("click", function () { select(members(r), true); });
  });

  var fHost = document.getElementById("f-host");
  var fReplica = document.getElementById("f-replica");
  var fKind = document.getElementById("f-kind");
  var fText = document.getElementById("f-text");
  var texts = null;

  function filter() {
    var host = fHost ? fHost.value : "";
    var replica = fReplica ? fReplica.value : "";
    var kind = fKind ? fKind.value : "";
    var q = fText ? fText.value.trim().toLowerCase() : "";
    if (q && !texts) { texts = rows.map(function (r) { return r.textContent.toLowerCase(); }); }
    var n = 0;
    rows.forEach(function (r, i) {
      var kinds = r.getAttribute("data-kinds") || "";
      var ok = (!host || r.getAttribute("data-host") === host) &&
        (!replica || r.getAttribute("data-replica") === replica) &&
        (!kind || (kind === "*" ? kinds !== "" : kind === "-" ? kinds === "" : (" " + kinds + " ").indexOf(" " + kind + " ") >= 0)) &&
        (!q || texts[i].indexOf(q) >= 0) &&
        (!selected || selected[r.getAttribute("data-p")]);
      r.hidden = !ok;
      if (ok) { n++; }
    });
    var shown = document.getElementById("shown");
    if (shown) { shown.textContent = n === rows.length ? String(n) : n + " of " + rows.length; }
  }

  [fHost, fReplica, fKind].forEach(function (el) { if (el) { el.addEventListener("change", filter); } });
  if (fText) { fText.addEventListener("input", filter); }
  var reset = document.getElementById("f-reset");
  if (reset) {
    reset.addEventListener("click", function () {
      [fHost, fReplica, fKind, fText].forEach(function (el) { if (el) { el.value = ""; } });
      select(null);
    });
  }
  document.documentElement.setAttribute("data-ready", "true");
})();
