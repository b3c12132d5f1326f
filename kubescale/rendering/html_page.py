"""The furniture of kubescale's HTML reports: inline style sheet and script, escaping, cards.

Shared by the simulator's report (:mod:`kubescale.sim.scenario.html_report`) and the live
cluster's (:mod:`kubescale.report.html_page`), so both look alike. Everything is inlined into the
page: a report must open from disk with nothing fetched. The script is plain DOM code (no
library) and only adds hover read-outs to charts; a page is complete without it.
"""

from __future__ import annotations

import html
from typing import Final

__all__ = ["HOVER_SCRIPT", "PAGE_CSS", "card", "escape", "number"]


def escape(text: object) -> str:
    """HTML text of any value."""
    return html.escape(str(text))


def number(value: float | None, decimals: int, scale: float = 1.0) -> str:
    """``value / scale`` with thousands separators, or an en dash for none."""
    return "–" if value is None else f"{value / scale:,.{decimals}f}"


def card(label: str, value: str, *, alert: bool = False) -> str:
    """One headline figure (the row of cards at the top of a report)."""
    css = "card alert" if alert else "card"
    return f'<div class="{css}"><b>{escape(value)}</b><span>{escape(label)}</span></div>'


PAGE_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#0f172a;
background:#f8fafc;margin:0}
main{max-width:1340px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 2px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #cbd5e1;padding-bottom:4px}
.sub{color:#475569;margin:0 0 14px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0 16px}
.card{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:20px}.card span{color:#475569;font-size:12px}
.card.alert b{color:#dc2626}
.panel{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:8px;margin:8px 0}
.pair{display:flex;flex-wrap:wrap;gap:8px}
.label{font-size:13px;color:#334155;margin:10px 0 2px}
table{border-collapse:collapse;background:#fff;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #e2e8f0;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f1f5f9;position:sticky;top:0}
td.name,th.name{text-align:left}td.sub{padding-left:22px;color:#334155}
tr.workload td{font-weight:600;background:#f8fafc}
svg text{font:11px system-ui,sans-serif;fill:#334155}
svg text.title{font-weight:600;font-size:12px;fill:#0f172a}
svg text.ylabel{text-anchor:end}svg text.xlabel{text-anchor:middle}
svg .grid{stroke:#e2e8f0}svg .tick{stroke:#eef2f7}svg .axis{stroke:#94a3b8}
svg .series{stroke-width:1.6}svg .span{fill:#f59e0b;fill-opacity:.16}
svg .cursor{stroke:#0f172a;stroke-dasharray:2 2}
svg.chart,svg.strip{max-width:100%;height:auto}
#tooltip{position:absolute;display:none;background:#0f172aee;color:#f8fafc;font-size:12px;
padding:5px 8px;border-radius:5px;pointer-events:none;white-space:nowrap}
details>summary{cursor:pointer;color:#1d4ed8;margin:8px 0}
td.wrap{white-space:normal;min-width:16em}th{white-space:normal}
p.alert{color:#b91c1c;font-weight:600;margin:4px 0}
table.comparison td,table.comparison th{font-size:13.5px}
.none{color:#64748b}
.over{color:#b45309}.under{color:#dc2626}.ok{color:#15803d}
"""

# Hover read-out: the value of every series at the pointer's time (the last sample at or before
# it). Plain DOM code; no data leaves the page. When every chart is wired the body gets
# data-charts-ready=<count>, which the browser test reads back from the rendered DOM.
HOVER_SCRIPT: Final = """
(function () {
  var tip = document.getElementById("tooltip");
  var start = Date.parse(document.body.getAttribute("data-start"));
  function fmt(v, unit) {
    if (v === null || v === undefined) { return "none"; }
    if (unit === "bytes") { return (v / 1048576).toFixed(1) + " MiB"; }
    if (unit === "cores") { return v.toFixed(3) + " cores"; }
    return String(v);
  }
  function at(ts, t) {
    var lo = 0, hi = ts.length - 1, found = -1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (ts[mid] <= t) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    return found;
  }
  var charts = document.querySelectorAll("svg.chart");
  charts.forEach(function (svg) {
    var data = JSON.parse(svg.getAttribute("data-series"));
    var x0 = Number(svg.getAttribute("data-x0")), x1 = Number(svg.getAttribute("data-x1"));
    var span = Number(svg.getAttribute("data-span"));
    var cursor = svg.querySelector("line.cursor");
    function hide() { tip.style.display = "none"; cursor.setAttribute("visibility", "hidden"); }
    svg.addEventListener("mouseleave", hide);
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var x = (ev.clientX - box.left) * (svg.viewBox.baseVal.width / box.width);
      if (x < x0 || x > x1) { hide(); return; }
      var t = (x - x0) / (x1 - x0) * span;
      tip.textContent = "";
      var head = document.createElement("div");
      head.textContent = new Date(start + t * 1000).toISOString().slice(11, 19) + " UTC";
      tip.appendChild(head);
      data.series.forEach(function (s) {
        var i = at(s.t, t);
        var row = document.createElement("div");
        row.style.color = s.color;
        var held = i >= 0 && t - s.t[i] <= s.hold;
        row.textContent = s.label + ": " + (held ? fmt(s.v[i], data.unit) : "none");
        tip.appendChild(row);
      });
      cursor.setAttribute("x1", x); cursor.setAttribute("x2", x);
      cursor.setAttribute("visibility", "visible");
      tip.style.display = "block";
      tip.style.left = (ev.pageX + 14) + "px"; tip.style.top = (ev.pageY + 10) + "px";
    });
  });
  document.body.setAttribute("data-charts-ready", String(charts.length));
})();
"""
