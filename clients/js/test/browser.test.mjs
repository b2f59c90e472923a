// The browser client (gateway/web, on the SDK) in headless Chromium,
// two people in two browser contexts, against a real `switchboard dev`;
// and a reload that shows what the SDK kept in IndexedDB before the
// network answers. Screenshots of the main screens go to test-artifacts/;
// the README's two (wide and narrow), one of each v1.1 feature
// (reactions, replies and threads, mentions, pins, roles, notification
// settings), of each v1.2 safety screen (blocks, the admin screen,
// reports), of search and scheduled messages, and of the v1.3 screens
// (polls and link previews among them) to docs/screenshots/, so the
// README shows what the last run saw.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import WebSocket from "ws";
import { SwitchboardClient } from "../dist/index.js";
import { Dev, adminToken, linkPage, png, token, waitFor } from "./dev.mjs";

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
  // The button is pressed where it stands: scrolling it into view would
  // itself load the next page (the case above) and race the click.
  await page.reload();
  await page.locator("#more-conversations").dispatchEvent("click");
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

// ---- Safety (v1.2), each between two browsers ----

/** The direct conversation of `a` and `b`, made over REST by `a`. */
async function directOf(a, b) {
  const response = await fetch(`${dev.url}/v1/conversations`, {
    method: "POST",
    headers: { authorization: `Bearer ${token(a)}`, "content-type": "application/json" },
    body: JSON.stringify({ kind: "direct", members: [b] }),
  });
  const body = await response.text();
  assert.ok(response.status === 200 || response.status === 201, body);
  return JSON.parse(body).conversation_id;
}

test("blocks: blocked from a direct conversation's header, which closes it both ways; group messages folded with a click to show; the blocked users; unblocked from the member list", async () => {
  const group = await groupOf("cass", ["bram"], "Book club");
  const direct = await directOf("cass", "bram");
  const bram = await signIn("bram", FEATURE);
  const cass = await signIn("cass", FEATURE);
  await openChat(cass, direct);
  await say(cass, "hi bram");
  await openChat(bram, direct);
  await bodies(bram, "hi bram").waitFor();

  // Bram blocks Cass from the header: the conversation closes for him,
  // her message there folds, and the count shows.
  await bram.getByRole("button", { name: "Block cass" }).click();
  await bram.locator("#blocked-note", { hasText: "You blocked cass" }).waitFor();
  assert.equal(await bram.locator("#text").isDisabled(), true);
  await bram.locator("#blocked-count", { hasText: "(1)" }).waitFor();
  await bram.locator("#messages .msg.blocked", { hasText: "Message from a blocked user" }).waitFor();
  assert.equal(await bodies(bram, "hi bram").count(), 0);
  // Cass is not told, but what she writes there is refused.
  await cass.fill("#text", "are you there?");
  await cass.press("#text", "Enter");
  await cass.locator('.msg.failed[data-status="failed"]', { hasText: "are you there?" }).waitFor();

  // In the group her messages still come, folded for him; a click shows one.
  await openChat(cass, group);
  await say(cass, "Chapter 3 is great");
  await bram.locator(`#conversations button[data-conversation="${group}"] .preview`, { hasText: "Message from a blocked user" }).waitFor();
  await openChat(bram, group);
  const folded = bram.locator("#messages .msg.blocked");
  await folded.waitFor();
  assert.equal(await bodies(bram, "Chapter 3 is great").count(), 0);
  await folded.getByRole("button", { name: "Show message from a blocked user" }).click();
  const shown = timelineMsg(bram, "Chapter 3 is great");
  await shown.locator(".from-blocked").waitFor();
  await shown.getByRole("button", { name: "Hide message from a blocked user" }).click();
  await bram.locator("#messages .msg.blocked").waitFor();

  // The members show whom he blocks; so does his list of blocked users.
  await bram.click("#show-members");
  await bram.locator('#panel li[data-member="cass"] .blocked-tag').waitFor();
  await bram.click("#show-blocked");
  await bram.locator('#panel li[data-blocked="cass"]', { hasText: "since" }).waitFor();
  await bram.screenshot({ path: `${screenshots}blocks.png` });

  // Unblocked from the member list: the group's message shows again, and
  // the direct conversation opens both ways.
  await bram.click("#show-members");
  await bram.locator("#panel").getByRole("button", { name: "Unblock cass" }).click();
  await bram.locator("#panel").getByRole("button", { name: "Block cass" }).waitFor();
  await bodies(bram, "Chapter 3 is great").waitFor();
  assert.equal(await bram.locator("#messages .msg.blocked").count(), 0);
  assert.equal(await bram.locator("#blocked-count").textContent(), "");
  await openChat(bram, direct);
  await bodies(bram, "hi bram").waitFor();
  assert.equal(await bram.locator("#blocked-note").isHidden(), true);
  await bram.getByRole("button", { name: "Block cass" }).waitFor();
  await say(bram, "sorry, welcome back");
  await openChat(cass, direct);
  await bodies(cass, "sorry, welcome back").waitFor();
  for (const page of [bram, cass]) await page.context().close();
});

