// The Loopgate dashboard: polls the admin port's JSON endpoints and its
// /metrics page once a second and draws the tables. Plain DOM, no
// framework; every value goes in as text, never as HTML.
"use strict";

const base = new URL("..", location.href); // the admin port's root, whatever serves /ui/
const period = 1000;
let token = sessionStorage.getItem("loopgate-token") || "";
let last = null; // the previous /metrics sample: {at, routes}
let shownVersions = ""; // the /config/versions answer drawn: redrawn only when it changes, so a button stays put under the pointer

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

// get fetches path off the admin root; a 401 or 403 asking for a token
// shows the token form. It returns the Response, or null on a network error.
async function get(path) {
  try {
    const r = await fetch(new URL(path, base), { headers: headers(), cache: "no-store" });
    if (r.status === 401) askToken();
    return r;
  } catch (e) {
    return null;
  }
}

function askToken() {
  document.getElementById("token").hidden = false;
  setStatus("needs a token", "bad");
}

document.getElementById("token").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = document.getElementById("token-value").value.trim();
  sessionStorage.setItem("loopgate-token", token);
  document.getElementById("token").hidden = true;
  tick();
});

function setStatus(text, cls) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status " + (cls || "");
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fill(id, rows) {
  const body = document.getElementById(id);
  const next = rows.map((cells) => {
    const tr = document.createElement("tr");
    cells.forEach((c) => tr.appendChild(c));
    return tr;
  });
  body.replaceChildren(...next);
}

// parseMetrics reads the Prometheus text page into
// {name: [{labels: {...}, value}]}, for the loopgate_route_* families only.
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith("loopgate_route_")) continue;
    const m = line.match(/^([a-z_]+)(?:\{(.*)\})? (\S+)$/);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      for (const l of m[2].matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
    }
    (out[m[1]] = out[m[1]] || []).push({ labels, value: parseFloat(m[3]) });
  }
  return out;
}

// routeStats sums, per route, what the overview needs from a parsed page.
function routeStats(fam) {
  const r = {};
  const of = (name) => (r[name] = r[name] || { total: 0, errors: 0, buckets: {}, inFlight: 0 });
  for (const s of fam["loopgate_route_requests_total"] || []) {
    const x = of(s.labels.route);
    x.total += s.value;
    if (s.labels.code === "5xx") x.errors += s.value;
  }
  for (const s of fam["loopgate_route_request_duration_seconds_bucket"] || []) {
    of(s.labels.route).buckets[s.labels.le] = s.value;
  }
  for (const s of fam["loopgate_route_requests_in_flight"] || []) of(s.labels.route).inFlight = s.value;
  return r;
}

// p99 is the upper bound of the bucket holding the 99th percentile of the
// requests finished between two samples, or "–" when none finished.
function p99(now, before) {
  const les = Object.keys(now.buckets).sort((a, b) => parseFloat(a) - parseFloat(b));
  const d = les.map((le) => [le, now.buckets[le] - ((before && before.buckets[le]) || 0)]);
  const total = d.length ? d[d.length - 1][1] : 0;
  if (total <= 0) return "–";
  for (const [le, n] of d) {
    if (n >= 0.99 * total) return le === "+Inf" ? "> 60 s" : "≤ " + fmtSeconds(parseFloat(le));
  }
  return "–";
}

function fmtSeconds(s) {
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 1 : 0) + " ms";
  return s.toFixed(1) + " s";
}

function breakerClass(state) {
  return state === "open" ? "bad" : state === "half_open" ? "warn" : state === "closed" ? "good" : "";
}

