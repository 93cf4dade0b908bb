(function () {
  "use strict";
  var doc = document.documentElement;
  window.addEventListener("error", function (e) {
    doc.setAttribute("data-report-error", String(e.message || e));
  });
  function each(list, fn) { Array.prototype.forEach.call(list, fn); }

  function cellKey(row, col) {
    var cell = row.cells[col];
    if (!cell) { return ""; }
    var key = cell.getAttribute("data-sort");
    return key !== null ? key : cell.textContent.trim();
  }

  function sortTable(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    each(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var x = cellKey(a, col), y = cellKey(b, col);
      var nx = Number(x), ny = Number(y);
      var r = (x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny)) ? nx - ny
        : x.localeCompare(y, undefined, { numeric: true, sensitivity: "base" });
      return r * dir;
    });
    each(rows, function (r) { body.appendChild(r); });
  }

  function applyFilters(tableId) {
    var table = document.getElementById(tableId);
    if (!table) { return; }
    var controls = document.querySelectorAll('[data-filter-for="' + tableId + '"]');
    var shown = 0, total = 0;
    each(controls, function (ctl) { if (ctl.value.trim()) { unpage(tableId); } });
    each(table.tBodies[0].rows, function (row) {
      var ok = true;
      each(controls, function (ctl) {
        var want = ctl.value.trim().toLowerCase();
        if (!want) { return; }
        var attr = ctl.getAttribute("data-filter-attr");
        if (attr) {
          ok = ok && (row.getAttribute("data-" + attr) || "").toLowerCase() === want;
        } else {
          ok = ok && row.textContent.toLowerCase().indexOf(want) !== -1;
        }
      });
      row.hidden = !ok;
      total += 1;
      if (ok) { shown += 1; }
    });
    each(document.querySelectorAll('[data-count-for="' + tableId + '"]'), function (el) {
      el.textContent = shown === total ? String(total) : shown + " of " + total;
    });
  }

  function unpage(tableId) {
    var table = document.getElementById(tableId);
    if (table) { table.classList.remove("paged"); }
    each(document.querySelectorAll('[data-unpage="' + tableId + '"]'), function (button) {
      button.parentElement.hidden = true;
    });
  }

  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (!id) { return; }
    var el = document.getElementById(id);
    if (!el) { return; }
    for (var p = el; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; }
      if (p.tagName === "TABLE" && p.classList.contains("paged")) { unpage(p.id); }
    }
    el.scrollIntoView({ block: "center" });
  }

  try {
    each(document.querySelectorAll("table.sortable"), function (table) {
      if (!table.tHead) { return; }
      each(table.tHead.rows[0].cells, function (th, col) {
        th.tabIndex = 0;
        th.title = "Sort";
        var go = function () { sortTable(table, col, th); };
        th.addEventListener("click", go);
        th.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); }
        });
      });
    });
    each(document.querySelectorAll("[data-unpage]"), function (button) {
      button.addEventListener("click", function () { unpage(button.getAttribute("data-unpage")); });
    });
    each(document.querySelectorAll("[data-filter-for]"), function (ctl) {
      var id = ctl.getAttribute("data-filter-for");
      ctl.addEventListener("input", function () { applyFilters(id); });
      ctl.addEventListener("change", function () { applyFilters(id); });
      applyFilters(id);
    });
    each(document.querySelectorAll("[data-toggle-all]"), function (btn) {
      btn.addEventListener("click", function () {
        var open = btn.getAttribute("data-toggle-all") === "open";
        each(document.querySelectorAll(btn.getAttribute("data-target")), function (d) { d.open = open; });
      });
    });
    window.addEventListener("hashchange", openTarget);
    openTarget();
    doc.setAttribute("data-report-ready", "ok");
  } catch (e) {
    doc.setAttribute("data-report-error", String(e && e.message ? e.message : e));
  }
})();
