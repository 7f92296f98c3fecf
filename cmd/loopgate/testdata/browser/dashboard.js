// Drives headless chromium against the dashboard: node dashboard.js
// <admin URL> <gateway URL> <admin token> <screenshot directory>. The
// running config (version 2) has the routes "dead" (prefix /dead/, an
// upstream that refuses connections, a breaker), "limited" (prefix
// /limited/, a rate limit of 1 a second), "live" (prefix /, an upstream
// that answers) and "extra", which version 1 lacks. Exits non-zero, saying
// why, on the first failed check. It leaves dashboard.png (the whole page)
// and dashboard-<view>.png (each main view) in the directory.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const puppeteer = require("puppeteer-core");

const [admin, gateway, token, shots] = process.argv.slice(2);
const views = ["overview", "upstreams", "isolation", "ratelimits", "config"]; // the sections' ids
const deadRoute = "dead", liveRoute = "live";

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "loopgate-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile],
  });
  let page;
  try {
    page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.setViewport({ width: 1400, height: 900 });
    page.on("dialog", (d) => d.accept()); // the rollback's confirmation
    await page.goto(admin + "/ui/", { waitUntil: "load" });

    // Without a token the page asks for one.
    await page.waitForSelector("#token:not([hidden])", { timeout: 15000 });
    console.log("the page asks for a token");
    await page.type("#token-value", token);
    await page.click("#token button");

    // The routes of the running config appear.
    const routes = await page.waitForFunction((a, b) => {
      const ids = [...document.querySelectorAll("#routes tr td:first-child")].map((td) => td.textContent);
      return ids.includes(a) && ids.includes(b) && ids;
    }, { timeout: 15000 }, deadRoute, liveRoute).then((h) => h.jsonValue());
    console.log("routes shown:", routes.join(", "));

    // Live traffic on the live route, for the numbers to move.
    const traffic = setInterval(() => fetch(gateway + "/").catch(() => {}), 20);
    // The dead upstream's breaker opens now, and shows OPEN at a refresh
    // (every second; 10 s allowed, for chromium on a loaded machine).
    for (let i = 0; i < 3; i++) await fetch(gateway + "/dead/x").catch(() => {});
    await page.waitForFunction((r) => [...document.querySelectorAll("#routes tr")].some((tr) =>
      tr.cells[0].textContent === r && tr.cells[6].textContent === "OPEN"), { timeout: 10000 }, deadRoute);
    console.log("breaker of", deadRoute, "shows OPEN");

    // The failed calls' error-log lines (502, code 50201) show under Config.
    const errLine = await page.waitForFunction((r) => {
      const line = document.getElementById("errors").textContent.split("\n")
        .find((l) => l.includes('"route":"' + r + '"') && l.includes('"code":50201'));
      return line || false;
    }, { timeout: 15000 }, deadRoute).then((h) => h.jsonValue());
    console.log("error line shown:", errLine.slice(0, 120));

    // Live numbers update: the live route's req/s becomes a positive number.
    const rate = await page.waitForFunction((r) => {
      const tr = [...document.querySelectorAll("#routes tr")].find((tr) => tr.cells[0].textContent === r);
      const v = tr && parseFloat(tr.cells[2].textContent);
      return v > 0 && v;
    }, { timeout: 15000 }, liveRoute).then((h) => h.jsonValue());
    console.log("req/s of", liveRoute, rate);

    // The Rate limits view: the limited route's limit admits and refuses.
    // (Its 429s are error-log lines too: sent only now, they cannot push
    // the dead route's line out of the last 50 before it was seen.)
    const overLimit = setInterval(() => fetch(gateway + "/limited/").catch(() => {}), 50);
    const limit = await page.waitForFunction(() => {
      const tr = [...document.querySelectorAll("#limit-rows tr")].find((tr) => tr.cells[1].textContent === "limited");
      return tr && parseInt(tr.cells[4].textContent) > 0 && parseInt(tr.cells[5].textContent) > 0 &&
        [...tr.cells].map((c) => c.textContent).join(" | ");
    }, { timeout: 15000 }).then((h) => h.jsonValue());
    console.log("rate limit:", limit);

    // The Isolation view shows the live route's limit against its base
    // (isolation: {limit: 40, queue: 8}) and its queue.
    const iso = await page.waitForFunction((r) => {
      const tr = [...document.querySelectorAll("#isolation-rows tr")].find((tr) => tr.cells[0].textContent === r);
      return tr && tr.cells[1].textContent === "40 / 40" && /^\d+ \/ 8$/.test(tr.cells[3].textContent) &&
        [...tr.cells].map((c) => c.textContent).join(" | ");
    }, { timeout: 15000 }, liveRoute).then((h) => h.jsonValue());
    console.log("isolation of", liveRoute + ":", iso);

    // The node table lists the upstreams' nodes with their health, and the
    // breakers of the routes on each.
    const nodes = await page.$$eval("#nodes tr", (trs) => trs.length);
    if (nodes < 2) throw new Error("node table has " + nodes + " rows, want 2");
    const gone = await page.$$eval("#nodes tr", (trs) => trs.filter((tr) => tr.cells[0].textContent === "gone")
      .map((tr) => tr.cells[6].textContent).join(""));
    if (gone !== "dead OPEN") throw new Error("upstream gone's breakers show " + JSON.stringify(gone) + ", want \"dead OPEN\"");

    // Version 2's diff shows the route it added.
    await page.evaluate(() => [...document.querySelectorAll("#versions tr")]
      .find((tr) => tr.cells[0].textContent === "2").querySelector("button").click());
    await page.waitForFunction(() => /version 2:[\s\S]*extra/.test(document.getElementById("diff").textContent), { timeout: 15000 });
    console.log("version 2's diff shows route extra");
    await page.screenshot({ path: path.join(shots, "dashboard.png"), fullPage: true });
    for (const v of views) await (await page.$("#" + v)).screenshot({ path: path.join(shots, "dashboard-" + v + ".png") });
    console.log("screenshots in", shots);
    clearInterval(traffic);
    clearInterval(overLimit);

    // A rollback from the page to version 1 restores its routes: "extra" goes.
    const routeIds = () => [...document.querySelectorAll("#routes tr td:first-child")].map((td) => td.textContent);
    if (!(await page.evaluate(routeIds)).includes("extra")) throw new Error("route extra not shown before the rollback");
    const button = await page.waitForFunction(() => [...document.querySelectorAll("#versions button")]
      .find((b) => b.textContent === "roll back to 1" && !b.disabled), { timeout: 15000 });
    await button.click();
    await page.waitForFunction((f) => {
      const ids = [...document.querySelectorAll("#routes tr td:first-child")].map((td) => td.textContent);
      return ids.includes("live") && !ids.includes("extra");
    }, { timeout: 15000 });
    console.log("rolled back to version 1: route extra gone");
    if (errors.length) throw new Error("page errors: " + errors.join("; "));
  } catch (e) {
    // What the page showed, for the failure's report.
    if (page) e.message += "\npage:\n" + (await page.evaluate(() => document.body.innerText).catch(() => "?"));
    throw e;
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error("dashboard check failed:", e.message);
  process.exit(1);
});
