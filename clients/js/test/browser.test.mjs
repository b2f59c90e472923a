// The browser client (gateway/web, on the SDK) in headless Chromium,
// two people in two browser contexts, against a real `switchboard dev`;
// and a reload that shows what the SDK kept in IndexedDB before the
// network answers. Screenshots of the main screens go to test-artifacts/;
// the README's two (wide and narrow) and one of each v1.1 feature
// (reactions, replies and threads, mentions, pins, roles, notification
// settings) to docs/screenshots/, so the README shows what the last run
// saw.
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
const screenshots = new URL("../../../docs/screenshots/", import.meta.url).pathname;
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

async function signIn(user, viewport = { width: 1100, height: 720 }, device = "") {
  const context = await newContext({ viewport });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error(`[${user}] page error:`, e));
  await page.goto(dev.url);
  await page.fill("#user", user);
  if (device) await page.fill("#device", device);
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

  // (The pointer off the messages: their toolbars show on hover.)
  await alice.mouse.move(1, 1);
  await alice.screenshot({ path: `${artifacts}chat-alice.png` });
  await alice.screenshot({ path: `${screenshots}web-client.png` });
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
  await bodies(narrow, "<b>bold</b>").waitFor();
  assert.equal(await narrow.locator("nav").isVisible(), false);
  await narrow.screenshot({ path: `${artifacts}narrow-chat.png` });
  await narrow.screenshot({ path: `${screenshots}web-client-narrow.png` });

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

// ---- Conversation features (v1.1), each between two browsers ----

const FEATURE = { width: 1000, height: 700 };

/** A group made over REST by `owner` (before anyone signs in, so that
 * it is in everyone's first page). */
async function groupOf(owner, members, title) {
  const response = await fetch(`${dev.url}/v1/conversations`, {
    method: "POST",
    headers: { authorization: `Bearer ${token(owner)}`, "content-type": "application/json" },
    body: JSON.stringify({ kind: "group", members, title }),
  });
  const body = await response.text();
  assert.equal(response.status, 201, body);
  return JSON.parse(body).conversation_id;
}

async function openChat(page, id) {
  await page.locator(`#conversations button[data-conversation="${id}"]`).click();
  await page.waitForSelector("#chat-tools:not([hidden])");
}

async function say(page, text) {
  await page.fill("#text", text);
  await page.press("#text", "Enter");
  await page.locator(".msg.mine:not(.pending)", { hasText: text }).first().waitFor();
}

/** A stored message of the main timeline, by its text. */
const timelineMsg = (page, text) => page.locator("#messages .msg", { has: page.locator(".body", { hasText: text }) });
const chip = (msg, emoji) => msg.locator(`.reactions button.chip[data-emoji="${emoji}"]`);

test("reactions: chips with counts, mine highlighted, a click toggles, and a small picker", async () => {
  const id = await groupOf("rosa", ["sven"], "Release");
  const rosa = await signIn("rosa", FEATURE);
  const sven = await signIn("sven", FEATURE);
  await openChat(rosa, id);
  await openChat(sven, id);
  await say(rosa, "Ship 2.0 today?");
  const onSven = timelineMsg(sven, "Ship 2.0 today?");
  await onSven.waitFor();

  // Sven picks 👍 from the picker: his chip is highlighted, Rosa's not.
  await onSven.getByRole("button", { name: "Add reaction" }).click();
  await onSven.getByRole("button", { name: "React with 👍" }).click();
  await chip(onSven, "👍").and(sven.locator('[aria-pressed="true"]')).filter({ hasText: "👍 1" }).waitFor();
  assert.equal(await onSven.locator(".picker").count(), 0, "the picker closes");
  const onRosa = timelineMsg(rosa, "Ship 2.0 today?");
  await chip(onRosa, "👍").filter({ hasText: "👍 1" }).waitFor();
  assert.equal(await chip(onRosa, "👍").getAttribute("aria-pressed"), "false");

  // Rosa clicks the chip: hers too (2, highlighted for her), and adds 🎉.
  await chip(onRosa, "👍").click();
  await chip(onRosa, "👍").and(rosa.locator('[aria-pressed="true"]')).filter({ hasText: "👍 2" }).waitFor();
  await onRosa.getByRole("button", { name: "Add reaction" }).click();
  await onRosa.getByRole("button", { name: "React with 🎉" }).click();
  await chip(onSven, "🎉").filter({ hasText: "🎉 1" }).waitFor();
  await chip(onSven, "👍").filter({ hasText: "👍 2" }).waitFor();
  assert.equal(await chip(onSven, "👍").getAttribute("aria-pressed"), "true");

  // Sven clicks his own chip: taken back on both sides.
  await chip(onSven, "👍").click();
  await chip(onSven, "👍").and(sven.locator('[aria-pressed="false"]')).filter({ hasText: "👍 1" }).waitFor();
  await chip(onRosa, "👍").filter({ hasText: "👍 1" }).waitFor();
  assert.equal(await chip(onRosa, "👍").getAttribute("aria-pressed"), "true");

  // A reload shows them as the server keeps them (`me` per reader).
  await sven.reload();
  await chip(timelineMsg(sven, "Ship 2.0 today?"), "🎉").filter({ hasText: "🎉 1" }).waitFor();
  await chip(timelineMsg(sven, "Ship 2.0 today?"), "👍").and(sven.locator('[aria-pressed="false"]')).filter({ hasText: "👍 1" }).waitFor();

  await say(sven, "Yes, after the last review");
  const second = timelineMsg(rosa, "Yes, after the last review");
  await second.getByRole("button", { name: "Add reaction" }).click();
  await second.locator(".picker").waitFor();
  await rosa.screenshot({ path: `${screenshots}reactions.png` });
  await second.getByRole("button", { name: "React with ❤️" }).click();
  await chip(timelineMsg(sven, "Yes, after the last review"), "❤️").filter({ hasText: "❤️ 1" }).waitFor();
  for (const page of [rosa, sven]) await page.context().close();
});

