// The browser client (gateway/web, on the SDK) in headless Chromium,
// two people in two browser contexts, against a real `switchboard dev`;
// and a reload that shows what the SDK kept in IndexedDB before the
// network answers. Screenshots of the main screens go to test-artifacts/.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32, deflateSync } from "node:zlib";
import { chromium } from "playwright-core";
import WebSocket from "ws";
import { SwitchboardClient } from "../dist/index.js";
import { Dev, token, waitFor } from "./dev.mjs";

const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
// The gateway serves the browser client it embedded when it was built
// (gateway/web). SWITCHBOARD_WEB_DIR serves that folder's files instead,
// with the gateway's own headers: for a binary built before a change to
// the client. Unset (CI), the binary's own copy is tested.
const webDir = process.env.SWITCHBOARD_WEB_DIR;
const WEB_FILES = { "/": "index.html", "/web/app.js": "app.js", "/web/switchboard.js": "switchboard.js" };

async function newContext(options) {
  const context = await browser.newContext(options);
  if (webDir) {
    await context.route(
      (url) => url.origin === new URL(dev.url).origin && url.pathname in WEB_FILES,
      async (route) => {
        const response = await route.fetch();
        const file = WEB_FILES[new URL(route.request().url()).pathname];
        await route.fulfill({ response, body: readFileSync(join(webDir, file), "utf8") });
      },
    );
  }
  return context;
}
const artifacts = new URL("../test-artifacts/", import.meta.url).pathname;
/** A `size`×`size` PNG of one colour. */
function png(size, [r, g, b]) {
  const row = Buffer.alloc(1 + size * 3);
  for (let x = 0; x < size; x++) row.set([r, g, b], 1 + x * 3);
  const chunk = (type, data) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(Array(size).fill(row)))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}
const PNG = png(48, [26, 115, 232]);

let dev;
let browser;
before(async () => {
  mkdirSync(artifacts, { recursive: true });
  dev = await Dev.start();
  // A page fulfilled by the test counts as public to Chromium's Local
  // Network Access checks, which then block its WebSocket to 127.0.0.1.
  const lna = webDir ? ["--disable-features=LocalNetworkAccessChecks"] : [];
  browser = await chromium.launch({ executablePath, args: ["--no-sandbox", ...lna] });
});
after(async () => {
  await browser?.close();
  await dev?.stop();
});

async function signIn(user, viewport = { width: 1100, height: 720 }) {
  const context = await newContext({ viewport });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error(`[${user}] page error:`, e));
  await page.goto(dev.url);
  await page.fill("#user", user);
  await page.click("#login button");
  await page.waitForSelector("#login", { state: "hidden" });
  await page.waitForSelector('#connection[data-status="open"]');
  return page;
}

const bodies = (page, text) => page.locator(".msg .body", { hasText: text });

test("two people chat: ticks turn read, typing shows and expires, an image crosses, a reload restores", async () => {
  const alice = await signIn("alice");
  const bob = await signIn("bob");
  await alice.screenshot({ path: `${artifacts}signed-in.png` });

  await alice.fill("#new-members", "bob");
  await alice.click("#new-chat button");
  await alice.waitForSelector("#chat-title:text('bob')");
  await alice.fill("#text", "hello bob");
  await alice.press("#text", "Enter");
  await bodies(alice, "hello bob").waitFor();

  // Bob's list shows the chat with an unread count; he opens it.
  const item = bob.locator("#conversations button", { hasText: "hello bob" });
  await item.locator(".unread").waitFor();
  await item.click();
  await bodies(bob, "hello bob").waitFor();
  // Read: Alice's tick turns blue.
  await alice.locator('.msg.mine .tick[data-state="read"]').first().waitFor();

  // Typing shows, then runs out.
  await bob.locator("#text").pressSequentially("typing…");
  await alice.waitForSelector("#typing:text('bob is typing')");
  await alice.waitForFunction(() => document.getElementById("typing").textContent === "", null, { timeout: 10_000 });

  // An image uploaded on one side shows on the other.
  await alice.setInputFiles("#attach", { name: "blue.png", mimeType: "image/png", buffer: PNG });
  const image = bob.locator(".msg img");
  await image.waitFor();
  await bob.waitForFunction(() => {
    const img = document.querySelector(".msg img");
    return img && img.complete && img.naturalWidth === 48;
  });

  // Text is text: markup in a message is shown, never run.
  const hostile = `<img src=x onerror="window.__pwned=1"><b>bold</b>`;
  await alice.fill("#text", hostile);
  await alice.press("#text", "Enter");
  await bodies(bob, "<b>bold</b>").waitFor();
  assert.equal(await bob.evaluate(() => window.__pwned), undefined);
  assert.equal(await bob.locator(".msg b").count(), 0);
  // The list's preview follows the newest message, on both sides.
  await bob.locator("#conversations .preview", { hasText: "<b>bold</b>" }).waitFor();
  await alice.locator("#conversations .preview", { hasText: "<b>bold</b>" }).waitFor();

  // Edit and delete, seen on the other side.
  await alice.locator(".msg.mine", { hasText: "hello bob" }).getByRole("button", { name: "Edit message" }).click();
  await alice.fill("#text", "hello bob, edited");
  await alice.press("#text", "Enter");
  await bodies(bob, "hello bob, edited").waitFor();

  await alice.screenshot({ path: `${artifacts}chat-alice.png` });
  await bob.screenshot({ path: `${artifacts}chat-bob.png` });

  // A reload restores the session and the open conversation.
  await bob.reload();
  await bob.waitForSelector("#login", { state: "hidden" });
  await bodies(bob, "hello bob, edited").waitFor();

  // Narrow screens show the list or the conversation.
  const narrow = await signIn("bob", { width: 390, height: 760 });
  await narrow.locator("#conversations button").first().waitFor();
  await narrow.screenshot({ path: `${artifacts}narrow-list.png` });
  await narrow.locator("#conversations button").first().click();
  await narrow.locator("#messages .msg").first().waitFor();
  assert.equal(await narrow.locator("nav").isVisible(), false);
  await narrow.screenshot({ path: `${artifacts}narrow-chat.png` });

  for (const page of [alice, bob, narrow]) await page.context().close();
});

