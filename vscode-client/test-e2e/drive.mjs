// Drives a running code-server (a real VS Code workbench) with playwright-core and Debian's
// chromium, the way a user would: open a file from the explorer, run "Copy-as-Decode: AI Fix"
// from the command palette (F1) or pick "AI fix" from the quick-fix menu (Ctrl+.), and wait
// for the server's edit to land in the file on disk (files.autoSave is on in the test's settings).
// A "preview" step (a file under applyMode "preview") runs AI Fix from the palette, waits for
// VS Code's Refactor Preview to show the edit, checks that the file is still untouched, ticks
// the change (edits that need confirmation start unticked), opens its diff, takes the
// screenshot, presses the preview's Apply button and then waits for the edit as above.
// A step with `clipboard` puts that text on the clipboard (the page is granted clipboard access)
// and runs "Copy-as-Decode: Apply Clipboard" from the palette instead of AI Fix.
//
//   node drive.mjs config.json
//
// config.json: {
//   url, chromium, workspace, timeoutS (per edit), readyTimeoutS (server up),
//   steps: [{ kind (the step's name in the result: "palette", "quickfix", "preview", ...),
//             trigger? ("palette" | "quickfix"; default: the palette for the kinds "palette" and
//             "preview", else the quick-fix menu), file (may be in a folder: "a/b.py"),
//             caretOn (text of the line to click: the caret goes there), screenshot?,
//             clipboard? (apply this text with "Apply Clipboard") }],
//   failureScreenshot
// }
// Prints progress on stderr and one JSON line on stdout: {ok, steps: [{kind, file, trigger,
// seconds, finished, how, text, changed, states, messages, preview?}], error?}; a preview step's
// `preview` is {shown, seconds, textWhileShown, entries, checkedBefore, checkedAfter, diffOpened}.
// Exit code 0 when the driver ran to the end (the caller compares the texts), 1 when the
// workbench could not be driven.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const started = Date.now();
const log = (msg) => process.stderr.write(`[drive +${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
  "--disable-breakpad",
];

/** The Copy-as-Decode status bar item's state, from its codicon and text. */
async function serverState(page) {
  return page.evaluate(() => {
    const items = [...document.querySelectorAll(".statusbar-item")].filter((el) =>
      (el.textContent || "").includes("Copy-as-Decode"),
    );
    if (items.length === 0) return { state: "absent", text: "" };
    const el = items[0];
    const text = (el.textContent || "").trim();
    const has = (name) => el.querySelector(`.codicon-${name}`) !== null;
    let state = "unknown";
    if (has("error")) state = "error";
    else if (/editing/.test(text)) state = "editing";
    else if (/loading model/.test(text)) state = "loading";
    else if (/starting/.test(text)) state = "starting";
    else if (has("circle-slash")) state = "stopped";
    else if (has("check")) state = "ready";
    const tooltip = el.getAttribute("aria-label") || "";
    return { state, text, tooltip };
  });
}

async function waitFor(what, timeoutMs, probe) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last && last.done) return last;
    await sleep(250);
  }
  throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}${last ? ` (last: ${JSON.stringify(last)})` : ""}`);
}

/** Click through the explorer to `file` ("folder/name.py": expands the folders on the way). */
async function openFromExplorer(page, file) {
  const parts = file.split("/");
  const name = parts.pop();
  for (const folder of parts) {
    const dir = page.locator(".explorer-folders-view .monaco-list-row", { hasText: folder }).first();
    await dir.waitFor({ state: "visible", timeout: 60_000 });
    if ((await dir.getAttribute("aria-expanded")) !== "true") {
      await dir.click();
      await sleep(300);
    }
  }
  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: name }).first();
  await row.waitFor({ state: "visible", timeout: 60_000 });
  await row.click();
  const tab = page.locator(".tabs-container .tab", { hasText: name }).first();
  await tab.waitFor({ state: "visible", timeout: 30_000 });
  const lines = page.locator(".editor-instance .monaco-editor .view-lines").first();
  await lines.waitFor({ state: "visible", timeout: 30_000 });
  await sleep(500);
}