test("replies and threads: a quoted reply, a thread panel on a root with its replies, replies sent there, the count on the root", async () => {
  const id = await groupOf("tina", ["ugo"], "Planning");
  const tina = await signIn("tina", FEATURE);
  const ugo = await signIn("ugo", FEATURE);
  await openChat(tina, id);
  await openChat(ugo, id);
  await say(tina, "Which day for the offsite?");
  const rootOnUgo = timelineMsg(ugo, "Which day for the offsite?");
  await rootOnUgo.waitFor();

  // A reply quotes the message above the new one.
  await rootOnUgo.getByRole("button", { name: "Reply to message" }).click();
  await ugo.locator("#replying", { hasText: "Replying to tina" }).waitFor();
  await say(ugo, "Thursday works for me");
  assert.equal(await ugo.locator("#replying").isHidden(), true);
  const replyOnTina = timelineMsg(tina, "Thursday works for me");
  await replyOnTina.locator(".quote", { hasText: "tina: Which day for the offsite?" }).waitFor();

  // A thread on the root: Ugo opens it and writes there.
  await rootOnUgo.getByRole("button", { name: "Reply in thread" }).click();
  const ugoPanel = ugo.locator("#panel");
  await ugoPanel.locator("#panel-title", { hasText: "Thread" }).waitFor();
  await ugo.fill("#thread-text", "Let's compare calendars");
  await ugo.press("#thread-text", "Enter");
  await ugoPanel.locator(".msg.mine:not(.pending)", { hasText: "Let's compare calendars" }).waitFor();
  // Tina's root counts it; the reply is not in the main timeline.
  const rootOnTina = timelineMsg(tina, "Which day for the offsite?");
  await rootOnTina.locator('.thread-summary[data-replies="1"]').waitFor();
  assert.equal(await tina.locator("#messages .body", { hasText: "compare calendars" }).count(), 0);

  // She opens the thread from the count and answers in it.
  await rootOnTina.locator(".thread-summary").click();
  const tinaPanel = tina.locator("#panel");
  await tinaPanel.locator(".msg .body", { hasText: "Let's compare calendars" }).waitFor();
  await tina.fill("#thread-text", "Good idea, I'll send a poll");
  await tina.press("#thread-text", "Enter");
  await ugoPanel.locator(".msg .body", { hasText: "I'll send a poll" }).waitFor();
  await rootOnUgo.locator('.thread-summary[data-replies="2"]').waitFor();
  await rootOnTina.locator('.thread-summary[data-replies="2"]').waitFor();
  assert.equal(await ugo.locator("#messages .body", { hasText: "send a poll" }).count(), 0);
  await tinaPanel.locator(".divider", { hasText: "2 replies" }).waitFor();

  // The threads list: the thread, read (it is open).
  await ugo.click("#show-threads");
  await ugoPanel.locator('li[data-thread]', { hasText: "Which day for the offsite?" }).waitFor();
  await ugoPanel.getByRole("button", { name: "Open thread" }).click();
  await ugoPanel.locator(".msg .body", { hasText: "I'll send a poll" }).waitFor();

  await tina.screenshot({ path: `${screenshots}replies-threads.png` });
  for (const page of [tina, ugo]) await page.context().close();
});