test("a message sent while the gateway is killed and restarted arrives exactly once", async () => {
  const alice = await signIn("dora");
  const bob = await signIn("eve");
  await alice.fill("#new-members", "eve");
  await alice.click("#new-chat button");
  await alice.waitForSelector("#chat-title:text('eve')");
  await alice.fill("#text", "before");
  await alice.press("#text", "Enter");
  await bob.locator("#conversations button", { hasText: "before" }).click();
  await bodies(bob, "before").waitFor();

  await dev.kill();
  await alice.waitForSelector('#connection[data-status="reconnecting"]');
  await alice.fill("#text", "while down");
  await alice.press("#text", "Enter");
  await alice.locator('.msg.pending', { hasText: "while down" }).waitFor();
  await alice.screenshot({ path: `${artifacts}reconnecting.png` });
  await dev.run();

  await bodies(bob, "while down").waitFor({ timeout: 30_000 });
  await alice.locator(".msg.mine:not(.pending)", { hasText: "while down" }).waitFor({ timeout: 30_000 });
  // Settle, then count: once on each side.
  await bob.waitForTimeout(1500);
  assert.equal(await bodies(bob, "while down").count(), 1);
  assert.equal(await bodies(alice, "while down").count(), 1);
  for (const page of [alice, bob]) await page.context().close();
});

test("history pages upward: the conversation opens on the newest page, older ones on request", async () => {
  // 70 messages from the SDK, before the reader ever opens the chat.
  const gina = new SwitchboardClient({ url: dev.url, token: token("gina"), WebSocket });
  const open = waitFor(gina, "status", (s) => s === "open");
  gina.connect();
  await open;
  const { conversation_id: id } = await gina.rest.createConversation("direct", ["hank"]);
  for (let i = 0; i < 70; i++) await gina.sendText(id, `old ${i}`);
  gina.close();

  const hank = await signIn("hank");
  await hank.locator(`#conversations button[data-conversation="${id}"]`).click();
  await bodies(hank, "old 69").waitFor();
  assert.equal(await hank.locator("#messages .msg").count(), 50);
  assert.equal(await bodies(hank, "old 0").count(), 0);
  await hank.getByRole("button", { name: "Load earlier messages" }).click();
  await bodies(hank, "old 0").waitFor();
  assert.equal(await hank.locator("#messages .msg").count(), 70);
  // Nothing older: the button is gone.
  assert.equal(await hank.locator("#earlier").count(), 0);
  await hank.context().close();
});

test("the conversation list loads its next page when scrolled to the end, or on request", async () => {
  // 53 groups, past the first page of 50 (`conversations_default_limit`).
  const ivy = new SwitchboardClient({ url: dev.url, token: token("ivy"), WebSocket });
  const ids = [];
  for (let i = 0; i < 53; i++) {
    const c = await ivy.rest.createConversation("group", [`listed${i}`], `list ${i}`);
    ids.push(c.conversation_id);
  }

  const page = await signIn("ivy");
  const items = page.locator("#conversations button[data-conversation]");
  await page.locator("#more-conversations").waitFor();
  assert.equal(await items.count(), 50);
  // Newest first: the oldest three are on the next page.
  assert.equal(await items.first().getAttribute("data-conversation"), ids[52]);
  assert.equal(await page.locator(`#conversations button[data-conversation="${ids[0]}"]`).count(), 0);
  await page.locator("#conversations").evaluate((ul) => {
    ul.scrollTop = ul.scrollHeight;
  });
  await page.locator(`#conversations button[data-conversation="${ids[0]}"]`).waitFor();
  assert.equal(await items.count(), 53);
  assert.equal(await page.locator("#more-conversations").count(), 0);
  // A reload shows the first page again, with the button to read on.
  await page.reload();
  await page.locator("#more-conversations").click();
  await page.locator(`#conversations button[data-conversation="${ids[0]}"]`).waitFor();
  assert.equal(await items.count(), 53);
  await page.context().close();
});

