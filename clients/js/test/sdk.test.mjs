// The SDK against a real `switchboard dev`: chat, edits and deletes,
// receipts and typing, backlog after being offline, a gateway killed
// mid-conversation with nothing lost or duplicated, and a frozen one
// noticed by the SDK's ping deadline, and the browser's offline and
// online events.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket, { WebSocketServer } from "ws";
import { SwitchboardClient } from "../dist/index.js";
import { Dev, token, waitFor, until } from "./dev.mjs";

let dev;
before(async () => {
  dev = await Dev.start();
});
after(async () => {
  await dev?.stop();
});

/** A connected client for `user`, with a token refresher. */
async function client(user, device = "web", options = {}) {
  const c = new SwitchboardClient({
    url: dev.url,
    token: async () => token(user, device),
    WebSocket,
    reconnect: { minDelayMs: 100, maxDelayMs: 1_000 },
    ...options,
  });
  const open = waitFor(c, "status", (s) => s === "open");
  c.connect();
  await open;
  return c;
}

const texts = (c, conversation) =>
  c
    .conversation(conversation)
    .messages.filter((m) => m.content?.kind === "text")
    .map((m) => m.content.text);

test("the conversation list comes a page at a time, newest first", async () => {
  const pager = await client("pager");
  try {
    const created = [];
    for (let i = 0; i < 7; i++) {
      const c = await pager.rest.createConversation("group", [`pagee${i}`], `page ${i}`);
      created.push(c.conversation_id);
    }
    // The newest activity first: the last one created leads.
    const seen = [];
    let cursor;
    let pages = 0;
    do {
      const page = await pager.rest.conversationPage({ limit: 3, ...(cursor ? { cursor } : {}) });
      assert.ok(page.conversations.length <= 3);
      seen.push(...page.conversations.map((c) => c.conversation_id));
      cursor = page.next_cursor ?? undefined;
      pages += 1;
    } while (cursor);
    assert.deepEqual(seen, [...created].reverse());
    assert.equal(pages, 3);
    // A message moves its conversation to the front of the first page.
    await pager.sendText(created[0], "bump");
    const first = await pager.rest.conversationPage({ limit: 1 });
    assert.deepEqual(first.conversations.map((c) => c.conversation_id), [created[0]]);
    assert.ok(first.next_cursor);
    await assert.rejects(pager.rest.conversationPage({ cursor: "not-a-cursor" }), (e) => e.status === 400 && e.code === "invalid_request");
  } finally {
    pager.close();
  }
});

test("chat, edits and deletes, receipts and typing", async () => {
  const alice = await client("alice");
  const bob = await client("bob");
  try {
    const { conversation_id: id } = await alice.rest.createConversation("group", ["bob"], "sdk");
    const arrived = waitFor(bob, "message", (m) => m.content?.kind === "text" && m);
    const sent = await alice.sendText(id, "hello");
    const message = await arrived;
    assert.equal(message.message_id, sent.message_id);
    assert.equal(message.seq, sent.seq);
    assert.deepEqual(texts(bob, id), ["hello"]);
    // The conversation list shows it, with its unread count.
    const list = await bob.rest.conversations();
    assert.ok(list.some((c) => c.conversation_id === id));

    const edited = waitFor(bob, "updated", (m) => m.edited_at && m);
    alice.edit(id, sent.message_id, { kind: "text", text: "hello!" });
    assert.equal((await edited).content.text, "hello!");
    assert.deepEqual(texts(bob, id), ["hello!"]);
    const versions = await alice.rest.versions(id, sent.message_id);
    assert.equal(versions.versions.length, 2);

    const deleted = waitFor(bob, "updated", (m) => m.deleted_at && m);
    alice.delete(id, sent.message_id);
    assert.equal((await deleted).content, null);
    assert.deepEqual(texts(bob, id), []);

    // Read receipts reach the sender (coalesced over the receipt window).
    const read = waitFor(alice, "receipt", (r) => r.user_id === "bob" && r.kind === "read" && r);
    bob.markRead(id);
    assert.ok((await read).seq >= sent.seq);
    assert.ok(alice.conversation(id).receipts.get("bob").read >= sent.seq);

    // Typing shows, then runs out by itself.
    const typing = waitFor(bob, "typing", (t) => t.users.includes("alice"));
    alice.typing(id, "start");
    await typing;
    assert.deepEqual(bob.conversation(id).typingUsers(), ["alice"]);
    await waitFor(bob, "typing", (t) => t.users.length === 0, 10_000);
  } finally {
    alice.close();
    bob.close();
  }
});