async function tick() {
  const [ups, met, lim, ver, errs] = await Promise.all([get("upstreams"), get("metrics"), get("limits"),
    get("config/versions"), get("errors")]);
  if (!ups || !ups.ok) {
    if (!ups || ups.status !== 401) setStatus("admin port unreachable", "bad");
    return;
  }
  const upstreams = await ups.json();
  const fam = met && met.ok ? parseMetrics(await met.text()) : {};
  const now = { at: performance.now(), routes: routeStats(fam) };
  const dt = last ? (now.at - last.at) / 1000 : 0;

  const routeRows = [];
  const nodeRows = [];
  for (const u of upstreams) {
    for (const r of u.routes) {
      const s = now.routes[r.route] || { total: 0, errors: 0, buckets: {}, inFlight: 0 };
      const b = last && last.routes[r.route];
      const dn = b ? s.total - b.total : 0;
      const de = b ? s.errors - b.errors : 0;
      routeRows.push([cell(r.route), cell(u.name),
        cell(dt > 0 ? (dn / dt).toFixed(1) : "–", "num"),
        cell(dn > 0 ? ((100 * de) / dn).toFixed(1) + " %" : "–", "num"),
        cell(p99(s, b), "num"), cell(String(s.inFlight), "num"),
        cell(r.breaker.toUpperCase(), "breaker " + breakerClass(r.breaker))]);
    }
    for (const n of u.nodes) {
      nodeRows.push([cell(u.name), cell(n.addr),
        cell(n.healthy ? "healthy" : "unhealthy", n.healthy ? "good" : "bad"),
        cell(n.ejected ? "for " + n.ejected_for_seconds.toFixed(1) + " s" : "no", n.ejected ? "warn" : ""),
        cell(String(n.in_flight), "num"), cell(String(n.failures_in_a_row), "num")]);
    }
  }
  fill("routes", routeRows);
  fill("nodes", nodeRows);

  const iso = {};
  for (const [name, key] of [["loopgate_route_isolation_limit", "limit"], ["loopgate_route_isolation_in_flight", "inFlight"],
    ["loopgate_route_isolation_waiting", "waiting"], ["loopgate_route_isolation_rejected_total", "rejected"]]) {
    for (const s of fam[name] || []) (iso[s.labels.route] = iso[s.labels.route] || {})[key] = s.value;
  }
  fill("isolation-rows", Object.keys(iso).sort().map((r) => [cell(r), cell(String(iso[r].limit ?? "–"), "num"),
    cell(String(iso[r].inFlight ?? 0), "num"), cell(String(iso[r].waiting ?? 0), "num"), cell(String(iso[r].rejected ?? 0), "num")]));

  if (lim && lim.ok) {
    const l = await lim.json();
    const c = l.cluster;
    document.getElementById("cluster").textContent = c
      ? "Cluster: Redis " + c.redis + (c.redis === "down" ? " (shadow quota)" : "") + (c.ramping ? ", recovering" : "") +
        "; " + c.live_nodes + " live of " + c.known_nodes + " known nodes"
      : "Cluster: none (local limits only)";
    fill("limit-rows", (l.limits || []).map((x) => [cell(x.name), cell(x.route || "(all)"), cell(x.scope),
      cell(String(x.quota), "num"), cell(String(x.grants), "num"), cell(String(x.rejections), "num")]));
  }

  await drawVersions(ver);
  await drawErrors(errs);
  last = now;
  setStatus("live · updated " + new Date().toLocaleTimeString(), "good");
}

// drawErrors shows the last error-log lines (GET /errors), newest last,
// as text: a line is never markup.
async function drawErrors(errs) {
  const pre = document.getElementById("errors");
  if (!errs || !errs.ok) {
    pre.textContent = errs ? "GET /errors: " + errs.status : "";
    return;
  }
  const lines = (await errs.json()).lines || [];
  pre.textContent = lines.length
    ? lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n")
    : "(none since the start)";
}

// drawVersions shows the config versions when this gateway serves them
// (GET /config/versions); otherwise it says why not.
async function drawVersions(ver) {
  const note = document.getElementById("config-note");
  if (!ver || ver.status === 404 || ver.status === 405) {
    note.textContent = "This gateway keeps no config versions (GET /config/versions is not served).";
    fill("versions", []);
    shownVersions = "";
    return;
  }
  if (!ver.ok) {
    note.textContent = "GET /config/versions: " + ver.status;
    return;
  }
  const text = await ver.text();
  if (text === shownVersions) return;
  shownVersions = text;
  const v = JSON.parse(text);
  note.textContent = "Running version " + v.latest + ".";
  fill("versions", v.versions.map((x) => {
    const btn = document.createElement("button");
    btn.textContent = "roll back to " + x.number;
    btn.disabled = x.number === v.latest;
    btn.addEventListener("click", () => rollback(x.number));
    const diff = document.createElement("button");
    diff.textContent = "diff";
    diff.addEventListener("click", () => showDiff(x.number));
    const td = document.createElement("td");
    td.append(diff, " ", btn);
    return [cell(String(x.number)), cell(x.time.replace("T", " ").slice(0, 19) + " UTC"), cell(x.source), cell(x.changes || ""), td];
  }));
}

// showDiff shows what version n changed against the one before, as the
// config API answers it (GET /config/versions/{n}/diff).
async function showDiff(n) {
  const r = await get("config/versions/" + n + "/diff");
  const out = document.getElementById("diff");
  out.hidden = false;
  out.textContent = r && r.ok ? "version " + n + ":\n" + JSON.stringify(await r.json(), null, 2) : "diff of version " + n + ": " + (r ? r.status : "unreachable");
}

async function rollback(n) {
  if (!confirm("Make version " + n + "'s config the running one?")) return;
  const r = await fetch(new URL("config/rollback", base), {
    method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify({ version: n }),
  });
  if (r.status === 401) askToken();
  const answer = r.ok ? "" : await r.text();
  await tick();
  document.getElementById("config-note").textContent = r.ok ? "Rolled back to version " + n + "." : "Rollback refused: " + answer;
}

// loop polls one tick after another: a slow answer delays the next poll
// rather than piling requests up.
async function loop() {
  try {
    await tick();
  } finally {
    setTimeout(loop, period);
  }
}
loop();
