// ridgeline report: sortable tables (click a header) and a self-test for headless browsers (#selftest).
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message || e)); });

  function key(cell) {
    var v = cell ? cell.getAttribute("data-sort") : null;
    if (v === null) { return cell ? cell.textContent.trim().toLowerCase() : null; }
    if (v === "") { return null; }  // missing values sort last in both directions
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }

  function sortTable(table, col, dir) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (i === col) { th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending"); }
      else { th.removeAttribute("aria-sort"); }
    });
  }

  function install() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
        th.addEventListener("click", function () {
          sortTable(table, i, th.getAttribute("aria-sort") === "ascending" ? -1 : 1);
        });
      });
    });
  }

  function ordered(values, dir) {
    var nums = values.filter(function (v) { return typeof v === "number"; });
    for (var i = 1; i < nums.length; i++) { if ((nums[i] - nums[i - 1]) * dir < 0) { return false; } }
    return nums.length > 0;
  }

  // Sort the first numeric column both ways, check the order, count decoded plots; report in a DOM marker.
  function selftest() {
    var result = { tables: document.querySelectorAll("table").length, sorted: false, plots: 0, images: 0 };
    var table = document.querySelector("table.sortable[data-numeric]");
    if (table) {
      var col = Number(table.getAttribute("data-numeric"));
      var th = table.tHead.rows[0].cells[col];
      var col_values = function () {
        return Array.prototype.map.call(table.tBodies[0].rows, function (r) { return key(r.cells[col]); });
      };
      th.click();
      var up = ordered(col_values(), 1);
      th.click();
      var down = ordered(col_values(), -1);
      result.sorted = up && down;
    }
    var imgs = document.querySelectorAll("figure img");
    result.images = imgs.length;
    Array.prototype.forEach.call(imgs, function (img) { if (img.complete && img.naturalWidth > 0) { result.plots++; } });
    result.errors = errors;
    var ok = result.tables > 0 && result.sorted && result.plots === result.images && errors.length === 0;
    var marker = document.createElement("pre");
    marker.id = "rl-selftest";
    marker.setAttribute("data-status", ok ? "ok" : "fail");
    marker.textContent = JSON.stringify(result);
    document.body.appendChild(marker);
  }

  document.addEventListener("DOMContentLoaded", install);
  window.addEventListener("load", function () { if (location.hash === "#selftest") { selftest(); } });
}());
