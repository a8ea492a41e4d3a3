// The iez dashboard: polls /dashboard/state with the site token and redraws. Text only goes
// through textContent, so an application's name cannot inject markup.
"use strict";
const params = new URLSearchParams(location.search);
const INTERVAL_MS = 1000 * (Number(params.get("interval")) || 2);
let timer = null;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function table(id, head, rows) {
  const t = document.getElementById(id);
  t.replaceChildren();
  const tr = el("tr");
  head.forEach((h, i) => tr.appendChild(el("th", h, i === 0 ? "l" : "")));
  t.appendChild(tr);
  rows.forEach(cells => {
    const r = el("tr");
    cells.forEach((c, i) => {
      const td = c instanceof Node ? el("td") : el("td", c, i === 0 ? "l" : "");
      if (c instanceof Node) td.appendChild(c);
      r.appendChild(td);
    });
    t.appendChild(r);
  });
}

const pct = x => (x === null || x === undefined) ? "—" : (100 * x).toFixed(1) + " %";
const rate = x => (x === null || x === undefined) ? "—" : (x / 1048576).toFixed(1) + " MiB/s";
const age = x => (x === null || x === undefined) ? "never" : x.toFixed(1) + " s";
const gib = kib => (kib === undefined) ? "—" : (kib / 1048576).toFixed(1);

function usage(x) {
  const span = el("span");
  const bar = el("span", null, "bar");
  bar.style.width = (x ? Math.round(80 * x) : 0) + "px";
  span.appendChild(bar);
  span.appendChild(document.createTextNode(" " + pct(x)));
  return span;
}

function staleCell(stale) { return el("span", stale ? "stale" : "fresh", stale ? "stale" : "muted"); }

function draw(s) {
  const c = s.cluster;
  document.getElementById("fsname").textContent = c.fsname;
  const sum = document.getElementById("summary");
  sum.replaceChildren(
    el("span", "OSTCost " + (c.ost_cost === null ? "—" : c.ost_cost.toFixed(3)) + " (1 = balanced, lower is better)"),
    el("span", "fresh OSTs " + s.health.fresh_osts + " / " + c.osts.length),
    el("span", "policy " + s.policy),
    el("span", "updated " + new Date().toLocaleTimeString(), "muted"));
  sum.firstChild.id = "ostcost";
  table("osts", ["target", "OSS", "state", "used", "size GiB", "write", "read", "age", ""],
    c.osts.map(o => [o.name, o.oss, o.state, usage(o.utilization), gib(o.kbytestotal),
                     rate(o.write_bps), rate(o.read_bps), age(o.age), staleCell(o.stale)]));
  const hosts = [...c.osses.map(h => ["OSS", h]), ["MDS", c.mds]];
  table("osses", ["host", "role", "CPU load / core", "memory used", "age", ""],
    hosts.map(([role, h]) => [h.name, role, h.load ? h.load.cpu.toFixed(2) : "—",
                              h.load ? pct(h.load.mem) : "—", age(h.age), staleCell(h.stale)]));
  const k = s.counters;
  table("worker", ["", "predict", "allocate"],
    [["done", k.done.predict, k.done.allocate], ["failed", k.errors.predict, k.errors.allocate],
     ["queue", s.health.pending === null ? "—" : s.health.pending, ""],
     ["waiting", (s.health.waiting || []).join("; ") || "—", ""],
     ["collector messages", "accepted " + k.messages.accepted, "rejected " + k.messages.rejected]]);
  table("apps", ["application", "runs", "next plan", "plan hits", "plan misses", "pending", "retrace"],
    s.apps.map(a => [a.app, a.n_runs,
                     a.next_plan ? "run " + a.next_plan.run + " (" + a.next_plan.planned + ")" : "—",
                     a.plan_hits, a.plan_misses,
                     a.pending.map(p => p.work + " run " + p.run + (p.failed ? " failed: " + p.failed : "")).join("; ") || "—",
                     a.retrace ? "yes" : "no"]));
  const io = document.getElementById("iocop");
  io.replaceChildren();
  if (!s.iocop.configured) {
    io.appendChild(el("p", "Not shown: start the controller with --iocop ENDPOINT to see IO-Cop's holders and queue.", "muted"));
  } else if (s.iocop.error) {
    io.appendChild(el("p", s.iocop.endpoint + ": " + s.iocop.error, "stale"));
  } else {
    const secs = x => (x === null || x === undefined) ? "—" : x.toFixed(1) + " s";
    const h = el("table"); h.id = "holders"; io.appendChild(el("h3", "holders")); io.appendChild(h);
    table("holders", ["application", "job", "phase", "OSTs", "held"],
      s.iocop.holders.map(x => [x.app, x.jobid || "—", x.phase, x.osts || "all", secs(x.held_s)]));
    const w = el("table"); w.id = "waiting"; io.appendChild(el("h3", "queue")); io.appendChild(w);
    table("waiting", ["application", "position", "phase", "OSTs", "waited", "expected in"],
      s.iocop.waiting.map(x => [x.app, x.position, x.phase, x.osts || "all", secs(x.waited_s), secs(x.eta_s)]));
  }
}

async function poll() {
  const token = sessionStorage.getItem("iez-site-token");
  if (!token) return;
  try {
    const r = await fetch("/dashboard/state", {headers: {Authorization: "Bearer " + token}, cache: "no-store"});
    const body = await r.json();
    if (!r.ok) throw new Error(r.status + ": " + (body.detail || r.statusText));
    document.getElementById("error").textContent = "";
    draw(body);
  } catch (e) {
    document.getElementById("error").textContent = "cannot read the controller's state: " + e.message;
  }
}

document.getElementById("login").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("iez-site-token", document.getElementById("token").value.trim());
  document.getElementById("token").value = "";
  poll();
  if (timer === null) timer = setInterval(poll, INTERVAL_MS);
});
if (sessionStorage.getItem("iez-site-token")) { poll(); timer = setInterval(poll, INTERVAL_MS); }