test("mentions: @ suggestions while composing, highlighted in the text, a mention count in the list", async () => {
  const design = await groupOf("vita", ["walt", "xena2"], "Design");
  const ops = await groupOf("vita", ["walt"], "Ops");
  const vita = await signIn("vita", FEATURE);
  const walt = await signIn("walt", FEATURE);
  await openChat(vita, design);
  await openChat(walt, ops);

  // Vita types "@wa": the member shows as a suggestion, which completes it.
  await vita.locator("#text").pressSequentially("@wa");
  await vita.getByRole("button", { name: "Mention walt" }).click();
  assert.equal(await vita.inputValue("#text"), "@walt ");
  await vita.locator("#text").pressSequentially("can you check the mockups?");
  await vita.press("#text", "Enter");
  await timelineMsg(vita, "can you check the mockups?").locator(".mention", { hasText: "@walt" }).waitFor();

  // Walt, in another conversation, sees the count on Design.
  const item = walt.locator(`#conversations button[data-conversation="${design}"]`);
  await item.locator(".mention-count", { hasText: "@1" }).waitFor();
  // An owner mentions everyone.
  await vita.locator("#text").pressSequentially("@al");
  await vita.getByRole("button", { name: "Mention all" }).click();
  await vita.locator("#text").pressSequentially("review at 3pm");
  await vita.press("#text", "Enter");
  await item.locator(".mention-count", { hasText: "@2" }).waitFor();

  // He opens it: his name is highlighted, and the count goes.
  await item.click();
  await timelineMsg(walt, "can you check the mockups?").locator(".mention.me", { hasText: "@walt" }).waitFor();
  await timelineMsg(walt, "review at 3pm").locator(".mention.me", { hasText: "@all" }).waitFor();
  await walt.locator(`#conversations button[data-conversation="${design}"] .mention-count`).waitFor({ state: "detached" });
  // Meanwhile a mention in Ops shows in the list.
  await openChat(vita, ops);
  await say(vita, "@walt the deploy is green");
  await walt.locator(`#conversations button[data-conversation="${ops}"] .mention-count`, { hasText: "@1" }).waitFor();
  await walt.screenshot({ path: `${screenshots}mentions.png` });
  for (const page of [vita, walt]) await page.context().close();
});

test("pins: an owner pins and unpins a message, members see the mark and the pinned list", async () => {
  const id = await groupOf("yuri", ["zora"], "Handbook");
  const yuri = await signIn("yuri", FEATURE);
  const zora = await signIn("zora", FEATURE);
  await openChat(yuri, id);
  await openChat(zora, id);
  await say(yuri, "Wiki: https://wiki.example.com/handbook");
  await say(yuri, "Lunch is at noon");
  const onZora = timelineMsg(zora, "Wiki:");
  await onZora.waitFor();
  // A plain member has no pin action.
  assert.equal(await onZora.getByRole("button", { name: "Pin message" }).count(), 0);

  await timelineMsg(yuri, "Wiki:").getByRole("button", { name: "Pin message" }).click();
  await onZora.locator(".pin-mark").waitFor();
  await zora.locator("#pin-count", { hasText: "1" }).waitFor();
  await zora.locator("#messages .msg.system", { hasText: "yuri pinned a message" }).waitFor();
  await zora.click("#show-pins");
  await zora.locator('#panel li[data-pin]', { hasText: "Wiki: https://wiki.example.com/handbook" }).waitFor();
  assert.equal(await zora.locator("#panel").getByRole("button", { name: "Unpin message" }).count(), 0);
  await zora.screenshot({ path: `${screenshots}pins.png` });

  // Unpinned from the owner's list: gone on both sides.
  await yuri.click("#show-pins");
  await yuri.locator("#panel").getByRole("button", { name: "Unpin message" }).click();
  await zora.locator("#pin-count", { hasText: "0" }).waitFor();
  await zora.locator("#panel li[data-pin]").waitFor({ state: "detached" });
  assert.equal(await onZora.locator(".pin-mark").count(), 0);
  for (const page of [yuri, zora]) await page.context().close();
});

