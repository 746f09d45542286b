// The operator console in a real browser: Debian's chromium, driven by
// playwright-core. Started by crates/coordinator/tests/console_browser.rs,
// which sets a deployment up and passes what it made as one JSON argument:
// {url, token, readerToken, revision, attention: {reconcile, retrySame, cancel, bulk: [...], reader},
//  observe: {url, run}, shots}.
// Every check that fails throws, and the process exits 1 with the reason.
import { chromium } from "playwright-core";
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const config = JSON.parse(process.argv[2]);
const { url, token, readerToken, revision, attention, observe, shots } = config;
mkdirSync(shots, { recursive: true });
const GUARD = 120_000;

function check(condition, message) {
  if (!condition) { throw new Error(message); }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
    "--disable-quic", "--disable-component-update", "--disable-sync"],
});
const results = [];
let shot = 0;

async function snap(page, name) {
  shot += 1;
  await page.screenshot({ path: `${shots}/${String(shot).padStart(2, "0")}-${name}.png`, fullPage: true });
}

// axe-core on the page as it is: no serious or critical violation; and no Markdown in its words.
async function accessible(page, name) {
  await page.evaluate(axeSource);
  const found = await page.evaluate(async () => {
    const report = await window.axe.run(document, { resultTypes: ["violations"] });
    return report.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  });
  check(found.length === 0, `accessibility of ${name}: ${found.join("; ")}`);
  // Words, not Markdown: no page shows a backtick.
  const text = await page.evaluate(() => document.body.innerText);
  check(!text.includes("`"), `${name} shows a backtick: ${text.slice(Math.max(0, text.indexOf("`") - 80), text.indexOf("`") + 80)}`);
}

async function signIn(context, bearer, base = url) {
  const page = await context.newPage();
  page.on("console", (m) => console.error(`[page ${m.type()}] ${m.text()}`));
  page.on("pageerror", (e) => console.error(`[page error] ${e.message}`));
  await page.goto(`${base}/console/runs`);
  check(page.url().includes("/console/sign-in"), `not sent to sign in: ${page.url()}`);
  await accessible(page, "sign-in");
  await page.getByLabel("Bearer token").fill(bearer);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/console\/runs/);
  return page;
}

async function stateOf(page) {
  return (await page.locator("#run-state").textContent()).trim();
}

async function waitForState(page, wanted) {
  await page.waitForFunction(
    (w) => { const s = document.querySelector("#run-state"); return s && s.textContent.trim() === w; },
    wanted, { timeout: GUARD });
}

// Confirms an action from a run's page: the confirmation's dry run, a reason, the result.
async function act(page, run, label, reason) {
  await page.goto(`${url}/console/runs/${run}`);
  await page.getByRole("link", { name: `${label}…` }).first().click();
  await page.waitForSelector("#action-preview");
  const preview = await page.locator("#action-preview").textContent();
  check(preview.includes("What it will do"), `no dry run on the confirmation of ${label}`);
  await accessible(page, `confirmation of ${label}`);
  const button = (await page.locator("#confirm").textContent()).trim();
  check(button !== "Cancel" && button.length > 8, `the confirm button says only "${button}"`);
  await page.getByLabel(/Reason/).fill(reason);
  await page.locator("#confirm").click();
  await page.waitForURL(new RegExp(`/console/runs/${run}$`));
}

// A reload of the page a POST redirected to is a GET: nothing is posted again.
async function reloadIsGet(page, what) {
  const response = await page.reload();
  check(response.request().method() === "GET", `reloading ${what} sends ${response.request().method()}`);
}

