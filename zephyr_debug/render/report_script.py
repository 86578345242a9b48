"""The stylesheet and the one script of `zdebug report`'s page (plain JS, no network).

The script draws every figure from its JSON spec, hides timeline labels that would overlap an
earlier (higher-ranked) one, makes `table.sortable` sort on a header click, and makes a
finding's "timeline" link scroll to its bar and outline it. When all is drawn it sets
`body[data-rendered]` to the number of figures and writes the drawing time in the footer.
"""

from __future__ import annotations

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1400px;padding:0 16px;color:#222}
h1{font-size:22px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd} h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0} td,th{padding:3px 10px;border-bottom:1px solid #eee;
text-align:left;vertical-align:top} th{background:#f6f6f6} td.n{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;user-select:none} table.sortable th[data-dir=asc]::after{content:" \\25B2"}
table.sortable th[data-dir=desc]::after{content:" \\25BC"}
code,pre{font:12px ui-monospace,monospace} pre{background:#f6f6f6;padding:8px;overflow-x:auto}
.muted{color:#777} .cause{font-weight:600;color:#c0392b} .headline{font-size:16px;font-weight:600}
.sev{font-weight:700;padding:0 6px;border-radius:3px;color:#fff} .sev-error{background:#c0392b}
.sev-warning{background:#d68910} .sev-info{background:#5d6d7e}
.swatch{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px}
tr.target td{background:#fdebd0} .scroll{max-height:520px;overflow:auto}
footer{margin-top:40px;font-size:12px;color:#666;border-top:1px solid #ddd;padding-top:8px}
"""

SCRIPT = """
(function () {
  const t0 = performance.now();
  function overlaps(a, b) {
    return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }
  // Timeline labels come ranked (most important first): drop any that overlaps a kept one.
  function unclutter(div) {
    const kept = [], hide = {};
    div.querySelectorAll("g.annotation").forEach(function (g) {
      const box = g.getBoundingClientRect();
      if (kept.some(function (k) { return overlaps(k, box); })) {
        hide["annotations[" + g.dataset.index + "].visible"] = false;
      } else {
        kept.push(box);
      }
    });
    const n = Object.keys(hide).length;
    const note = document.getElementById(div.id + "-labels");
    if (note && n) {
      note.textContent = n + " label(s) left out where they would overlap another; " +
        "their bars keep the outline and are listed under Findings.";
    }
    div.dataset.labelsHidden = String(n);
    return n ? Plotly.relayout(div, hide) : Promise.resolve();
  }
  const drawn = Array.from(document.querySelectorAll("div.plot")).map(function (div) {
    const spec = JSON.parse(document.getElementById(div.id + "-spec").textContent);
    return Plotly.newPlot(div, spec.data, spec.layout, {displaylogo: false, responsive: true})
      .then(function () { return div.dataset.labels ? unclutter(div) : null; });
  });
  // Sortable tables: cells carry their sort key in data-v (numbers sort as numbers).
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        const dir = th.dataset.dir === "asc" ? "desc" : "asc";
        table.querySelectorAll("th").forEach(function (h) { delete h.dataset.dir; });
        th.dataset.dir = dir;
        const body = table.tBodies[0], sign = dir === "asc" ? 1 : -1;
        const key = function (tr) {
          const td = tr.cells[col], v = td.dataset.v !== undefined ? td.dataset.v : td.textContent;
          return v === "" || isNaN(v) ? v : Number(v);
        };
        Array.from(body.rows).map(function (tr) { return [key(tr), tr]; }).sort(function (a, b) {
          const x = a[0], y = b[0];
          if (typeof x === typeof y) { return (x < y ? -1 : x > y ? 1 : 0) * sign; }
          return typeof x === "number" ? -1 : 1;  // blanks last
        }).forEach(function (pair) { body.appendChild(pair[1]); });
      });
    });
  });
  // A finding's timeline link: scroll to its figure and outline its bar.
  function jump(link) {
    const div = document.getElementById(link.dataset.fig);
    if (!div) { return; }
    document.querySelectorAll("tr.target").forEach(function (tr) { tr.classList.remove("target"); });
    link.closest("tr").classList.add("target");
    const y = Number(link.dataset.y);
    Plotly.relayout(div, {shapes: [{type: "rect", xref: "x", yref: "y", x0: Number(link.dataset.x0),
      x1: Number(link.dataset.x1), y0: y - 0.5, y1: y + 0.5, line: {color: link.dataset.color, width: 3},
      fillcolor: link.dataset.color, opacity: 0.35}]});
    div.scrollIntoView({block: "center"});
  }
  document.querySelectorAll("a.jump").forEach(function (link) {
    link.addEventListener("click", function (event) { event.preventDefault(); jump(link); });
  });
  Promise.all(drawn).then(function () {
    document.getElementById("render-ms").textContent = Math.round(performance.now() - t0) + " ms";
    const target = location.hash && document.querySelector("a.jump[data-finding='" + location.hash.slice(1) + "']");
    if (target) { jump(target); }
    document.body.dataset.rendered = String(drawn.length);
  });
})();
"""
