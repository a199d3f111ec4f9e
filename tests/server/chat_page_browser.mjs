// Drives headless Chromium through the DevTools protocol over a pipe (no npm
// packages): opens kiln-server's chat page, types a message, presses Enter,
// waits for the streamed reply, checks it, saves a screenshot; then starts a
// long reply and presses Stop.
//   node chat_page_browser.mjs CHROMIUM URL EXPECTED_REPLY SCREENSHOT.png
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [chromium, url, expected, screenshot] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
const browser = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--no-first-run", "--remote-debugging-pipe", `--user-data-dir=${profile}`, "about:blank"],
  { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
const toBrowser = browser.stdio[3], fromBrowser = browser.stdio[4];
let nextId = 1, buffer = "";
const pending = new Map();
fromBrowser.on("data", (data) => {
  buffer += data.toString();
  let end;
  while ((end = buffer.indexOf("\0")) >= 0) {
    const message = JSON.parse(buffer.slice(0, end));
    buffer = buffer.slice(end + 1);
    if (message.id && pending.has(message.id)) {
      const { resolve, reject } = pending.get(message.id);
      pending.delete(message.id);
      message.error ? reject(new Error(JSON.stringify(message.error))) : resolve(message.result);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  toBrowser.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + "\0");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let failures = 0;
function check(ok, what) {
  if (!ok) { failures++; console.log("FAIL:", what); }
}

const timer = setTimeout(() => { console.log("FAIL: timed out"); browser.kill("SIGKILL"); process.exit(1); }, 120000);
try {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  const evaluate = async (expression) => (await page("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true })).result.value;
  await page("Page.enable");
  await page("Page.navigate", { url });
  for (let i = 0; i < 100 && (await evaluate("document.readyState")) !== "complete"; ++i) await sleep(100);
  check((await evaluate("document.title")) === "kiln chat", "the chat page loaded");

  // Settings, then type the message the way a user does and press Enter.
  await evaluate(`document.getElementById("temperature").value = "0"; document.getElementById("max-tokens").value = "16"`);
  await evaluate(`document.getElementById("input").focus()`);
  await page("Input.insertText", { text: "Tell me a story" });
  const enter = { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
  await page("Input.dispatchKeyEvent", { type: "keyDown", ...enter });
  await page("Input.dispatchKeyEvent", { type: "keyUp", ...enter });
  let reply = null;
  for (let i = 0; i < 600; ++i) {
    reply = await evaluate(`(() => { const m = document.querySelectorAll(".assistant"); const last = m[m.length - 1];
      return last && last.dataset.state === "done" ? last.textContent : null; })()`);
    if (reply !== null) break;
    await sleep(100);
  }
  check(reply === expected, `the streamed reply appeared: ${JSON.stringify(reply)} (expected ${JSON.stringify(expected)})`);
  check((await evaluate(`document.querySelector(".user").textContent`)) === "Tell me a story", "the user's message is shown");
  check((await evaluate(`document.querySelectorAll(".error").length`)) === 0, "no error shown");
  const shot = await page("Page.captureScreenshot", { format: "png" });
  writeFileSync(screenshot, Buffer.from(shot.data, "base64"));

  // A long reply, stopped by the Stop button once text streams in.
  await evaluate(`document.getElementById("max-tokens").value = "900"; document.getElementById("temperature").value = "1"`);
  await evaluate(`document.getElementById("input").value = "Another story"; document.getElementById("form").requestSubmit()`);
  for (let i = 0; i < 300; ++i) {
    const text = await evaluate(`(() => { const m = document.querySelectorAll(".assistant"); return m[m.length - 1].textContent; })()`);
    if (text.length > 0) break;
    await sleep(20);
  }
  await evaluate(`document.getElementById("stop").click()`);
  let stopped = false;
  for (let i = 0; i < 100 && !stopped; ++i) {
    stopped = await evaluate(`(() => { const m = document.querySelectorAll(".assistant"); return m[m.length - 1].dataset.state === "done"; })()`);
    if (!stopped) await sleep(50);
  }
  check(stopped, "the Stop button ends the reply");
  check((await evaluate(`document.getElementById("send").disabled`)) === false, "Send is enabled again after Stop");
} catch (e) {
  check(false, "DevTools protocol: " + e.message);
} finally {
  clearTimeout(timer);
  browser.kill("SIGKILL");
  await new Promise((resolve) => {
    if (browser.exitCode !== null || browser.signalCode !== null) resolve();
    else browser.once("exit", resolve);
  });
  // Chromium's helper processes may still be writing into the profile for a moment
  // after the browser is gone: retry, and never fail the test over the cleanup.
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  } catch (e) {
    console.log(`note: could not remove ${profile}: ${e.message}`);
  }
}
console.log(failures ? `${failures} check(s) failed` : "all chat page checks passed");
process.exit(failures ? 1 : 0);
