// The Loopgate dashboard: polls the admin port's bounded summary
// (GET /summary), its config versions and its last error lines once a
// second and draws the tables. Plain DOM, no framework; every value goes
// in as text, never as HTML.
"use strict";

const base = new URL("..", location.href); // the admin port's root, whatever serves /ui/
const period = 1000;
let token = sessionStorage.getItem("loopgate-token") || "";
let last = null; // the previous poll's route counters: {at, routes: {id: sample}}
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

// routeSample is what two polls compare for a route: its counters.
function routeSample(r) {
  return { total: r.requests, errors: r.errors, latency: r.latency };
}

// p99 is the upper bound of the latency bucket holding the 99th
// percentile of the requests finished between two samples, or "–" when
// none finished. bounds are the buckets' upper bounds in seconds; the last
// bucket is above them all.
function p99(now, before, bounds) {
  const d = now.latency.map((n, i) => n - ((before && before.latency[i]) || 0));
  const total = d.reduce((a, b) => a + b, 0);
  if (total <= 0) return "–";
  let cum = 0;
  for (let i = 0; i < d.length; i++) {
    cum += d[i];
    if (cum >= 0.99 * total) return i < bounds.length ? "≤ " + fmtSeconds(bounds[i]) : "> " + fmtSeconds(bounds[bounds.length - 1]);
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

// shownOf says how many of a total are listed, when not all are.
function shownOf(n, total, what) {
  return n < total ? "Showing " + n + " of " + total + " " + what + "." : "";
}

const clusterModes = { redis: "Redis up", shadow: "Redis lost: each limit on its on_redis_failure (the shadow quota by default)", recovering: "Redis back: quotas recovering" };

async function tick() {
  const [sum, ver, errs] = await Promise.all([get("summary"), get("config/versions"), get("errors")]);
  if (!sum || !sum.ok) {
    if (!sum || sum.status !== 401) setStatus(sum ? "GET /summary: " + sum.status : "admin port unreachable", "bad");
    return;
  }
  const s = await sum.json();
  const now = { at: performance.now(), routes: {} };
  const dt = last ? (now.at - last.at) / 1000 : 0;

  const routeRows = [];
  const isoRows = [];
  const breakers = {}; // upstream: [route breaker, ...] of the routes shown
  for (const r of s.routes.list) {
    const cur = (now.routes[r.id] = routeSample(r));
    const b = last && last.routes[r.id];
    const dn = b ? cur.total - b.total : 0;
    const de = b ? cur.errors - b.errors : 0;
    routeRows.push([cell(r.id), cell(r.upstream),
      cell(b && dt > 0 ? (dn / dt).toFixed(1) : "–", "num"),
      cell(dn > 0 ? ((100 * de) / dn).toFixed(1) + " %" : "–", "num"),
      cell(p99(cur, b, s.latency_bounds_seconds), "num"), cell(String(r.in_flight), "num"),
      cell(r.breaker.toUpperCase(), "breaker " + breakerClass(r.breaker))]);
    if (r.breaker !== "off") (breakers[r.upstream] = breakers[r.upstream] || []).push(r.id + " " + r.breaker.toUpperCase());
    const iso = r.isolation;
    if (iso) {
      const low = iso.limit < iso.base;
      isoRows.push([cell(r.id), cell(iso.limit + " / " + iso.base, "num " + (low ? "warn" : "good")),
        cell(String(iso.in_flight), "num"),
        cell(iso.waiting + " / " + iso.queue, "num " + (iso.waiting > 0 ? "warn" : "")),
        cell(String(iso.rejected), "num")]);
    }
  }
  fill("routes", routeRows);
  fill("isolation-rows", isoRows);
  document.getElementById("routes-note").textContent = shownOf(s.routes.list.length, s.routes.total, "routes: the busiest since the last poll, then those not in a normal state (" + s.routes.abnormal + ")");

  const nodeRows = [];
  for (const u of s.upstreams.list) {
    u.list.forEach((n, i) => {
      nodeRows.push([cell(u.name), cell(n.addr),
        cell(n.healthy ? "healthy" : "unhealthy", n.healthy ? "good" : "bad"),
        cell(n.ejected_for_seconds > 0 ? "for " + n.ejected_for_seconds.toFixed(1) + " s" : "no", n.ejected_for_seconds > 0 ? "warn" : ""),
        cell(String(n.in_flight), "num"), cell(String(n.failures_in_a_row), "num"),
        cell(i === 0 ? (breakers[u.name] || ["–"]).join(", ") : "")]);
    });
    if (u.list.length < u.nodes) nodeRows.push([cell(u.name), cell("… " + (u.nodes - u.list.length) + " more nodes"), cell(""), cell(""), cell(""), cell(""), cell("")]);
  }
  fill("nodes", nodeRows);
  document.getElementById("upstreams-note").textContent = shownOf(s.upstreams.list.length, s.upstreams.total, "upstreams: those of the routes shown, and those with a node out of rotation");

  const rl = s.rate_limits;
  const c = rl.cluster;
  document.getElementById("cluster").textContent = c
    ? "Cluster: " + (clusterModes[c.mode] || c.mode) + "; " + c.live_nodes + " live of " + c.known_nodes + " known nodes"
    : "Cluster: none (local limits only)";
  fill("limit-rows", rl.list.map((x) => [cell(x.name), cell(x.route || "(all)"), cell(x.scope),
    cell(x.unlimited ? "unlimited" : String(x.quota), "num"), cell(String(x.admitted), "num"), cell(String(x.refused), "num")]));
  document.getElementById("limits-note").textContent = shownOf(rl.list.length, rl.total, "limits, the busiest");

  await drawVersions(ver);
  await drawErrors(errs);
  last = now;
  setStatus("live · config version " + s.version + " · updated " + new Date().toLocaleTimeString(), "good");
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