test("backlog after being offline arrives once, in order", async () => {
  const alice = await client("alice");
  const { conversation_id: id } = await alice.rest.createConversation("group", ["carol"]);
  const carol = await client("carol", "phone");
  carol.close();
  try {
    for (let i = 0; i < 5; i++) await alice.sendText(id, `while away ${i}`);
    // A fresh client of the same device: it knows nothing, and the
    // device's backlog brings it every message it has not acked.
    const back = await client("carol", "phone");
    try {
      await until(() => texts(back, id).length === 5, 15_000, "the backlog");
      assert.deepEqual(
        texts(back, id),
        [0, 1, 2, 3, 4].map((i) => `while away ${i}`),
      );
      const seqs = back.conversation(id).messages.map((m) => m.seq);
      assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
    } finally {
      back.close();
    }
  } finally {
    alice.close();
  }
});

test("a gateway killed mid-conversation: every send stored and seen exactly once", async () => {
  const alice = await client("alice");
  const bob = await client("bob", "laptop");
  try {
    const { conversation_id: id } = await alice.rest.createConversation("group", ["bob"]);
    const first = [];
    for (let i = 0; i < 10; i++) first.push(alice.sendText(id, `m${i}`));
    await Promise.all(first);
    // Down: these wait in the SDK and go when it is back.
    await dev.kill();
    await until(() => alice.status === "reconnecting", 5_000, "alice noticing");
    const second = [];
    for (let i = 10; i < 20; i++) second.push(alice.sendText(id, `m${i}`));
    assert.ok(alice.pendingSends >= 10);
    await dev.run();
    const acks = await Promise.all(second);
    assert.equal(new Set(acks.map((a) => a.message_id)).size, 10);

    const want = Array.from({ length: 20 }, (_, i) => `m${i}`);
    await until(() => texts(bob, id).length >= 20, 20_000, "bob's 20 messages");
    assert.deepEqual(texts(bob, id), want);
    // Stored once each: the history has no duplicate either.
    const page = await bob.rest.history(id, { limit: 200 });
    const stored = page.messages.filter((m) => m.content?.kind === "text").map((m) => m.content.text);
    assert.deepEqual(stored.reverse(), want);
  } finally {
    alice.close();
    bob.close();
  }
});