/** Click on the text of a line of the active editor (puts the caret there, no selection). */
async function clickLine(page, lineText) {
  const line = page.locator(".editor-instance .monaco-editor .view-line", { hasText: lineText }).first();
  await line.waitFor({ state: "visible", timeout: 30_000 });
  await line.click();
  await sleep(200);
}

async function runFromPalette(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 15_000 });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-widget .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ state: "visible", timeout: 15_000 });
  await page.keyboard.press("Enter");
}

/** Ctrl+. and pick the "AI fix" code action; falls back to the palette's "Quick Fix..." command. */
async function runQuickFix(page, label) {
  const menu = page.locator(".action-widget .monaco-list-row", { hasText: label }).first();
  for (const attempt of ["Control+Period", "palette"]) {
    if (attempt === "palette") {
      await runFromPalette(page, "Quick Fix...");
    } else {
      await page.keyboard.press(attempt);
    }
    try {
      await menu.waitFor({ state: "visible", timeout: 20_000 });
      log(`quick-fix menu offers "${label}" (opened with ${attempt})`);
      // Move the keyboard focus to the action (the first one is focused when the menu opens),
      // then Enter applies it, as a keyboard user would.
      const focused = page.locator(".action-widget .monaco-list-row.action.focused").first();
      for (let i = 0; i < 12; i++) {
        const current = await focused.getAttribute("aria-label", { timeout: 2_000 }).catch(() => null);
        if (current === label) break;
        await page.keyboard.press("ArrowDown");
        await sleep(150);
      }
      await page.keyboard.press("Enter");
      await menu.waitFor({ state: "hidden", timeout: 5_000 });
      return attempt;
    } catch {
      log(`no "${label}" in the quick-fix menu after ${attempt}`);
      await page.keyboard.press("Escape");
    }
  }
  throw new Error(`the quick-fix menu never offered "${label}"`);
}

/** Texts of the notification toasts on screen (server messages, errors, progress). */
async function toasts(page) {
  return page
    .locator(".notifications-toasts .notification-list-item-message")
    .allTextContents()
    .catch(() => []);
}

/**
 * Wait until the edit command has returned (the status bar item says "editing" while it is
 * pending, "loading model" while the model loads) and the file on disk has been stable for a few
 * seconds after that (files.autoSave writes what the server streamed). The caller compares the
 * text; nothing here shortcuts on the expected text, since a streamed edit may pass through it.
 */
async function waitForEdit(page, path, original, timeoutMs, seen = { states: [], messages: [], busy: false }) {
  const deadline = Date.now() + timeoutMs;
  const states = seen.states;
  const messages = seen.messages;
  let sawBusy = seen.busy;
  let idleSince = 0;
  let lastText = readFileSync(path, "utf8");
  let lastChange = Date.now();
  while (Date.now() < deadline) {
    const text = readFileSync(path, "utf8");
    if (text !== lastText) {
      lastText = text;
      lastChange = Date.now();
    }
    const s = await serverState(page);
    if (states.length === 0 || states[states.length - 1] !== s.state) {
      states.push(s.state);
      log(`server: ${s.text}`);
    }
    for (const m of await toasts(page)) {
      if (m && !messages.includes(m)) {
        messages.push(m);
        log(`notification: ${m}`);
      }
    }
    if (s.state === "error") {
      return { finished: false, how: `server error: ${s.tooltip || s.text}`, text, changed: text !== original, states, messages };
    }
    if (s.state === "editing" || s.state === "loading") {
      sawBusy = true;
      idleSince = 0;
    } else if (text !== original) {
      // The edit ran between two polls (a repeated request reuses its prompt and can finish in
      // under 500 ms): the file it wrote is the evidence, and it must still stay stable below.
      sawBusy = true;
    }
    if (sawBusy && s.state === "ready" && idleSince === 0) {
      idleSince = Date.now();
    }
    if (idleSince && Date.now() - idleSince > 3_000 && Date.now() - lastChange > 3_000) {
      return { finished: true, how: "edit command returned, file stable", text, changed: text !== original, states, messages };
    }
    await sleep(500);
  }
  const how = sawBusy ? `deadline (${Math.round(timeoutMs / 1000)} s)` : "the server never started the edit";
  return { finished: false, how, text: lastText, changed: lastText !== original, states, messages };
}

