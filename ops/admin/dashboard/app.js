// Floodgate live dashboard: polls data.json and draws SVG charts. No
// dependencies, nothing loaded from elsewhere, and every value from the
// server goes in as text (keys may be raw client data).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const COLORS = { allowed: "#3fb950", limited: "#f85149", blocked: "#bc8cff", reduced: "#d29922", shadow: "#8a98a8" };
const W = 600, H = 180, PAD = { l: 44, r: 10, t: 10, b: 22 };
const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(250, Number(params.get("refresh")) || 2000);

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmtInt(n) { return Number(n).toLocaleString("en-US"); }
function fmtMs(v) { return v == null ? "–" : (v < 1 ? v.toFixed(3) : v < 10 ? v.toFixed(2) : v.toFixed(1)) + " ms"; }
function fmtTime(ms) { return new Date(ms).toLocaleTimeString("en-GB", { hour12: false }); }
function sum(a) { return a.reduce((x, y) => x + y, 0); }

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// axes draws gridlines, y labels (0, half, max) and x time labels.
function axes(svg, times, yMax, fmt) {
  const ih = H - PAD.t - PAD.b;
  for (const f of [0, 0.5, 1]) {
    const y = PAD.t + ih * (1 - f);
    svg.appendChild(el("svg:line", { class: "gridline", x1: PAD.l, x2: W - PAD.r, y1: y, y2: y }));
    svg.appendChild(el("svg:text", { x: PAD.l - 6, y: y + 4, "text-anchor": "end" }, fmt(yMax * f)));
  }
  if (times.length > 1) {
    const idx = [0, Math.floor((times.length - 1) / 2), times.length - 1];
    idx.forEach((i, n) => {
      const x = xAt(i, times.length);
      svg.appendChild(el("svg:text", { x, y: H - 6, "text-anchor": ["start", "middle", "end"][n] }, fmtTime(times[i])));
    });
  }
}

function xAt(i, n) { return PAD.l + (W - PAD.l - PAD.r) * (n <= 1 ? 0 : i / (n - 1)); }
function yAt(v, max) { return PAD.t + (H - PAD.t - PAD.b) * (1 - v / max); }

// lineChart draws one path per series; null values break the line. Each
// path carries its series name, sum and last value as data attributes.
function lineChart(svg, times, series, opts) {
  svg.replaceChildren();
  let max = opts.max;
  if (max == null) {
    max = 0;
    for (const s of series) for (const v of s.values) if (v != null && v > max) max = v;
    max = niceMax(max);
  }
  axes(svg, times, max, opts.fmt || (v => fmtInt(Math.round(v))));
  for (const s of series) {
    let d = "", pen = false;
    s.values.forEach((v, i) => {
      if (v == null) { pen = false; return; }
      d += (pen ? "L" : "M") + xAt(i, s.values.length).toFixed(1) + "," + yAt(v, max).toFixed(1);
      pen = true;
    });
    const vals = s.values.filter(v => v != null);
    svg.appendChild(el("svg:path", {
      class: "series" + (s.dashed ? " dashed" : ""), d: d || "M0,0", stroke: s.color, "data-series": s.name,
      "data-sum": String(Math.round(sum(vals) * 1000) / 1000), "data-last": String(vals.length ? vals[vals.length - 1] : ""),
      "data-points": String(vals.length),
    }));
  }
}

function legend(items) {
  const box = el("div", { class: "legend" });
  for (const it of items) {
    const span = el("span", { "data-series": it.name });
    const sw = el("i", it.dashed ? { class: "dashed" } : {});
    sw.style.background = it.color;
    span.append(sw, it.label + " ", el("b", { class: "v" }, it.text !== undefined ? it.text : fmtInt(it.value)));
    box.appendChild(span);
  }
  return box;
}