test("admin screen: an owner bans a member for a day and lifts it, sets slow mode and retention; a member's early message waits out slow mode and goes by itself", async () => {
  const id = await groupOf("odin", ["pia", "quin"], "Moderated");
  const odin = await signIn("odin", FEATURE);
  const pia = await signIn("pia", FEATURE);
  await openChat(odin, id);
  await openChat(pia, id);
  await say(odin, "Be kind here");
  await bodies(pia, "Be kind here").waitFor();
  // Only owners and admins have the screen.
  assert.equal(await pia.locator("#show-admin").isHidden(), true);

  await odin.click("#show-admin");
  const panel = odin.locator("#panel");
  await panel.locator("#panel-title", { hasText: "Conversation admin" }).waitFor();
  await panel.locator("#no-bans").waitFor();
  // Quin, banned for a day: listed with its end, and out of the conversation.
  assert.deepEqual(await panel.locator("#ban-user option").allTextContents(), ["pia", "quin"]);
  await odin.selectOption("#ban-user", "quin");
  await odin.selectOption("#ban-for", "86400");
  await panel.getByRole("button", { name: "Ban", exact: true }).click();
  await panel.locator('li[data-ban="quin"]', { hasText: "by odin, until" }).waitFor();
  await pia.locator("#messages .msg.system", { hasText: "odin banned quin" }).waitFor();
  await panel.locator('#ban-user option[value="quin"]').waitFor({ state: "detached" });
  assert.deepEqual(await panel.locator("#ban-user option").allTextContents(), ["pia"]);

  // Slow mode and retention: one change, one message to everyone.
  await odin.fill("#slow-mode-secs", "3");
  await odin.fill("#retention-days", "30");
  await panel.getByRole("button", { name: "Save settings" }).click();
  await pia.locator("#messages .msg.system", { hasText: "odin changed the conversation's settings" }).waitFor();
  await pia.waitForFunction(() => document.getElementById("text").placeholder.includes("slow mode: one every 3 s"));
  assert.equal(await odin.inputValue("#slow-mode-secs"), "3");
  assert.equal(await odin.inputValue("#retention-days"), "30");
  assert.equal(await odin.inputValue("#disappearing-secs"), "");
  await odin.screenshot({ path: `${screenshots}admin.png` });

  // The ban lifted: listed no more, and the members are told.
  await panel.getByRole("button", { name: "Lift ban on quin" }).click();
  await panel.locator("#no-bans").waitFor();
  await pia.locator("#messages .msg.system", { hasText: "odin lifted the ban on quin" }).waitFor();

  // Pia writes twice at once: the second waits out slow mode (she is
  // told how long), then goes by itself, once.
  await say(pia, "first");
  await pia.fill("#text", "second");
  await pia.press("#text", "Enter");
  const waiting = pia.locator('.msg.failed[data-status="failed"]', { hasText: "second" });
  await waiting.locator(".resend-at", { hasText: "slow mode: sends again in" }).waitFor();
  await pia.locator("#slow-mode", { hasText: "you can send again in" }).waitFor();
  assert.equal(await waiting.getByRole("button", { name: "Retry sending" }).count(), 0);
  await pia.screenshot({ path: `${artifacts}slow-mode.png` });
  await pia.locator(".msg.mine:not(.pending):not(.failed)", { hasText: "second" }).waitFor({ timeout: 10_000 });
  await bodies(odin, "second").waitFor();
  await pia.locator("#slow-mode").waitFor({ state: "hidden" });
  assert.equal(await pia.locator(".msg.failed").count(), 0);
  await odin.waitForTimeout(1_000);
  assert.equal(await bodies(odin, "second").count(), 1);
  // Owners are not held.
  await say(odin, "one");
  await say(odin, "two");
  for (const page of [odin, pia]) await page.context().close();
});

/** Signs in with a token pasted on the sign-in form (the dev endpoint
 * mints no tenant admin's). */
async function signInWithToken(jwt, viewport) {
  const context = await newContext({ viewport });
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error("[token] page error:", e));
  await page.goto(dev.url);
  await page.click("#use-token");
  await page.fill("#token", jwt);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForSelector("#login", { state: "hidden" });
  await page.waitForSelector('#connection[data-status="open"]');
  return page;
}

test("moderation without code (v1.3): an owner mutes a member and freezes the conversation; a tenant admin sets a word list, bans and shadow-bans users and reads the audit log", async () => {
  const id = await groupOf("rhea", ["sol", "tess"], "Town square");
  const rhea = await signIn("rhea", FEATURE);
  const sol = await signIn("sol", FEATURE);
  await openChat(rhea, id);
  await openChat(sol, id);

  // Sol muted for an hour: listed, and his message is refused.
  await rhea.click("#show-admin");
  const panel = rhea.locator("#panel");
  await panel.locator("#no-mutes").waitFor();
  await rhea.selectOption("#mute-user", "sol");
  await rhea.selectOption("#mute-for", "3600");
  await panel.getByRole("button", { name: "Mute", exact: true }).click();
  await panel.locator('li[data-mute="sol"]', { hasText: "by rhea, until" }).waitFor();
  await sol.fill("#text", "can anyone hear me");
  await sol.press("#text", "Enter");
  await sol.locator('.msg.failed .tick[data-state="failed"][title*="muted"]').waitFor();

  // Frozen: Tess may not post; the owner still does.
  await panel.getByRole("button", { name: "Freeze conversation" }).click();
  await panel.locator('#frozen-state[data-frozen="true"]').waitFor();
  await rhea.screenshot({ path: `${screenshots}mutes-freeze.png` });
  await say(rhea, "Closed for the night");
  await panel.getByRole("button", { name: "Unmute sol" }).click();
  await panel.locator("#no-mutes").waitFor();
  await panel.getByRole("button", { name: "Thaw conversation" }).click();
  await panel.locator('#frozen-state[data-frozen="false"]').waitFor();

  // A tenant admin: the word list, a ban from the app and a shadow ban,
  // each in the audit log.
  const warden = await signInWithToken(adminToken("warden"), FEATURE);
  assert.equal(await rhea.locator("#show-moderation").isHidden(), true, "tenant admins only");
  await warden.click("#show-moderation");
  const tools = warden.locator("#panel");
  await tools.locator("#panel-title", { hasText: "Moderation" }).waitFor();
  await warden.fill("#blocklist-words", "gosh, heck");
  await warden.selectOption("#blocklist-mode", "mask");
  await tools.getByRole("button", { name: "Save word list" }).click();
  await tools.locator("#moderation-state", { hasText: "Word list saved" }).waitFor();
  await warden.fill("#tenant-ban-user", "mallory");
  await warden.fill("#tenant-ban-reason", "spam links");
  await tools.getByRole("button", { name: "Ban user", exact: true }).click();
  await tools.locator('li[data-tenant-ban="mallory"]', { hasText: "spam links" }).waitFor();
  await warden.fill("#shadow-ban-user", "tess");
  await tools.getByRole("button", { name: "Shadow-ban user" }).click();
  await tools.locator('li[data-shadow-ban="tess"]').waitFor();
  for (const action of ["blocklist_set", "user_banned", "user_shadow_banned", "member_muted", "conversation_frozen"]) {
    await tools.locator(`li[data-audit-action="${action}"]`).first().waitFor();
  }
  await warden.screenshot({ path: `${screenshots}moderation.png` });

  // The word list masks Sol's word, for him too (his ack carries the
  // stored text).
  await sol.fill("#text", "oh gosh it works");
  await sol.press("#text", "Enter");
  await bodies(rhea, "oh **** it works").waitFor();
  await sol.locator(".msg.mine:not(.pending)", { hasText: "oh **** it works" }).waitFor();

  // Lifted again, for the other tests of this tenant.
  await tools.getByRole("button", { name: "Lift app ban on mallory" }).click();
  await tools.locator("#no-tenant-bans").waitFor();
  await tools.getByRole("button", { name: "Lift shadow ban on tess" }).click();
  await tools.locator("#no-shadow-bans").waitFor();
  await warden.fill("#blocklist-words", "");
  await tools.getByRole("button", { name: "Save word list" }).click();
  await tools.locator("#moderation-state", { hasText: "Word list off" }).waitFor();
  for (const page of [rhea, sol, warden]) await page.context().close();
});