/** VS Code's Refactor Preview pane (view "refactorPreview"); data-state "data" while it holds an edit. */
const PREVIEW_PANE = '.bulk-edit-panel[data-state="data"]';

/**
 * After AI Fix under applyMode "preview": wait until the Refactor Preview shows the edit (the
 * server's applyEdit is pending meanwhile, so the status bar says "editing"), check that the file
 * has not changed while it is shown, take the screenshot, then press Apply. Returns what it saw;
 * `shown: false` when the edit finished (or failed) without a preview.
 */
async function confirmPreview(page, path, original, timeoutMs, screenshot, seen) {
  const t0 = Date.now();
  const deadline = t0 + timeoutMs;
  const pane = page.locator(PREVIEW_PANE).first();
  let idleSince = 0;
  while (Date.now() < deadline) {
    const s = await serverState(page);
    if (seen.states.length === 0 || seen.states[seen.states.length - 1] !== s.state) {
      seen.states.push(s.state);
      log(`server: ${s.text}`);
    }
    for (const m of await toasts(page)) {
      if (m && !seen.messages.includes(m)) {
        seen.messages.push(m);
        log(`notification: ${m}`);
      }
    }
    if (await pane.isVisible().catch(() => false)) break;
    if (s.state === "error") return { shown: false, how: `server error: ${s.tooltip || s.text}` };
    if (s.state === "editing" || s.state === "loading") {
      seen.busy = true;
      idleSince = 0;
    } else if (seen.busy && s.state === "ready") {
      idleSince = idleSince || Date.now();
      if (Date.now() - idleSince > 10_000) return { shown: false, how: "the edit finished without a preview" };
    }
    await sleep(250);
  }
  if (!(await pane.isVisible().catch(() => false))) {
    return { shown: false, how: `no Refactor Preview within ${Math.round(timeoutMs / 1000)} s` };
  }
  seen.busy = true; // the server's applyEdit waits for this preview, so its command is pending
  const seconds = (Date.now() - t0) / 1000;
  log(`preview: Refactor Preview shown after ${seconds.toFixed(1)} s`);
  // Long enough for files.autoSave (300 ms) to have written an edit that was applied anyway.
  await sleep(2_000);
  const textWhileShown = readFileSync(path, "utf8");
  const entries = await pane.locator(".monaco-list-row").allTextContents().catch(() => []);
  // Edits that need confirmation start unticked: Apply with nothing ticked applies nothing.
  const boxes = pane.locator(".monaco-list-row input.edit-checkbox");
  const checkedBefore = await boxes.evaluateAll((els) => els.map((el) => el.checked)).catch(() => []);
  log(`preview: entries ${JSON.stringify(entries)}, ticked ${JSON.stringify(checkedBefore)}; ` +
      `file ${textWhileShown === original ? "unchanged" : "CHANGED"}`);
  // Tick the file (which ticks its changes), as the user who accepts the edit does.
  const fileBox = boxes.first();
  if (!(await fileBox.isChecked())) {
    await fileBox.check({ timeout: 10_000 });
  }
  const checkedAfter = await boxes.evaluateAll((els) => els.map((el) => el.checked)).catch(() => []);
  log(`preview: ticked the file: ${JSON.stringify(checkedAfter)}`);
  // Open the change as a diff (what a reviewing user does): click the last entry (the edit itself).
  let diffOpened = false;
  const rows = pane.locator(".monaco-list-row");
  if ((await rows.count()) > 0) {
    const box = await rows.last().boundingBox();
    if (box) await page.mouse.click(box.x + box.width * 0.6, box.y + box.height / 2);
    const diffTab = page.locator(".tabs-container .tab", { hasText: "Refactor Preview" }).first();
    diffOpened = await diffTab.waitFor({ state: "visible", timeout: 10_000 }).then(() => true, () => false);
    await sleep(800);
  }
  if (screenshot) {
    await page.screenshot({ path: screenshot });
    log(`screenshot: ${screenshot}`);
  }
  const apply = pane.locator(".buttons .monaco-button", { hasText: "Apply" }).first();
  await apply.click({ timeout: 10_000 });
  log("preview: pressed Apply");
  return { shown: true, how: "Refactor Preview shown, ticked, applied", seconds, textWhileShown, entries,
           checkedBefore, checkedAfter, diffOpened };
}