test("a frozen server: the SDK notices by its ping deadline, reconnects, and its pending send is stored and acked once", async () => {
  const pingIntervalMs = 500;
  const pongTimeoutMs = 500;
  const alice = await client("alice", "frozen", { pingIntervalMs, pongTimeoutMs, connectTimeoutMs: 1_000 });
  try {
    const { conversation_id: id } = await alice.rest.createConversation("group", ["bob"]);
    await alice.sendText(id, "before the freeze");
    let shown = 0;
    alice.on("message", (m) => {
      if (m.content?.kind === "text" && m.content.text === "while frozen") shown += 1;
    });

    dev.freeze();
    const frozenAt = Date.now();
    let settled = 0;
    const sent = alice.sendText(id, "while frozen").finally(() => {
      settled += 1;
    });
    assert.equal(alice.status, "open", "a frozen server's socket still looks open");
    // The last frame came before the freeze: a ping goes at most
    // pingIntervalMs after it, and its deadline passes pongTimeoutMs later.
    await until(() => alice.status !== "open", pingIntervalMs + pongTimeoutMs + 500, "the SDK noticing the freeze");
    const noticed = Date.now() - frozenAt;
    assert.ok(noticed <= pingIntervalMs + pongTimeoutMs + 500, `noticed after ${noticed} ms`);
    assert.equal(alice.pendingSends, 1);
    await new Promise((r) => setTimeout(r, 300));
    dev.thaw();

    const ack = await sent;
    await until(() => alice.status === "open", 10_000, "the SDK reconnecting");
    // Give a second ack (the frozen connection's, or a resend's) time to
    // show if it were to.
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(settled, 1);
    assert.equal(alice.pendingSends, 0);
    assert.equal(shown, 1, "the sender's state shows it once");
    const mine = alice.conversation(id).messages.filter((m) => m.content?.text === "while frozen");
    assert.deepEqual(mine.map((m) => m.message_id), [ack.message_id]);
    const page = await alice.rest.history(id, { limit: 50 });
    const stored = page.messages.filter((m) => m.content?.kind === "text" && m.content.text === "while frozen");
    assert.deepEqual(stored.map((m) => m.message_id), [ack.message_id], "stored once");
  } finally {
    if (dev.frozen) dev.thaw();
    alice.close();
  }
});

test("the browser's offline event drops the connection at once, and online reconnects without waiting out the back-off", async () => {
  // Node has no window: a stand-in EventTarget carries the two events
  // the SDK listens for in a browser.
  globalThis.window = new EventTarget();
  // A back-off far longer than the test: only `online` can reconnect in time.
  const c = await client("dora", "web", { reconnect: { minDelayMs: 60_000, maxDelayMs: 60_000 } });
  try {
    const { conversation_id: id } = await c.rest.createConversation("group", ["erin"]);
    window.dispatchEvent(new Event("offline"));
    assert.equal(c.status, "reconnecting", "dropped at once");
    const sent = c.sendText(id, "sent while offline");
    const open = waitFor(c, "status", (s) => s === "open", 5_000);
    window.dispatchEvent(new Event("online"));
    await open;
    const ack = await sent;
    const page = await c.rest.history(id, { limit: 10 });
    assert.deepEqual(
      page.messages.filter((m) => m.content?.text === "sent while offline").map((m) => m.message_id),
      [ack.message_id],
    );
  } finally {
    c.close();
    delete globalThis.window;
  }
});

test("an ack lost on an open connection: the send is written again and resolves", { timeout: 10_000 }, async () => {
  // A real gateway loses an ack only while its own NATS connection
  // breaks, which cannot be timed from here: a stand-in server answers
  // the second copy of each send and ignores the first.
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise((resolve) => server.once("listening", resolve));
  const copies = new Map();
  let connections = 0;
  server.on("connection", (socket) => {
    connections += 1;
    socket.on("message", (data) => {
      const frame = JSON.parse(data.toString());
      if (frame.type !== "send_message") return;
      const n = (copies.get(frame.client_msg_id) ?? 0) + 1;
      copies.set(frame.client_msg_id, n);
      if (n < 2) return;
      socket.send(
        JSON.stringify({
          type: "ack",
          client_msg_id: frame.client_msg_id,
          conversation_id: frame.conversation_id,
          message_id: "1",
          seq: 1,
          status: "sent",
        }),
      );
    });
  });
  const c = new SwitchboardClient({
    url: `http://127.0.0.1:${server.address().port}`,
    token: "not-checked-here",
    WebSocket,
    resendAfterMs: 300,
  });
  try {
    const open = waitFor(c, "status", (s) => s === "open");
    c.connect();
    await open;
    const started = Date.now();
    const sent = await c.sendText("c1", "hello");
    assert.equal(sent.seq, 1);
    assert.ok(Date.now() - started >= 300, "written again only once overdue");
    assert.equal(copies.get(sent.client_msg_id), 2);
    assert.equal(connections, 1, "on the same connection");
    assert.equal(c.pendingSends, 0);
  } finally {
    c.close();
    server.close();
  }
});