test("reports: a member reports a message with a reason and a note; a tenant admin deletes it from the Reports panel and the members see it deleted; the resolved ones on request; the member downloads their data", async () => {
  const id = await groupOf("faye", ["gabe"], "Marketplace");
  const faye = await signIn("faye", FEATURE);
  const gabe = await signIn("gabe", FEATURE);
  await openChat(faye, id);
  await openChat(gabe, id);
  await say(gabe, "Cheap watches at scam.example");
  const onFaye = timelineMsg(faye, "Cheap watches");
  await onFaye.waitFor();
  // Her own messages have no Report action.
  await say(faye, "Anyone selling a bike?");
  assert.equal(await timelineMsg(faye, "Anyone selling a bike?").getByRole("button", { name: "Report message" }).count(), 0);

  // Faye reports Gabe's message: a reason is needed, a note is not; she is thanked.
  await onFaye.getByRole("button", { name: "Report message" }).click();
  const panel = faye.locator("#panel");
  await panel.locator("#panel-title", { hasText: "Report a message" }).waitFor();
  await panel.locator(".reported", { hasText: "gabe: Cheap watches at scam.example" }).waitFor();
  await panel.getByRole("button", { name: "Send report" }).click();
  await faye.locator("#panel-error", { hasText: "Pick a reason" }).waitFor();
  await panel.getByRole("radio", { name: "Spam" }).check();
  await panel.getByLabel("Note for the admins").fill("Posted in three groups today");
  await faye.screenshot({ path: `${artifacts}report-form.png` });
  await panel.getByRole("button", { name: "Send report" }).click();
  await panel.locator("#report-sent", { hasText: "went to the admins" }).waitFor();
  await faye.screenshot({ path: `${artifacts}report-sent.png` });

  // A tenant admin (a token of `switchboard token --admin`, pasted) has
  // the Reports panel; a member has not.
  assert.equal(await faye.locator("#show-reports").isHidden(), true);
  const mod = await signInWithToken(adminToken("mod"), FEATURE);
  await mod.locator("#who", { hasText: "tenant admin" }).waitFor();
  await mod.click("#show-reports");
  const report = mod.locator('#panel li[data-status="open"]', { hasText: "Cheap watches at scam.example" });
  await report.waitFor();
  await report.locator(".row", { hasText: "gabe wrote" }).locator(".reason", { hasText: "spam" }).waitFor();
  await report.locator(".report-note", { hasText: "Posted in three groups today" }).waitFor();
  await report.locator(".note", { hasText: "Reported by faye" }).waitFor();
  await mod.screenshot({ path: `${screenshots}reports.png` });

  // Deleted from there: gone from the open ones, deleted for both members.
  await report.getByRole("button", { name: "Delete message" }).click();
  await mod.locator("#reports-state", { hasText: "Message deleted" }).waitFor();
  await mod.locator("#no-reports").waitFor();
  for (const page of [faye, gabe]) {
    await page.locator(`#messages .msg .body`, { hasText: "(deleted)" }).waitFor();
    assert.equal(await bodies(page, "Cheap watches").count(), 0);
  }
  // The resolved ones, on request: how and by whom.
  await mod.getByRole("button", { name: "Resolved reports" }).click();
  const resolved = mod.locator('#panel li[data-status="resolved"]', { hasText: "Cheap watches at scam.example" });
  await resolved.locator(".resolution", { hasText: "Message deleted by mod" }).waitFor();
  assert.equal(await resolved.getByRole("button", { name: "Delete message" }).count(), 0);

  // Faye downloads her data: one JSON file of what she sent.
  const download = faye.waitForEvent("download");
  await faye.click("#export-data");
  const file = await download;
  assert.match(file.suggestedFilename(), /^switchboard-export-faye-\d{4}-\d{2}-\d{2}\.json$/);
  const data = JSON.parse(readFileSync(await file.path(), "utf8"));
  assert.equal(data.profile.user_id, "faye");
  const mine = data.conversations.find((c) => c.conversation_id === id);
  assert.deepEqual(mine.messages.map((m) => m.content?.text), ["Anyone selling a bike?"]);
  await faye.locator("#export-state", { hasText: "Saved switchboard-export-faye" }).waitFor();
  for (const page of [faye, gabe, mod]) await page.context().close();
});

// ---- Search and scheduled messages (v1.2) ----

/** A signed-in SDK client (Node) of `user`. */
async function sdkClient(user) {
  const client = new SwitchboardClient({ url: dev.url, token: token(user), WebSocket });
  const open = waitFor(client, "status", (s) => s === "open");
  client.connect();
  await open;
  return client;
}