test("roles: the member list with roles; an owner makes an admin, who may then pin and change a member's role", async () => {
  const id = await groupOf("abby", ["boaz", "cleo"], "Team");
  const abby = await signIn("abby", FEATURE);
  const boaz = await signIn("boaz", FEATURE);
  await openChat(abby, id);
  await openChat(boaz, id);
  await say(abby, "Welcome to the team channel");
  await boaz.click("#show-members");
  const boazPanel = boaz.locator("#panel");
  await boazPanel.locator('li[data-member="abby"] .role', { hasText: "owner" }).waitFor();
  await boazPanel.locator('li[data-member="boaz"] .role', { hasText: "member" }).waitFor();
  assert.equal(await boazPanel.locator("select").count(), 0, "a member changes no role");
  assert.equal(await timelineMsg(boaz, "Welcome").getByRole("button", { name: "Pin message" }).count(), 0);

  await abby.click("#show-members");
  await abby.getByRole("combobox", { name: "Role of boaz" }).selectOption("admin");
  await abby.locator('#panel li[data-member="boaz"] .role', { hasText: "admin" }).waitFor();
  // Boaz's list follows the role_changed message.
  await boazPanel.locator('li[data-member="boaz"] .role', { hasText: "admin" }).waitFor();
  await boaz.locator("#messages .msg.system", { hasText: "abby made boaz admin" }).waitFor();
  // An admin may change a member's role, but not make owners.
  const cleo = boaz.getByRole("combobox", { name: "Role of cleo" });
  await cleo.waitFor();
  assert.deepEqual(await cleo.locator("option").allTextContents(), ["admin", "member"]);
  assert.equal(await boaz.getByRole("combobox", { name: "Role of abby" }).count(), 0);
  // And pin.
  await timelineMsg(boaz, "Welcome").getByRole("button", { name: "Pin message" }).waitFor();
  await abby.screenshot({ path: `${screenshots}roles.png` });
  for (const page of [abby, boaz]) await page.context().close();
});

test("notifications: a conversation's level and mute, shown in the list, and on the user's other device at once", async () => {
  const id = await groupOf("dina", ["emil"], "Announcements");
  const dina = await signIn("dina", FEATURE);
  const emil = await signIn("emil", FEATURE);
  const tablet = await signIn("emil", FEATURE, "tablet");
  await openChat(emil, id);
  const onTablet = tablet.locator(`#conversations button[data-conversation="${id}"]`);
  await onTablet.waitFor();

  await emil.click("#show-notifications");
  const panel = emil.locator("#panel");
  await panel.getByRole("radio", { name: "All messages" }).waitFor();
  assert.equal(await panel.getByRole("radio", { name: "All messages" }).isChecked(), true);
  await panel.getByRole("radio", { name: "Mentions only" }).check();
  await emil.locator(`#conversations button[data-conversation="${id}"] .level[data-level="mentions"]`).waitFor();
  // The other device follows (settings_changed), with no reload.
  await onTablet.locator('.level[data-level="mentions"]').waitFor();

  await panel.getByRole("button", { name: "Mute for 8 hours" }).click();
  await panel.locator("#mute-state", { hasText: "Muted until" }).waitFor();
  await emil.locator(`#conversations button[data-conversation="${id}"] .level[data-level="muted"]`).waitFor();
  await onTablet.locator('.level[data-level="muted"]').waitFor();
  // A message there still counts as unread, greyed while muted.
  await openChat(dina, id);
  await say(dina, "Office closed on Friday");
  await onTablet.locator(".unread", { hasText: "1" }).waitFor();
  assert.match(await onTablet.getAttribute("class"), /muted-item/);
  await emil.screenshot({ path: `${screenshots}notifications.png` });

  // Unmuted, and back to every message.
  await panel.getByRole("button", { name: "Unmute" }).click();
  await panel.getByRole("radio", { name: "All messages" }).check();
  await onTablet.locator(".level").waitFor({ state: "detached" });
  await panel.locator("#mute-state", { hasText: "Not muted" }).waitFor();
  assert.equal(await panel.getByRole("radio", { name: "All messages" }).isChecked(), true);
  for (const page of [dina, emil, tablet]) await page.context().close();
});