async function main() {
  log(`launching ${cfg.chromium}`);
  const browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: CHROMIUM_FLAGS,
    timeout: 60_000,
  });
  const results = [];
  let page;
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(cfg.url).origin });
    page = await context.newPage();
    page.on("pageerror", (e) => log(`page error: ${e.message}`));
    log(`opening ${cfg.url}`);
    await page.goto(cfg.url, { waitUntil: "domcontentloaded", timeout: 60_000 });
    await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 90_000 });
    log("workbench rendered");

    await waitFor("the Copy-as-Decode server to be ready (status bar)", cfg.readyTimeoutS * 1000, async () => {
      const s = await serverState(page);
      if (s.state === "error" || s.state === "stopped") {
        throw new Error(`the extension reports "${s.tooltip || s.text}"`);
      }
      return { done: s.state === "ready", ...s };
    });
    log("server ready");

    for (const step of cfg.steps) {
      const path = join(cfg.workspace, step.file);
      const original = readFileSync(path, "utf8");
      const t0 = Date.now();
      log(`${step.kind}: opening ${step.file}`);
      await openFromExplorer(page, step.file);
      await clickLine(page, step.caretOn);
      const trigger = step.trigger || (step.kind === "palette" || step.kind === "preview" ? "palette" : "quickfix");
      let how;
      if (step.clipboard !== undefined) {
        await page.evaluate((text) => navigator.clipboard.writeText(text), step.clipboard);
        await runFromPalette(page, "Copy-as-Decode: Apply Clipboard");
        how = "palette";
      } else if (trigger === "palette") {
        await runFromPalette(page, "Copy-as-Decode: AI Fix");
        how = "palette";
      } else {
        how = await runQuickFix(page, "AI fix");
      }
      log(`${step.kind}: triggered via ${how}; waiting for the edit`);
      const seen = { states: [], messages: [], busy: false };
      let preview;
      if (step.kind === "preview") {
        preview = await confirmPreview(page, path, original, cfg.timeoutS * 1000, step.screenshot, seen);
        if (!preview.shown) {
          const text = readFileSync(path, "utf8");
          results.push({ kind: step.kind, file: step.file, trigger: how, seconds: (Date.now() - t0) / 1000,
                         finished: false, how: preview.how, text, changed: text !== original, preview, ...seen });
          break;
        }
      }
      const r = await waitForEdit(page, path, original, cfg.timeoutS * 1000, seen);
      const seconds = (Date.now() - t0) / 1000;
      log(`${step.kind}: ${r.finished ? "finished" : "NOT finished"} (${r.how}) after ${seconds.toFixed(1)} s`);
      if (step.screenshot && step.kind !== "preview") {
        await sleep(500);
        await page.screenshot({ path: step.screenshot });
        log(`screenshot: ${step.screenshot}`);
      }
      results.push({ kind: step.kind, file: step.file, trigger: how, seconds, ...r, ...(preview ? { preview } : {}) });
      if (!r.finished) break;
    }
    process.stdout.write(JSON.stringify({ ok: true, steps: results }) + "\n");
  } catch (e) {
    log(`failed: ${e.stack || e}`);
    if (page && cfg.failureScreenshot) {
      await page.screenshot({ path: cfg.failureScreenshot }).catch(() => undefined);
    }
    process.stdout.write(JSON.stringify({ ok: false, steps: results, error: String(e.message || e) }) + "\n");
    process.exitCode = 1;
  } finally {
    await browser.close().catch(() => undefined);
  }
}

await main();