test("custom messages (v1.3): an app's own kind shows its fallback text, or its type, in the timeline and the list", async () => {
  const id = await groupOf("cass", ["dara"], "Orders");
  const cass = await sdkClient("cass");
  const dara = await signIn("dara", FEATURE);
  await openChat(dara, id);
  await cass.send(id, { kind: "custom", type: "shop.order", data: { order: 7, items: ["tea"] }, fallback_text: "Order #7: one tea" });
  await cass.send(id, { kind: "custom", type: "location", data: { lat: 52.37, lon: 4.9 } });
  await dara.locator("#messages .msg .body.custom", { hasText: "Order #7: one tea" }).waitFor();
  const bare = dara.locator("#messages .msg .body.custom", { hasText: "[location]" });
  await bare.waitFor();
  assert.equal(await bare.getAttribute("title"), "location");
  await dara.locator(`#conversations button[data-conversation="${id}"]`, { hasText: "[location]" }).waitFor();
  await dara.screenshot({ path: `${screenshots}custom-messages.png` });
  cass.close();
  await dara.context().close();
});

// ---- Polls (v1.3) ----

/** The poll card of the main timeline that asks `question`. */
const pollCard = (page, question) => page.locator("#messages .poll", { has: page.locator(".poll-question", { hasText: question }) });
/** One option's button on a poll card (options made in the form are `o1`, `o2`, ...). */
const option = (card, id) => card.locator(`.poll-option[data-option="${id}"]`);