function drawRules(stats) {
  const box = document.getElementById("rules");
  box.replaceChildren();
  if (!stats.rules || stats.rules.length === 0) {
    box.appendChild(el("p", { class: "hint" }, "No decisions yet."));
    return;
  }
  for (const r of stats.rules) {
    const fig = el("figure", { class: "rule", "data-rule": r.rule });
    fig.style.margin = "0";
    fig.appendChild(el("h3", { class: "hint" }, "rule " + r.rule));
    const names = ["allowed", "limited", "blocked", "reduced"];
    if (r.totals.shadow > 0) names.push("shadow");
    fig.appendChild(legend(names.map(n => ({ name: n, color: COLORS[n], label: n, value: r.totals[n] }))));
    const svg = el("svg:svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "rule " + r.rule });
    lineChart(svg, stats.times, names.map(n => ({ name: n, color: COLORS[n], values: r[n] })), {});
    fig.appendChild(svg);
    box.appendChild(fig);
  }
}

function drawRatio(stats) {
  const n = stats.times.length;
  const share = new Array(n).fill(null);
  for (let i = 0; i < n; i++) {
    let refused = 0, all = 0;
    for (const r of stats.rules || []) {
      refused += r.limited[i] + r.blocked[i] + r.reduced[i];
      all += r.limited[i] + r.blocked[i] + r.reduced[i] + r.allowed[i] + r.shadow[i];
    }
    if (all > 0) share[i] = refused / all;
  }
  lineChart(document.getElementById("ratio-chart"), stats.times,
    [{ name: "refused-share", color: COLORS.limited, values: share }],
    { max: 1, fmt: v => Math.round(v * 100) + "%" });
}

function drawRetry(buckets) {
  const svg = document.getElementById("retry-chart");
  svg.replaceChildren();
  const max = niceMax(Math.max(0, ...buckets.map(b => b.count)));
  axes(svg, [], max, v => fmtInt(Math.round(v)));
  const iw = W - PAD.l - PAD.r, bw = iw / buckets.length;
  buckets.forEach((b, i) => {
    const x = PAD.l + i * bw + 4, y = yAt(b.count, max);
    svg.appendChild(el("svg:rect", {
      x, y, width: bw - 8, height: Math.max(0, H - PAD.b - y), fill: COLORS.reduced,
      "data-le": String(b.le), "data-count": String(b.count), "data-label": b.label,
    }));
    svg.appendChild(el("svg:text", { x: x + (bw - 8) / 2, y: H - 6, "text-anchor": "middle" }, b.label));
    if (b.count > 0) svg.appendChild(el("svg:text", { x: x + (bw - 8) / 2, y: y - 3, "text-anchor": "middle" }, fmtInt(b.count)));
  });
}

// LATENCY_LINES are the latency chart's lines: store round trips (solid)
// and, apart, denials the store answered from its near cache without one
// (dashed), which take microseconds and would otherwise pull the store's
// quantiles down.
const LATENCY_LINES = [
  { name: "p50", of: "latency", q: "p50", color: COLORS.allowed, label: "store p50" },
  { name: "p95", of: "latency", q: "p95", color: COLORS.reduced, label: "store p95" },
  { name: "p99", of: "latency", q: "p99", color: COLORS.limited, label: "store p99" },
  { name: "cached-p50", of: "cached_latency", q: "p50", color: "#58a6ff", label: "near cache p50", dashed: true },
  { name: "cached-p99", of: "cached_latency", q: "p99", color: COLORS.blocked, label: "near cache p99", dashed: true },
];

function drawLatency(s) {
  const empty = { steps: s.times.map(() => ({})), overall: { n: 0 } };
  const of = k => s[k] || empty; // data from a Floodgate without the near-cache series
  lineChart(document.getElementById("latency-chart"), s.times,
    LATENCY_LINES.map(l => ({ name: l.name, color: l.color, dashed: l.dashed, values: of(l.of).steps.map(q => q[l.q]) })),
    { fmt: v => (v < 1 ? v.toFixed(2) : v.toFixed(1)) });
  for (const k of ["p50", "p95", "p99"]) document.getElementById("lat-" + k).textContent = fmtMs(s.latency.overall[k]);
  // Which line is which, with the quantile over the span shown, and how
  // many decisions each kind of answer timed.
  document.getElementById("latency-legend").replaceChildren(legend(
    LATENCY_LINES.map(l => ({ name: l.name, color: l.color, dashed: l.dashed, label: l.label, text: fmtMs(of(l.of).overall[l.q]) }))));
  document.getElementById("latency-counts").textContent =
    fmtInt(s.latency.overall.n) + " store round trips · " + fmtInt(of("cached_latency").overall.n) + " near-cache answers";
}

function fillTable(id, rows, cols, empty) {
  const tb = document.querySelector("#" + id + " tbody");
  tb.replaceChildren();
  if (rows.length === 0) {
    const tr = el("tr");
    tr.appendChild(el("td", { class: "empty", colspan: String(cols) }, empty));
    tb.appendChild(tr);
    return;
  }
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) tr.appendChild(el("td", c.cls ? { class: c.cls } : {}, String(c.v)));
    tb.appendChild(tr);
  }
}