let page = null;
try {
  const context = await browser.newContext();
  page = await signIn(context, token);
  await accessible(page, "runs");
  await snap(page, "runs");
  await page.emulateMedia({ colorScheme: "dark" });
  await accessible(page, "runs, dark");
  await snap(page, "runs-dark");
  await page.emulateMedia({ colorScheme: "light" });

  // The flagship, admitted now, finishes on its page without a reload.
  const admitted = await page.evaluate(async ({ url, token, revision }) => {
    const input = { applicationId: "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10", recipient: { kind: "person", id: "person-4711" } };
    const r = await fetch(`${url}/v1/runs`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ workflow: "reviewed-notice", revision, idempotencyKey: "browser-flagship", input }) });
    return (await r.json()).runId;
  }, { url, token, revision });
  check(typeof admitted === "string", "the flagship was not admitted");
  await page.goto(`${url}/console/runs`);
  await page.waitForSelector(`tr[data-run="${admitted}"]`, { timeout: GUARD });
  await page.goto(`${url}/console/runs/${admitted}`);
  await page.evaluate(() => { window.__notReloaded = true; });
  await waitForState(page, "finished");
  check(await page.evaluate(() => window.__notReloaded === true), "the page was reloaded to show the finish");
  check((await page.locator("#output").count()) === 1, "the published output is not shown");
  await accessible(page, "run");
  await snap(page, "run-finished");
  results.push("the flagship finished live");

  // Filters are kept in the URL and survive a reload.
  await page.goto(`${url}/console/runs`);
  await page.getByLabel("Workflow").selectOption("reviewed-notice");
  await page.getByLabel("State").selectOption("attention");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/state=attention/);
  await page.reload();
  check((await page.getByLabel("State").inputValue()) === "attention", "the state filter did not survive a reload");
  check((await page.getByLabel("Workflow").inputValue()) === "reviewed-notice", "the workflow filter is not a kept choice");
  check((await page.locator(`tr[data-run="${admitted}"]`).count()) === 0, "a finished run under state=attention");
  await snap(page, "runs-attention");
  results.push("filters survive a reload; the workflow is chosen from a list");

  // The attention inbox groups the uncertain notices.
  await page.goto(`${url}/console/attention`);
  check((await page.locator("#groups").textContent()).includes("send-notice"), "the inbox has no send-notice group");
  await accessible(page, "attention");
  await snap(page, "attention");

  // Reconcile, retry-same and cancel through their confirmations.
  await act(page, attention.reconcile, "Reconcile", "the notice went out; its receipt settles it");
  await waitForState(page, "finished");
  await snap(page, "reconciled");
  await act(page, attention.retrySame, "Retry with the same key", "messaging deduplicates by key");
  await waitForState(page, "finished");
  await act(page, attention.cancel, "Cancel the run", "the applicant withdrew");
  await page.waitForFunction(() => /cancel/.test(document.querySelector("#run-state").textContent), null, { timeout: GUARD });
  const journal = await page.locator("#journal").textContent();
  check(journal.includes("reason given: the applicant withdrew"), "the journal lacks the cancel's reason");
  results.push("reconcile, retry-same and cancel confirmed and applied");

  // A reader sees no action, and a forged POST is forbidden.
  const readerContext = await browser.newContext();
  const reader = await signIn(readerContext, readerToken);
  await reader.goto(`${url}/console/runs/${attention.reader}`);
  check((await reader.locator("#run-state").textContent()).trim() === "attention", "the reader's run is not in attention");
  check((await reader.getByRole("link", { name: /Reconcile|Retry|Cancel/ }).count()) === 0, "a reader is offered actions");
  await snap(reader, "reader");
  const forged = await reader.evaluate(async ({ url, run }) => {
    const form = document.querySelector("input[name=csrf]");
    const csrf = form ? form.value : "";
    const r = await fetch(`${url}/console/runs/${run}/actions/cancel`, { method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" }, body: `csrf=${encodeURIComponent(csrf)}&reason=forged` });
    return r.status;
  }, { url, run: attention.reader });
  check(forged === 403, `a reader's forged POST answered ${forged}`);
  results.push("a reader sees no action; a forged POST is 403");


  // A bulk reconcile of three.
  await page.goto(`${url}/console/attention?workflow=reviewed-notice&reason=unknown-effect&step=send-notice`);
  await page.getByRole("link", { name: "Reconcile all…" }).click();
  await page.waitForSelector("#bulk-runs");
  for (const run of attention.bulk) {
    check((await page.locator(`#bulk-runs tr[data-run="${run}"][data-ok="true"]`).count()) === 1, `bulk preview lacks ${run}`);
  }
  await accessible(page, "bulk preview");
  await page.getByLabel(/Reason/).fill("messaging was down for a minute");
  await page.locator("#confirm").click();
  await page.waitForURL(/\/console\/batches\//);
  await reloadIsGet(page, "a bulk action's result");
  // Its progress is followed live, without a reload.
  await page.evaluate(() => { window.__notReloaded = true; });
  await page.waitForFunction(() => document.querySelector("#batch-state").textContent.trim() === "done", null, { timeout: GUARD });
  check(await page.evaluate(() => window.__notReloaded === true), "the batch page was reloaded to show its progress");
  for (const run of attention.bulk) {
    check((await page.locator(`#batch-runs tr[data-run="${run}"][data-outcome="done"]`).count()) === 1, `bulk result lacks ${run}`);
  }
  await accessible(page, "a bulk action's batch");
  await snap(page, "bulk-done");
  results.push("bulk reconcile of three, a batch whose page says what became of each");

  // The run list's filters start a batch over every run they match, its dry run first.
  await page.goto(`${url}/console/runs?workflow=reviewed-notice&state=finished`);
  await page.locator("#runs-batch").getByRole("link", { name: "Cancel…" }).click();
  await page.waitForSelector("#batch-dry-run");
  check((await page.locator("#dry-matched").textContent()).includes("match now"), "no dry run before the batch");
  await accessible(page, "a batch's dry run");
  await page.getByLabel(/Why this batch/).fill("nothing to cancel: a dry run shows it");
  await page.locator("#batch-start").click();
  await page.waitForURL(/\/console\/batches\/[0-9a-f-]+$/);
  for (let i = 0; (await page.locator("#batch-state").textContent()).trim() !== "done"; i += 1) {
    check(i < 600, "the filter's batch did not end");
    await page.waitForTimeout(200);
    await page.reload();
  }
  check((await page.locator("#batch-runs tr[data-outcome=refused]").count()) > 0, "the refused runs are not listed");
  results.push("a batch over every run a filter matches, its dry run first");

  // A POST without the CSRF token is refused.
  const noCsrf = await page.evaluate(async ({ url, run }) => {
    const r = await fetch(`${url}/console/runs/${run}/actions/cancel`, { method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" }, body: "reason=forged" });
    return r.status;
  }, { url, run: attention.reader });
  check(noCsrf === 422 || noCsrf === 403, `a POST without CSRF answered ${noCsrf}`);
  results.push(`a POST without CSRF refused (${noCsrf})`);

  // The restore hold is confirmed with a reason; its banner appears on every page and goes.
  await page.goto(`${url}/console/deployment`);
  await accessible(page, "deployment");
  await page.locator("#place-hold").click();
  await page.waitForURL(/\/console\/restore-hold\?change=place/);
  await accessible(page, "the hold's confirmation");
  check(await page.locator("textarea[name=reason]").evaluate((e) => !e.checkValidity()), "a hold without a reason is not submitted");
  await page.getByLabel(/Reason/).fill("restored from the 02:00 backup");
  await page.locator("#confirm").click();
  await page.waitForURL(/\/console\/deployment$/);
  await page.waitForSelector("#hold-banner");
  check((await page.locator("#hold-state").textContent()).includes("restored from the 02:00 backup"), "the hold's reason is not shown");
  await reloadIsGet(page, "the deployment after placing the hold");
  await page.goto(`${url}/console/runs`);
  check((await page.locator("#hold-banner").count()) === 1, "no banner on the runs page while the hold is placed");
  await snap(page, "hold-banner");
  await page.goto(`${url}/console/deployment`);
  await page.locator("#release-hold").click();
  await page.waitForURL(/\/console\/restore-hold\?change=release/);
  await page.getByLabel(/Reason/).fill("every unknown effect looked at");
  await page.locator("#confirm").click();
  await page.waitForURL(/\/console\/deployment$/);
  await page.waitForSelector("#hold-state");
  check((await page.locator("#hold-banner").count()) === 0, "the banner stayed after the release");
  results.push("the restore hold placed and released, each with a confirmation and a reason");
  await page.locator("#verify").click();
  await page.waitForURL(/\/console\/audit\/verification$/);
  await page.waitForSelector("#audit-verified");
  await reloadIsGet(page, "the verification");
  await page.waitForSelector("#audit-verified");
  results.push("chain verified; the verification's page reloads without posting");

  // A connection is paused with a reason from the deployment page, shown so, and resumed.
  await page.goto(`${url}/console/deployment`);
  await page.locator("#pause-registry").click();
  check(await page.locator("#connection-registry input[name=reason]").evaluate((e) => !e.checkValidity()),
    "a pause without a reason is not submitted");
  await page.getByLabel("Why pause registry").fill("the registry is migrating tonight");
  await page.locator("#pause-registry").click();
  await page.waitForSelector("#resume-registry");
  const paused = (await page.locator("#connection-registry").textContent()) || "";
  check(paused.includes("paused by") && paused.includes("the registry is migrating tonight"), `not shown paused: ${paused}`);
  await accessible(page, "deployment with a paused connection");
  await snap(page, "connection-paused");
  await page.getByLabel("Why resume registry").fill("the registry is back");
  await page.locator("#resume-registry").click();
  await page.waitForSelector("#pause-registry");
  results.push("a connection paused and resumed");

  // An unknown console path is a page in words with the way back, not an empty 404.
  const missing = await page.goto(`${url}/console/no-such-page`);
  check(missing.status() === 404, `an unknown path answered ${missing.status()}`);
  check((await page.locator("#problem-title").textContent()).trim() === "Not found", "no title on the 404 page");
  check((await page.locator("#problem code").textContent()) === "/console/no-such-page", "the 404 page names no path");
  await accessible(page, "not found");
  await page.getByRole("link", { name: "Back to the runs" }).click();
  await page.waitForURL(/\/console\/runs$/);
  results.push("an unknown console path is a page with the way back");

  // An unusable filter is named on the page, never answered "No run matches.".
  const unusable = await page.goto(`${url}/console/runs?revision=sha256:abc`);
  check(unusable.status() === 400, `an unusable revision filter answered ${unusable.status()}`);
  check((await page.locator("#problem code").first().textContent()) === "revision", "the filter is not named");
  check((await page.locator("#no-runs").count()) === 0, "an unusable filter says no run matches");
  await accessible(page, "unusable filter");
  results.push("an unusable filter is named on the page");

  // The graph fits the page's width: the start and the current step are on screen.
  await page.goto(`${url}/console/runs/${attention.reconcile}`);
  await page.waitForFunction(() => {
    const img = document.querySelector(".graph img");
    return img && img.complete && img.naturalWidth > 0;
  });
  const fit = await page.evaluate(() => {
    const box = document.querySelector(".graph");
    const img = box.querySelector("img");
    return { img: img.getBoundingClientRect().width, box: box.clientWidth, scroll: box.scrollWidth };
  });
  check(fit.img <= fit.box && fit.scroll <= fit.box, `the graph overflows its box: ${JSON.stringify(fit)}`);
  results.push("the graph fits the page's width");

  // The journal is newest first and counted.
  await page.goto(`${url}/console/runs/${attention.reconcile}`);
  const journalCount = (await page.locator("#journal-count").textContent()).trim();
  check(/^\d+ entries, newest first\./.test(journalCount), `the journal is not counted: ${journalCount}`);
  const positions = await page.locator("#journal tbody tr td:first-child").allTextContents();
  const numbers = positions.map((p) => Number(p.trim()));
  check(numbers.length > 1 && numbers.every((n, i) => i === 0 || numbers[i - 1] > n), `the journal is not newest first: ${numbers}`);
  results.push("the journal is newest first and counted");

  // Ids are copied with one click.
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: url });
  await page.getByRole("button", { name: `Copy ${attention.reconcile}` }).click();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  check(copied === attention.reconcile, `the copy button copied "${copied}"`);
  results.push("an id is copied with one click");

  // "Observe now" brings a decided review forward instead of its next look 15 minutes on.
  const quietContext = await browser.newContext();
  const quiet = await signIn(quietContext, token, observe.url);
  await quiet.goto(`${observe.url}/console/runs/${observe.run}`);
  await quiet.locator("#observe-await-review").click();
  await quiet.waitForURL(new RegExp(`/console/runs/${observe.run}$`));
  await quiet.waitForFunction(() => document.querySelector("#run-state").textContent.trim() === "finished", null, { timeout: GUARD });
  await quietContext.close();
  results.push("observe now brought a decided review forward");

  // Signing out ends the session on the server: the old cookie, replayed in a fresh browser, opens nothing.
  const before = (await page.context().cookies()).filter((c) => c.name === "coordinator_session");
  check(before.length === 1, "no session cookie to sign out of");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/console\/sign-in/);
  const replay = await browser.newContext();
  await replay.addCookies(before);
  const replayed = await replay.newPage();
  await replayed.goto(`${url}/console/runs`);
  check(replayed.url().includes("/console/sign-in"), `the signed-out cookie still opens ${replayed.url()}`);
  await replay.close();
  results.push("a signed-out session stays ended when its cookie is replayed");

  console.log(JSON.stringify({ ok: true, results }));
} catch (error) {
  console.error(error && error.stack ? error.stack : String(error));
  if (page) {
    console.error(`[at] ${page.url()}`);
    await snap(page, "failure").catch(() => {});
    console.error(await page.content().catch(() => ""));
  }
  console.log(JSON.stringify({ ok: false, results, error: String(error) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