test("polls (v1.3): a member creates a poll from the composer, another votes, both see counts and voters follow, a vote is changed and retracted, the author closes it; a multiple anonymous one toggles", async () => {
  const id = await groupOf("petra", ["kofi"], "Offsite");
  const petra = await signIn("petra", FEATURE);
  const kofi = await signIn("kofi", FEATURE);
  await openChat(petra, id);
  await openChat(kofi, id);

  // Petra's form starts with two options (never fewer), takes up to ten,
  // and leaves out the ones left empty.
  await petra.getByRole("button", { name: "Create a poll" }).click();
  await petra.locator("#poll-form").waitFor();
  assert.equal(await petra.locator("#poll-options input").count(), 2);
  assert.equal(await petra.getByRole("button", { name: "Remove option 1" }).isDisabled(), true);
  await petra.fill("#poll-question", "Where shall we go for the offsite?");
  await petra.getByRole("textbox", { name: "Option 1" }).fill("Lisbon");
  await petra.getByRole("textbox", { name: "Option 2" }).fill("Berlin");
  await petra.click("#poll-add");
  await petra.getByRole("textbox", { name: "Option 3" }).fill("The Moon");
  await petra.click("#poll-add");
  await petra.getByRole("textbox", { name: "Option 4" }).fill("Oslo");
  await petra.getByRole("button", { name: "Remove option 3" }).click();
  assert.equal(await petra.getByRole("textbox", { name: "Option 3" }).inputValue(), "Oslo", "the options renumber");
  while (!(await petra.locator("#poll-add").isDisabled())) await petra.click("#poll-add");
  assert.equal(await petra.locator("#poll-options input").count(), 10);
  const closes = await petra.evaluate(() => {
    const pad = (n) => String(n).padStart(2, "0");
    const d = new Date(Date.now() + 86_400_000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T17:00`;
  });
  await petra.fill("#poll-closes", closes);
  await petra.screenshot({ path: `${artifacts}poll-form.png` });
  await petra.click("#poll-send");
  await petra.locator("#poll-form").waitFor({ state: "hidden" });

  const onPetra = pollCard(petra, "Where shall we go");
  const onKofi = pollCard(kofi, "Where shall we go");
  await onKofi.waitFor();
  assert.deepEqual(await onKofi.locator(".poll-text").allTextContents(), ["Lisbon", "Berlin", "Oslo"]);
  await onKofi.locator(".poll-note", { hasText: "Choose one · closes" }).waitFor();
  await kofi.locator(`#conversations button[data-conversation="${id}"]`, { hasText: "[poll] Where shall we go" }).waitFor();
  await onPetra.getByRole("button", { name: "Close poll" }).waitFor();
  assert.equal(await onKofi.getByRole("button", { name: "Close poll" }).count(), 0, "a plain member does not close another's poll");

  // Kofi votes Lisbon: his choice pressed, the count and his name on
  // Petra's side.
  await option(onKofi, "o1").click();
  await option(onKofi, "o1").and(kofi.locator('[aria-pressed="true"]')).filter({ hasText: "1" }).waitFor();
  await option(onPetra, "o1").locator(".poll-count", { hasText: "1" }).waitFor();
  await option(onPetra, "o1").locator(".poll-voters", { hasText: "kofi" }).waitFor();
  assert.equal(await option(onPetra, "o1").getAttribute("aria-pressed"), "false");
  await onKofi.getByRole("button", { name: "Retract your vote" }).waitFor();

  // Petra votes Berlin; Kofi moves to Berlin too (one choice: his vote
  // is replaced).
  await option(onPetra, "o2").click();
  await option(onKofi, "o2").locator(".poll-count", { hasText: "1" }).waitFor();
  await option(onKofi, "o2").click();
  await option(onKofi, "o2").and(kofi.locator('[aria-pressed="true"]')).filter({ hasText: "2" }).waitFor();
  assert.equal(await option(onKofi, "o1").getAttribute("aria-pressed"), "false");
  await option(onPetra, "o1").locator(".poll-count", { hasText: "0" }).waitFor();
  await option(onPetra, "o2").locator(".poll-voters", { hasText: "kofi, you" }).waitFor();
  await onPetra.locator(".poll-total", { hasText: "2 votes" }).waitFor();
  // (The message's toolbar shows on hover and focus: away from it.)
  await petra.mouse.move(400, 600);
  await petra.locator("#text").focus();
  await petra.screenshot({ path: `${screenshots}polls.png` });

  // A reload shows Kofi's choice as the server keeps it.
  await kofi.reload();
  const again = pollCard(kofi, "Where shall we go");
  await option(again, "o2").and(kofi.locator('[aria-pressed="true"]')).waitFor();

  // He retracts it.
  await again.getByRole("button", { name: "Retract your vote" }).click();
  await option(onPetra, "o2").locator(".poll-count", { hasText: "1" }).waitFor();
  await option(again, "o2").and(kofi.locator('[aria-pressed="false"]')).waitFor();
  assert.equal(await again.getByRole("button", { name: "Retract your vote" }).count(), 0);

  // Petra closes it: closed on both sides, no more voting.
  await onPetra.getByRole("button", { name: "Close poll" }).click();
  await again.locator(".poll-note .closed", { hasText: "Closed" }).waitFor();
  await onPetra.locator(".poll-note .closed", { hasText: "Closed" }).waitFor();
  assert.equal(await option(again, "o1").isDisabled(), true);
  assert.equal(await onPetra.getByRole("button", { name: "Close poll" }).count(), 0);
  assert.equal(await onPetra.getByRole("button", { name: "Retract your vote" }).count(), 0);
  await onPetra.locator(".poll-total", { hasText: "1 vote" }).waitFor();

  // Multiple answers, anonymous: a click adds or takes back one choice,
  // and nobody is named.
  await petra.getByRole("button", { name: "Create a poll" }).click();
  await petra.fill("#poll-question", "Which snacks?");
  await petra.getByRole("textbox", { name: "Option 1" }).fill("Crisps");
  await petra.getByRole("textbox", { name: "Option 2" }).fill("Fruit");
  await petra.check("#poll-multiple");
  await petra.check("#poll-anonymous");
  await petra.click("#poll-send");
  const snacks = pollCard(kofi, "Which snacks?");
  await snacks.locator(".poll-note", { hasText: "Choose any · anonymous" }).waitFor();
  await option(snacks, "o1").click();
  await option(snacks, "o1").and(kofi.locator('[aria-pressed="true"]')).waitFor();
  await option(snacks, "o2").click();
  await option(snacks, "o2").and(kofi.locator('[aria-pressed="true"]')).waitFor();
  assert.equal(await option(snacks, "o1").getAttribute("aria-pressed"), "true", "both chosen");
  await option(snacks, "o1").click();
  await option(snacks, "o1").and(kofi.locator('[aria-pressed="false"]')).waitFor();
  const petraSnacks = pollCard(petra, "Which snacks?");
  await option(petraSnacks, "o2").locator(".poll-count", { hasText: "1" }).waitFor();
  await option(petraSnacks, "o1").locator(".poll-count", { hasText: "0" }).waitFor();
  assert.equal(await petraSnacks.locator(".poll-voters").count(), 0);
  assert.equal(await snacks.locator(".poll-voters").count(), 0);
  for (const page of [petra, kofi]) await page.context().close();
});

// ---- Link previews (v1.3) ----

/** A dusk sea under a sky, for a card's image. */
const SEASCAPE = png(96, (x, y) =>
  y < 56
    ? [250 - y * 2, 170 - y * 2, 90 + y]
    : [20 + ((x + y) % 9) * 3, 70 + (y - 56), 140 + (y - 56)],
);

test("link previews (v1.3): a link's card shows under the text on both sides (site, title linking out in a new tab, description clamped, the image as a thumbnail), not edited; a page's markup stays text; a tenant admin turns previews off and on in Moderation", async () => {
  const ferry = await linkPage({
    title: "Night ferry to the islands",
    description:
      "Timetables, fares and what to bring for the crossing. The boat leaves the old harbour at nine, " +
      "calls at every island on the way out and comes back at dawn; cabins sell out early in summer, " +
      "deck seats never do, and the café on board closes at midnight.",
    siteName: "Harbour Times",
    image: SEASCAPE,
  });
  const hostile = await linkPage({
    title: "<b>Bold</b> claims",
    description: "<img src=x onerror=alert(1)> stays words",
    siteName: "<i>Tricky</i>",
    image: png(8, [200, 40, 40]),
  });
  const id = await groupOf("lia", ["noor"], "Weekend trip");
  const lia = await signIn("lia", FEATURE);
  const noor = await signIn("noor", FEATURE);
  try {
    await openChat(lia, id);
    await openChat(noor, id);
    await say(noor, "Where do we catch the boat on Saturday?");
    await say(lia, `Ferry details here: ${ferry.url}`);

    for (const who of [noor, lia]) {
      const message = timelineMsg(who, "Ferry details here");
      const card = message.locator(".link-preview");
      await card.waitFor();
      assert.equal(await card.locator(".link-preview-site").textContent(), "Harbour Times");
      const title = card.locator("a.link-preview-title");
      assert.equal(await title.textContent(), "Night ferry to the islands");
      assert.equal(await title.getAttribute("href"), ferry.url);
      assert.equal(await title.getAttribute("target"), "_blank");
      assert.equal(await title.getAttribute("rel"), "noopener noreferrer");
      // Clamped: the box is shorter than its text.
      const description = card.locator(".link-preview-description");
      assert.ok((await description.textContent()).startsWith("Timetables, fares"));
      assert.ok(await description.evaluate((d) => d.scrollHeight > d.clientHeight + 2), "the description is clamped");
      // The image through the media download, as an image message's.
      await who.waitForFunction(() => {
        const img = document.querySelector("#messages .link-preview img.link-preview-image");
        return img && img.src.startsWith("blob:") && img.complete && img.naturalWidth === 96;
      });
      // The message was not edited.
      assert.equal(await message.locator(".meta", { hasText: "edited" }).count(), 0);
    }
    assert.equal(await timelineMsg(noor, "Where do we catch").locator(".link-preview").count(), 0);
    // (The message's toolbar shows on hover and focus: away from it.)
    await noor.mouse.move(400, 650);
    await noor.locator("#text").focus();
    await noor.screenshot({ path: `${screenshots}link-previews.png` });

    // A page's markup is its words: shown, never made.
    await say(lia, `And this one: ${hostile.url}`);
    const tricky = timelineMsg(noor, "And this one").locator(".link-preview");
    await tricky.waitFor();
    assert.equal(await tricky.locator(".link-preview-title").textContent(), "<b>Bold</b> claims");
    assert.equal(await tricky.locator(".link-preview-site").textContent(), "<i>Tricky</i>");
    assert.equal(await tricky.locator(".link-preview-description").textContent(), "<img src=x onerror=alert(1)> stays words");
    assert.equal(await tricky.locator(".link-preview-text b, .link-preview-text i, .link-preview-text img").count(), 0);

    // A tenant admin: the switch in Moderation, off and on again.
    const curator = await signInWithToken(adminToken("curator"), FEATURE);
    await curator.click("#show-moderation");
    const tools = curator.locator("#panel");
    const toggle = tools.getByRole("switch", { name: /Link previews/ });
    await toggle.and(curator.locator('[aria-checked="true"]')).filter({ hasText: "Link previews: on" }).waitFor();
    await toggle.click();
    await tools.locator("#moderation-state", { hasText: "Link previews off" }).waitFor();
    await toggle.and(curator.locator('[aria-checked="false"]')).filter({ hasText: "Link previews: off" }).waitFor();
    await curator.screenshot({ path: `${artifacts}link-previews-switch.png` });
    const setting = async () => (await fetch(`${dev.url}/v1/admin/previews`, { headers: { authorization: `Bearer ${adminToken("curator")}` } })).json();
    assert.deepEqual(await setting(), { enabled: false });
    await toggle.click();
    await tools.locator("#moderation-state", { hasText: "Link previews on" }).waitFor();
    await toggle.and(curator.locator('[aria-checked="true"]')).waitFor();
    assert.deepEqual(await setting(), { enabled: true });
    await curator.context().close();
  } finally {
    for (const p of [lia, noor]) await p.context().close();
    await ferry.close();
    await hostile.close();
  }
});

test("search: a member types in the search box, sees the highlighted result, clicks it and lands on the message", async () => {
  const id = await groupOf("nell", ["oren"], "Field trip");
  // The message to find, then 55 more: it is older than the first page
  // the conversation opens on. Markup in a message stays text in the
  // results too.
  const nell = await sdkClient("nell");
  await nell.sendText(id, "Bring the zeppelin tickets on Friday");
  for (let i = 0; i < 55; i++) await nell.sendText(id, `filler note ${i}`);
  await nell.sendText(id, `zeppelin <img src=x onerror="window.__pwned=1"> museum`);
  nell.close();

  const oren = await signIn("oren", FEATURE);
  const panel = oren.locator("#panel");
  /** Searches `q` (Enter again until the index has caught up: within
   * 2 s of the acks) until `ready` shows. */
  async function search(q, ready) {
    await oren.fill("#search-q", q);
    const deadline = Date.now() + 10_000;
    await oren.press("#search-q", "Enter");
    await oren.waitForTimeout(300);
    while (!(await ready.count())) {
      assert.ok(Date.now() < deadline, `no results for ${q}`);
      await oren.press("#search-q", "Enter");
      await oren.waitForTimeout(500);
    }
  }

  // Nothing matches: said so.
  await oren.locator("#search-q").pressSequentially("xylophonequartz");
  await panel.locator("#no-results", { hasText: "No messages found" }).waitFor();

  // 56 filler notes: a page of 20, then "More" reads the next one.
  await search("filler", panel.locator("li[data-result]").nth(19));
  assert.equal(await panel.locator("li[data-result]").count(), 20);
  await panel.getByRole("button", { name: "More" }).click();
  await panel.locator("li[data-result]").nth(39).waitFor();

  // The word, highlighted; the markup around it shown as text.
  const result = panel.locator("li[data-result]", { hasText: "Bring the zeppelin tickets" });
  await search("zeppelin", result);
  assert.match(await result.locator(".highlight").innerHTML(), /<b>zeppelin<\/b>/);
  await result.locator(".where", { hasText: "Field trip" }).waitFor();
  await result.locator(".note", { hasText: "nell" }).waitFor();
  const hostile = panel.locator("li[data-result]", { hasText: "museum" });
  await hostile.waitFor();
  assert.match(await hostile.locator(".highlight").textContent(), /<img src=x/);
  assert.equal(await panel.locator("img").count(), 0);
  assert.equal(await oren.evaluate(() => window.__pwned), undefined);

  // A click opens the conversation at the message (older pages read up
  // to it), scrolled into view and flashed.
  await result.locator("button.result").click();
  await oren.waitForSelector("#chat-title:text('Field trip')");
  const found = oren.locator("#messages .msg.flash", { has: oren.locator(".body", { hasText: "Bring the zeppelin tickets on Friday" }) });
  await found.waitFor({ timeout: 10_000 });
  // In view once the jump settles: the redraws right after it (profiles
  // and receipts arriving) may still move it for a moment.
  const zeppelin = "Bring the zeppelin tickets on Friday";
  const where = (text) => {
    const box = document.getElementById("messages").getBoundingClientRect();
    const node = [...document.querySelectorAll("#messages .msg")].find((m) => m.querySelector(".body")?.textContent.includes(text));
    const at = node?.getBoundingClientRect();
    return { inView: !!at && at.top >= box.top && at.bottom <= box.bottom, box: [box.top, box.bottom], at: at && [at.top, at.bottom] };
  };
  const settled = await oren
    .waitForFunction((text) => {
      const box = document.getElementById("messages").getBoundingClientRect();
      const node = [...document.querySelectorAll("#messages .msg")].find((m) => m.querySelector(".body")?.textContent.includes(text));
      const at = node?.getBoundingClientRect();
      return !!at && at.top >= box.top && at.bottom <= box.bottom;
    }, zeppelin, { timeout: 3000 })
    .then(() => true, () => false);
  assert.ok(settled, `the message is scrolled into view: ${JSON.stringify(await oren.evaluate(where, zeppelin))}`);
  await oren.mouse.move(1, 1);
  await oren.screenshot({ path: `${screenshots}search.png` });

  // Escape closes the results.
  await oren.focus("#search-q");
  await oren.press("#search-q", "Escape");
  await panel.waitFor({ state: "hidden" });
  await oren.context().close();
});

test("scheduling: a message scheduled a few seconds ahead is listed, one is cancelled, the other arrives for both at its time", async () => {
  const id = await groupOf("lise", ["mads"], "Reminders");
  const lise = await signIn("lise", FEATURE);
  const mads = await signIn("mads", FEATURE);
  await openChat(lise, id);
  await openChat(mads, id);

  // The picker opens an hour ahead.
  await lise.click("#schedule");
  await lise.locator("#schedule-picker").waitFor();
  const ahead = await lise.evaluate(() => new Date(document.getElementById("schedule-at").value).getTime() - Date.now());
  assert.ok(ahead > 3_500_000 && ahead <= 3_600_000, `an hour ahead, not ${ahead} ms`);
  await lise.click("#schedule-cancel");
  await lise.locator("#schedule-picker").waitFor({ state: "hidden" });

  /** Schedules `text` from the picker for `at` (a datetime-local value). */
  async function schedule(text, at) {
    await lise.fill("#text", text);
    await lise.click("#schedule");
    await lise.locator("#schedule-at").evaluate((input, value) => (input.value = value), at);
    await lise.click("#schedule-send");
  }
  /** A datetime-local value `ms` from now, in the browser's time zone. */
  const fromNow = (ms) =>
    lise.evaluate((ms) => {
      const at = new Date(Date.now() + ms);
      const pad = (n) => String(n).padStart(2, "0");
      return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
    }, ms);

  // A time past is refused before it goes; the text stays.
  await schedule("too late", await fromNow(-60_000));
  await lise.locator("#chat-error", { hasText: "in the future" }).waitFor();
  assert.equal(await lise.inputValue("#text"), "too late");
  await lise.click("#schedule-cancel");

  // Two, a few seconds ahead: the compose box empties, and both are listed.
  const at = await fromNow(5_000);
  await schedule("Stand-up starts now", at);
  await lise.waitForFunction(() => document.getElementById("text").value === "");
  assert.equal(await lise.locator("#schedule-picker").isHidden(), true);
  await schedule("Never mind this one", at);
  await lise.waitForFunction(() => document.getElementById("text").value === "");
  await lise.locator("#scheduled-count", { hasText: "2 scheduled" }).waitFor();
  await lise.click("#show-scheduled");
  const panel = lise.locator("#panel");
  await panel.locator("li[data-scheduled]", { hasText: "Stand-up starts now" }).waitFor();
  await panel.locator("li[data-scheduled]", { hasText: "Never mind this one" }).waitFor();
  assert.equal(await panel.locator("li[data-scheduled]").count(), 2);
  await lise.screenshot({ path: `${screenshots}scheduled.png` });

  // One cancelled: listed no more.
  await panel.locator("li[data-scheduled]", { hasText: "Never mind this one" }).getByRole("button", { name: "Cancel scheduled message" }).click();
  await panel.locator("li[data-scheduled]", { hasText: "Never mind this one" }).waitFor({ state: "detached" });
  await lise.locator("#scheduled-count", { hasText: "1 scheduled" }).waitFor();
  assert.equal(await panel.locator("li[data-scheduled]").count(), 1);

  // The other arrives at its time, for both; the cancelled one never.
  await bodies(mads, "Stand-up starts now").waitFor({ timeout: 15_000 });
  await bodies(lise, "Stand-up starts now").waitFor({ timeout: 15_000 });
  await timelineMsg(mads, "Stand-up starts now").locator(".scheduled-mark").waitFor();
  await panel.locator("#no-scheduled").waitFor();
  await lise.locator("#scheduled-bar").waitFor({ state: "hidden" });
  await lise.waitForTimeout(1_500);
  for (const page of [lise, mads]) {
    assert.equal(await bodies(page, "Stand-up starts now").count(), 1);
    assert.equal(await bodies(page, "Never mind this one").count(), 0);
  }
  for (const page of [lise, mads]) await page.context().close();
});

test("profiles: a user sets a name, a picture and a status; the other member sees them on messages, in the list, the members and the header, live and after a reload", async () => {
  const group = await groupOf("rosa", ["sam"], "Garden club");
  const direct = await directOf("rosa", "sam");
  const sam = await signIn("sam", FEATURE);
  const rosa = await signIn("rosa", FEATURE);
  await openChat(rosa, group);
  await say(rosa, "the tulips are out");
  await openChat(sam, group);
  await bodies(sam, "the tulips are out").waitFor();
  // No profile yet: the id stands for the name, the initial for the picture.
  await sam.locator(".msg .sender", { hasText: "rosa" }).waitFor();
  await sam.locator('.msg .avatar[data-avatar="rosa"]', { hasText: "R" }).waitFor();

  // Rosa edits her profile: a name and a status, then a picture.
  await rosa.click("#show-profile");
  await rosa.fill("#profile-name", "Rosa Gardener");
  await rosa.fill("#profile-emoji", "🌷");
  await rosa.fill("#profile-status", "in the garden");
  await rosa.selectOption("#profile-clears", "14400");
  await rosa.click("#profile-save");
  await rosa.locator("#profile-saved", { hasText: "Saved" }).waitFor();
  await rosa.setInputFiles("#profile-avatar", { name: "me.png", mimeType: "image/png", buffer: PNG });
  await rosa.locator("#who .avatar img").waitFor();
  await rosa.locator("#who", { hasText: "Rosa Gardener" }).waitFor();
  await rosa.locator("#who .status-line", { hasText: "🌷 in the garden" }).waitFor();
  await rosa.screenshot({ path: `${screenshots}profile-edit.png` });

  // Sam sees it live: the name on her message, her picture, the direct
  // conversation's title in the list, the members with her status.
  await sam.locator(".msg .sender", { hasText: "Rosa Gardener" }).waitFor();
  await sam.waitForFunction(() => {
    const img = document.querySelector('.msg .avatar[data-avatar="rosa"] img');
    return img && img.complete && img.naturalWidth === 48;
  });
  await sam.locator(`#conversations button[data-conversation="${direct}"]`, { hasText: "Rosa Gardener" }).waitFor();
  await sam.click("#show-members");
  await sam.locator('#panel li[data-member="rosa"]', { hasText: "Rosa Gardener" }).waitFor();
  await sam.locator('#panel li[data-member="rosa"] .status-line', { hasText: "in the garden" }).waitFor();
  await sam.mouse.move(1, 1);
  await sam.screenshot({ path: `${screenshots}profiles.png` });

  // After a reload the names are read again.
  await sam.reload();
  await sam.waitForSelector("#login", { state: "hidden" });
  await sam.locator(".msg .sender", { hasText: "Rosa Gardener" }).waitFor();

  // The status is cleared from the form; the name stays.
  await rosa.fill("#profile-emoji", "");
  await rosa.fill("#profile-status", "");
  await rosa.click("#profile-save");
  await rosa.waitForFunction(() => !document.querySelector("#who .status-line"));
  await rosa.locator("#who", { hasText: "Rosa Gardener" }).waitFor();
  for (const page of [rosa, sam]) await page.context().close();
});

test("a session the server ends for good (an erasure) returns to the sign-in form, saying why, and is not resumed on reload", async () => {
  await groupOf("erin", ["fred"], "Soon gone");
  const erin = await signIn("erin", FEATURE);
  const response = await fetch(`${dev.url}/v1/admin/users/erin`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${adminToken("eraser")}` },
  });
  assert.equal(response.status, 202, await response.text());
  await erin.locator("#login").waitFor({ state: "visible", timeout: 20_000 });
  await erin.locator("#login-error", { hasText: "ended your session" }).waitFor();
  assert.equal(await erin.locator("#app").isHidden(), true);
  await erin.reload();
  await erin.locator("#login").waitFor({ state: "visible" });
  assert.equal(await erin.locator("#app").isHidden(), true, "not resumed");
  await erin.context().close();
});

test("public channels and invites (v1.3): an owner opens a channel with a topic and announcement posting; a user finds it in the directory, joins, reads from the join on and may only react; an invite link lets another user into a private group", async () => {
  const id = await groupOf("nora", ["otto"], "Launch news");
  const privy = await groupOf("nora", [], "Inner circle");
  const nora = await signIn("nora", FEATURE);
  await openChat(nora, id);
  await say(nora, "Before anyone came");

  // The owner opens it: public, a topic, only admins post.
  await nora.click("#show-admin");
  const admin = nora.locator("#panel");
  await admin.locator("#no-invites").waitFor();
  await nora.selectOption("#visibility", "public");
  await nora.selectOption("#posting", "admins");
  await nora.fill("#topic", "Release notes and launch dates");
  await admin.getByRole("button", { name: "Save channel settings" }).click();
  await nora.locator("#messages .msg.system", { hasText: "nora changed the conversation's settings" }).waitFor();
  await say(nora, "v3 ships Monday");

  // Pablo finds it by its topic and joins.
  const pablo = await signIn("pablo", FEATURE);
  await pablo.click("#show-channels");
  const panel = pablo.locator("#panel");
  await panel.locator('li[data-channel]', { hasText: "Launch news" }).waitFor();
  await pablo.fill("#channel-q", "no such thing");
  await panel.locator("#no-channels").waitFor();
  await pablo.fill("#channel-q", "LAUNCH DATES");
  const entry = panel.locator(`li[data-channel="${id}"]`);
  await entry.locator(".topic", { hasText: "Release notes and launch dates" }).waitFor();
  await entry.locator(".note", { hasText: "2 members" }).waitFor();
  await pablo.screenshot({ path: `${screenshots}channel-directory.png` });
  await entry.getByRole("button", { name: "Join Launch news" }).click();
  await pablo.waitForSelector("#chat-tools:not([hidden])");
  await nora.locator("#messages .msg.system", { hasText: "pablo joined" }).waitFor();

  // He reads from his join on, and the composer is read-only for him;
  // he reacts, and the owner posts.
  await pablo.locator("#messages .msg.system", { hasText: "pablo joined" }).waitFor();
  assert.equal(await bodies(pablo, "v3 ships Monday").count(), 0);
  assert.equal(await bodies(pablo, "Before anyone came").count(), 0);
  await pablo.locator("#posting-note", { hasText: "Only owners and admins post here" }).waitFor();
  assert.equal(await pablo.locator("#text").isDisabled(), true);
  await say(nora, "Doors open at nine");
  const news = timelineMsg(pablo, "Doors open at nine");
  await news.waitFor();
  await news.getByRole("button", { name: "Add reaction" }).click();
  await news.getByRole("button", { name: "React with 🎉" }).click();
  await chip(timelineMsg(nora, "Doors open at nine"), "🎉").filter({ hasText: "🎉 1" }).waitFor();
  await pablo.screenshot({ path: `${screenshots}announcement-channel.png` });

  // An invite link into the private group, for one use.
  await openChat(nora, privy);
  await nora.click("#show-admin");
  await nora.locator("#panel #no-invites").waitFor();
  await nora.fill("#invite-uses", "1");
  await nora.getByRole("button", { name: "Make an invite link" }).click();
  const link = nora.locator("#panel li[data-invite] .invite-link");
  await link.waitFor();
  const url = await link.getAttribute("title");
  await nora.locator("#panel li[data-invite] .note", { hasText: "0 of 1 used" }).waitFor();
  await nora.screenshot({ path: `${screenshots}invites.png` });

  const quinn = await signIn("quinn", FEATURE);
  await quinn.goto(url);
  await quinn.waitForSelector('#connection[data-status="open"]');
  await quinn.locator("#invite-title", { hasText: "Inner circle" }).waitFor();
  await quinn.screenshot({ path: `${screenshots}invite.png` });
  await quinn.getByRole("button", { name: "Accept and join" }).click();
  await quinn.waitForSelector("#chat-tools:not([hidden])");
  await quinn.locator("#messages .msg.system", { hasText: "quinn joined" }).waitFor();
  assert.equal(new URL(quinn.url()).searchParams.get("invite"), null, "the link is used up in the address bar");

  // Used up: the next user is told so.
  const rhea = await signIn("rhea", FEATURE);
  await rhea.goto(url);
  await rhea.waitForSelector('#connection[data-status="open"]');
  await rhea.locator("#invite-error", { hasText: "does not work" }).waitFor();
  for (const page of [nora, pablo, quinn, rhea]) await page.context().close();
});