function drawTop(top) {
  const rows = [];
  if (top) {
    document.getElementById("keys-kind").textContent = top.keys === "raw" ? "(raw keys)" : "(key fingerprints)";
    for (const rule of Object.keys(top.rules).sort()) {
      top.rules[rule].forEach((e, i) => rows.push([
        { v: rule }, { v: i + 1, cls: "num" }, { v: e.key, cls: "key" }, { v: fmtInt(e.count), cls: "num" }, { v: fmtInt(e.error), cls: "num" },
      ]));
    }
  }
  fillTable("top-table", rows, 5, "No limited keys.");
}

function drawReductions(list) {
  fillTable("reductions-table", (list || []).map(r => [
    { v: r.policy }, { v: Math.round(r.factor * 100) + "%", cls: "num" }, { v: fmtTime(Date.parse(r.until)) }, { v: r.reason || "" },
  ]), 4, "None: full capacity.");
}

function drawAlerts(al) {
  const rows = ((al && al.alerts) || []).slice(0, 15).map(a => [
    { v: fmtTime(Date.parse(a.time)) }, { v: a.rule }, { v: a.key, cls: "key" },
    { v: a.count + " / " + a.window_seconds + " s", cls: "num" }, { v: a.blocked_until ? fmtTime(Date.parse(a.blocked_until)) : "—" },
  ]);
  fillTable("alerts-table", rows, 5, "No abuse detected.");
}

function draw(d) {
  const s = d.stats;
  if (s) {
    const t = s.totals;
    document.getElementById("total-allowed").textContent = fmtInt(t.allowed);
    document.getElementById("total-limited").textContent = fmtInt(t.limited);
    document.getElementById("total-blocked").textContent = fmtInt(t.blocked);
    document.getElementById("total-reduced").textContent = fmtInt(t.reduced);
    document.getElementById("refused-share").textContent = (t.refused_share * 100).toFixed(1) + "%";
    document.getElementById("span-hint").textContent =
      "last " + Math.round(s.times.length * s.step_seconds / 60) + " min, " + s.step_seconds + " s steps";
    drawRules(s);
    drawRatio(s);
    drawRetry(s.retry_after);
    drawLatency(s);
  }
  drawTop(d.top);
  drawReductions(d.reductions);
  drawAlerts(d.alerts);
}

let updates = 0;
async function load() {
  const dot = document.getElementById("live"), status = document.getElementById("status");
  try {
    const resp = await fetch("data.json", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    draw(await resp.json());
    updates++;
    document.body.dataset.updates = String(updates);
    dot.className = "dot on";
    status.textContent = "updated " + fmtTime(Date.now()) + " · every " + REFRESH_MS / 1000 + " s";
  } catch (err) {
    dot.className = "dot off";
    status.textContent = "update failed: " + err.message;
  }
}

load();
setInterval(load, REFRESH_MS);