test("read, then reply at once: the other side's tick still turns read", async () => {
  const carol = await signIn("carol");
  const dave = await signIn("dave");
  await carol.fill("#new-members", "dave");
  await carol.click("#new-chat button");
  await carol.waitForSelector("#chat-title:text('dave')");
  await carol.fill("#text", "lunch at noon?");
  await carol.press("#text", "Enter");
  await bodies(carol, "lunch at noon?").waitFor();

  // Dave opens the chat (reading it) and answers within one receipt
  // window, before his read mark is written.
  await dave.locator("#conversations button", { hasText: "lunch at noon?" }).click();
  await bodies(dave, "lunch at noon?").waitFor();
  await dave.fill("#text", "sure");
  await dave.press("#text", "Enter");

  await bodies(carol, "sure").waitFor();
  await carol
    .locator(".msg.mine", { hasText: "lunch at noon?" })
    .locator('.tick[data-state="read"]')
    .waitFor({ timeout: 5_000 })
    .catch(async (e) => {
      const ticks = await carol.locator(".msg.mine .tick").evaluateAll((ts) => ts.map((t) => t.dataset.state));
      throw new Error(`ticks ${JSON.stringify(ticks)}: ${e.message}`);
    });
  for (const page of [carol, dave]) await page.context().close();
});

test("a reload shows the kept list and messages before the network answers, then catches up; a refused message shows as failed", async () => {
  const xena = new SwitchboardClient({ url: dev.url, token: token("xena"), WebSocket });
  const connected = waitFor(xena, "status", (s) => s === "open");
  xena.connect();
  await connected;
  const page = await signIn("wendy");
  try {
    await page.fill("#new-members", "xena");
    await page.click("#new-chat button");
    await page.waitForSelector("#chat-title:text('xena')");
    const id = decodeURIComponent(new URL(page.url()).hash.slice(1));
    await page.fill("#text", "kept hello");
    await page.press("#text", "Enter");
    await page.locator(".msg.mine:not(.pending)", { hasText: "kept hello" }).waitFor();
    await xena.sendText(id, "kept reply");
    await bodies(page, "kept reply").waitFor();
    // The SDK writes to IndexedDB a moment after a change.
    await page.waitForTimeout(1_000);

    // The network held back: every REST call waits at the gate, the dev
    // token the WebSocket needs among them, so nothing can come from it.
    let release;
    const gate = new Promise((resolve) => (release = resolve));
    let asked = 0;
    await page.route("**/v1/**", async (route) => {
      asked += 1;
      await gate;
      await route.continue();
    });
    await page.reload();
    await page.waitForSelector("#login", { state: "hidden" });
    await bodies(page, "kept hello").waitFor();
    await bodies(page, "kept reply").waitFor();
    await page.locator(`#conversations button[data-conversation="${id}"]`, { hasText: "kept reply" }).waitFor();
    await page.waitForSelector("#chat-title:text('xena')");
    assert.notEqual(await page.locator("#connection").getAttribute("data-status"), "open");
    assert.ok(asked >= 1, "the network was asked and has not answered");
    await page.screenshot({ path: `${artifacts}reload-before-network.png` });

    // Sent while the page was away: it comes with the catch-up.
    await xena.sendText(id, "while you reloaded");
    release();
    await page.waitForSelector('#connection[data-status="open"]');
    await bodies(page, "while you reloaded").waitFor({ timeout: 15_000 });
    await page.locator(`#conversations button[data-conversation="${id}"]`, { hasText: "while you reloaded" }).waitFor();
    assert.equal(await bodies(page, "kept hello").count(), 1);
    assert.equal(await bodies(page, "kept reply").count(), 1);
    await page.unroute("**/v1/**");

    // Too long to send: refused for good, shown as failed, and dropped on request.
    await page.fill("#text", "x".repeat(17_000));
    await page.press("#text", "Enter");
    const failed = page.locator('.msg.failed[data-status="failed"]');
    await failed.waitFor();
    assert.equal(await failed.locator('.tick[data-state="failed"]').count(), 1);
    await page.screenshot({ path: `${artifacts}failed-message.png` });
    await failed.getByRole("button", { name: "Discard message" }).click();
    assert.equal(await page.locator(".msg.failed").count(), 0);
  } finally {
    xena.close();
    await page.context().close();
  }
});
