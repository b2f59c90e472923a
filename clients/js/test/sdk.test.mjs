// The SDK against a real `switchboard dev`: chat, edits and deletes,
// receipts and typing, backlog after being offline, a gateway killed
// mid-conversation with nothing lost or duplicated, and a frozen one
// noticed by the SDK's ping deadline, and the browser's offline and
// online events. Then its state model: message status with retry,
// commands queued while offline with their promises, the live
// conversation list, and persistence across a restart. Then the v1.1
// conversation features: reactions, replies and threads, mentions,
// notification settings, pins and roles; and the v1.2 safety features:
// blocks, bans, the conversation's policy and slow mode, reports and
// their resolution by a tenant admin, and the export. (A few cases a
// real gateway cannot be made to show on cue use a stand-in server.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket, { WebSocketServer } from "ws";
import { ApiError, CommandError, MemoryStore, SendError, SwitchboardClient, mentionsUser, verifyWebhook } from "../dist/index.js";
import { readFileSync } from "node:fs";
import { Dev, adminToken, botToken, linkPage, png, token, waitFor, until } from "./dev.mjs";

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

test("the token travels as a subprotocol, never in the URL (unless asked)", async () => {
  const opened = [];
  class Recording extends WebSocket {
    constructor(url, protocols) {
      super(url, protocols);
      opened.push({ url, protocols, socket: this });
    }
  }
  const c = await client("subprotocol", "web", { WebSocket: Recording });
  try {
    const [first] = opened;
    assert.ok(!first.url.includes("token="), first.url);
    assert.equal(first.protocols[0], "switchboard.v1");
    assert.ok(first.protocols[1].startsWith("switchboard.token."));
    assert.equal(first.socket.protocol, "switchboard.v1", "the gateway chose the protocol, not the token");
  } finally {
    c.close();
  }
  const q = await client("subprotocol", "web", { WebSocket: Recording, tokenIn: "query" });
  try {
    const last = opened[opened.length - 1];
    assert.ok(last.url.includes("token="));
    assert.equal(last.protocols, undefined);
  } finally {
    q.close();
  }
});

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

// ---- The state model ----

/** A stand-in gateway: `answer(frame, socket)` replies as the test
 * wants; every frame the client wrote is in `frames`. */
async function standIn(answer = () => {}) {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise((resolve) => server.once("listening", resolve));
  const frames = [];
  const sockets = [];
  server.on("connection", (socket) => {
    sockets.push(socket);
    socket.on("message", (data) => {
      const frame = JSON.parse(data.toString());
      frames.push(frame);
      answer(frame, socket);
    });
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    frames,
    sockets,
    reply: (socket, frame) => socket.send(JSON.stringify(frame)),
    close: () => {
      for (const s of sockets) s.terminate();
      server.close();
    },
  };
}

/** A `ws` WebSocket that keeps what the client writes. */
function recording(written) {
  return class extends WebSocket {
    send(data, ...rest) {
      written.push(JSON.parse(data));
      return super.send(data, ...rest);
    }
  };
}

/** An unsigned token naming a user (the stand-in checks nothing). */
const fakeToken = (sub) => `e30.${Buffer.from(JSON.stringify({ sub })).toString("base64url")}.x`;

const message = (fields) => ({
  sender_id: "someone",
  sender_device: "web",
  client_msg_id: `x${fields.message_id}`,
  created_at: "2026-01-01T00:00:00.000Z",
  edited_at: null,
  deleted_at: null,
  ...fields,
});

test("edits, deletes and marks made without a connection wait, then settle by their answers, one at a time per conversation", { timeout: 15_000 }, async () => {
  // The stand-in answers each edit and delete 100 ms later (a delete of
  // message 11 with `forbidden`), and notes any that came while another
  // of the conversation was unanswered.
  let open = 0;
  let overlapped = 0;
  const server = await standIn((frame, socket) => {
    if (frame.type !== "edit_message" && frame.type !== "delete_message") return;
    if (open > 0) overlapped += 1;
    open += 1;
    setTimeout(() => {
      open -= 1;
      if (frame.message_id === "11") {
        server.reply(socket, {
          type: "error",
          code: "forbidden",
          message: "only the sender deletes",
          request_type: frame.type,
          conversation_id: frame.conversation_id,
        });
        return;
      }
      const m = message({ message_id: frame.message_id, conversation_id: frame.conversation_id, seq: Number(frame.message_id) });
      server.reply(socket, {
        type: "message_updated",
        message:
          frame.type === "edit_message"
            ? { ...m, content: frame.content, edited_at: "2026-01-01T00:01:00.000Z" }
            : { ...m, content: null, deleted_at: "2026-01-01T00:01:00.000Z" },
      });
    }, 100);
  });
  const c = new SwitchboardClient({ url: server.url, token: "not-checked-here", WebSocket });
  try {
    const errors = [];
    c.on("error", (e) => errors.push(e));
    const edited = c.edit("c1", "10", { kind: "text", text: "fixed" });
    const refused = c.delete("c1", "11");
    const deleted = c.delete("c1", "12");
    const elsewhere = c.edit("c2", "20", { kind: "text", text: "other" });
    const marks = [c.markRead("c1", 1), c.markRead("c1", 3), c.markRead("c1", 2)];
    const settled = [];
    for (const [i, p] of [edited, refused, deleted, elsewhere, ...marks].entries()) p.then(() => settled.push(i), () => settled.push(i));
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(settled, [], "nothing settles without a connection");
    assert.equal(c.queued, 4);

    c.connect();
    const m10 = await edited;
    assert.equal(m10.content.text, "fixed");
    await assert.rejects(refused, (e) => {
      assert.ok(e instanceof CommandError);
      assert.equal(e.code, "forbidden");
      assert.equal(e.request, "delete_message");
      assert.equal(e.conversationId, "c1");
      return true;
    });
    // The refusal answered its own delete, not the one after it.
    assert.ok((await deleted).deleted_at);
    assert.equal((await elsewhere).content.text, "other");
    await Promise.all(marks);
    assert.equal(c.queued, 0);
    assert.equal(overlapped, 1, "only the other conversation's edit overlapped");
    const acks = server.frames.filter((f) => f.type === "ack_read");
    assert.deepEqual(acks, [{ type: "ack_read", conversation_id: "c1", seq: 3 }], "only the highest mark is written");
    const updates = server.frames.filter((f) => f.type === "edit_message" || f.type === "delete_message");
    assert.deepEqual(updates.map((f) => f.message_id).sort(), ["10", "11", "12", "20"]);
    // Refused for good: told as an `error` too, as before.
    assert.deepEqual(errors.map((e) => e.code), ["forbidden"]);
    // Marks already covered settle at once.
    await c.markRead("c1", 2);
    assert.equal(server.frames.filter((f) => f.type === "ack_read").length, 1);
  } finally {
    c.close();
    server.close();
  }
});

test("the queue is bounded: past maxQueued a command fails with queue_full, and a failed send can be retried later", { timeout: 10_000 }, async () => {
  const server = await standIn((frame, socket) => {
    if (frame.type !== "send_message") return;
    server.reply(socket, { type: "ack", client_msg_id: frame.client_msg_id, conversation_id: frame.conversation_id, message_id: String(frame.content.text.length), seq: 1, status: "sent" });
  });
  const c = new SwitchboardClient({ url: server.url, token: "not-checked-here", WebSocket, maxQueued: 2 });
  try {
    const first = c.sendText("c1", "one");
    const second = c.edit("c1", "5", { kind: "text", text: "two" });
    await assert.rejects(c.delete("c1", "6"), (e) => e instanceof CommandError && e.code === "queue_full");
    await assert.rejects(c.sendText("c1", "three"), (e) => e instanceof CommandError && !(e instanceof SendError) && e.code === "queue_full");
    const outgoing = c.conversation("c1").outgoing;
    assert.deepEqual(outgoing.map((o) => [o.content.text, o.status]), [["one", "pending"], ["three", "failed"]]);
    assert.equal(outgoing[1].error.code, "queue_full");
    second.catch(() => {});

    c.connect();
    await first;
    const again = await outgoing[1].retry();
    assert.equal(again.client_msg_id, outgoing[1].client_msg_id);
    assert.equal(outgoing[1].status, "sent");
    assert.deepEqual(c.conversation("c1").outgoing.map((o) => o.content.text), []);
  } finally {
    c.close();
    server.close();
  }
});

test("a send not acked within giveUpAfterMs fails with timeout; an ack that comes later still makes it sent", { timeout: 10_000 }, async () => {
  let socket;
  const server = await standIn((frame, s) => {
    socket = s;
  });
  const c = new SwitchboardClient({ url: server.url, token: fakeToken("zed"), WebSocket, giveUpAfterMs: 300, resendAfterMs: 100 });
  try {
    const statuses = [];
    c.on("outgoing", (o) => statuses.push(o.status));
    const open = waitFor(c, "status", (s) => s === "open");
    c.connect();
    await open;
    const started = Date.now();
    await assert.rejects(c.sendText("c1", "into the void"), (e) => e instanceof CommandError && e.code === "timeout");
    assert.ok(Date.now() - started >= 300);
    const [o] = c.conversation("c1").outgoing;
    assert.equal(o.status, "failed");
    const writes = server.frames.filter((f) => f.type === "send_message");
    assert.ok(writes.length >= 2, "written again while it waited");
    assert.equal(new Set(writes.map((f) => f.client_msg_id)).size, 1, "always with the same client_msg_id");
    // The server stored it after all: its ack is the truth.
    server.reply(socket, { type: "ack", client_msg_id: o.client_msg_id, conversation_id: "c1", message_id: "77", seq: 4, status: "sent" });
    await until(() => o.status === "sent", 2_000, "the late ack");
    assert.deepEqual(statuses, ["pending", "failed", "sent"]);
    assert.deepEqual(c.conversation("c1").messages.map((m) => m.message_id), ["77"]);
    assert.equal(c.conversation("c1").outgoing.length, 0);
  } finally {
    c.close();
    server.close();
  }
});

test("message status: pending while the gateway is down, failed when given up, and retry() stores it once with the same client_msg_id", async () => {
  const pat = await client("pat", "web", { giveUpAfterMs: 1_500 });
  const quinn = await client("quinn");
  try {
    const { conversation_id: id } = await quinn.rest.createConversation("group", ["pat"], "status");
    const seen = [];
    pat.on("outgoing", (o) => seen.push(o.status));
    await dev.kill();
    await until(() => pat.status === "reconnecting", 5_000, "pat noticing");
    const sending = pat.sendText(id, "are you there?");
    const [o] = pat.conversation(id).outgoing;
    assert.equal(o.status, "pending");
    assert.deepEqual(pat.pendingIn(id).map((p) => p.client_msg_id), [o.client_msg_id]);
    await assert.rejects(sending, (e) => e instanceof CommandError && e.code === "timeout" && e.request === "send_message");
    assert.equal(o.status, "failed");
    assert.equal(pat.pendingSends, 0);
    assert.deepEqual(pat.conversation(id).outgoing, [o], "a failed message stays, to retry or discard");

    await dev.run();
    await until(() => pat.status === "open", 15_000, "pat reconnecting");
    const sent = await o.retry();
    assert.equal(sent.client_msg_id, o.client_msg_id);
    assert.equal(o.status, "sent");
    assert.deepEqual(seen, ["pending", "failed", "pending", "sent"]);
    assert.deepEqual(pat.conversation(id).outgoing, []);
    assert.deepEqual(texts(pat, id), ["are you there?"]);
    await until(() => texts(quinn, id).length === 1, 10_000, "quinn's copy");
    const page = await quinn.rest.history(id, { limit: 10 });
    const stored = page.messages.filter((m) => m.content?.text === "are you there?");
    assert.deepEqual(stored.map((m) => [m.message_id, m.client_msg_id]), [[sent.message_id, o.client_msg_id]]);
    assert.equal(o.discard(), false, "a sent message cannot be discarded");
  } finally {
    pat.close();
    quinn.close();
  }
});

test("a refused send fails for good with its SendError; discard() forgets it", async () => {
  const ruth = await client("ruth");
  const quinn = await client("quinn");
  try {
    const { conversation_id: id } = await quinn.rest.createConversation("group", ["sue"], "not ruth's");
    await assert.rejects(ruth.sendText(id, "let me in"), (e) => e instanceof SendError && e instanceof CommandError && e.code === "not_a_member");
    const [o] = ruth.conversation(id).outgoing;
    assert.equal(o.status, "failed");
    assert.equal(o.error.frame.client_msg_id, o.client_msg_id);
    // The server remembers the refusal for its dedupe window: the same
    // client_msg_id again gets the same answer.
    await assert.rejects(o.retry(), (e) => e.code === "not_a_member");
    assert.equal(o.discard(), true);
    assert.deepEqual(ruth.conversation(id).outgoing, []);
    assert.equal(ruth.outgoing(o.client_msg_id), undefined);
  } finally {
    ruth.close();
    quinn.close();
  }
});

test("edits, deletes and reads made offline are sent on reconnect and their promises settle", async () => {
  globalThis.window = new EventTarget();
  const sam = await client("sam", "web", { reconnect: { minDelayMs: 60_000, maxDelayMs: 60_000 } });
  const tess = await client("tess");
  try {
    const { conversation_id: id } = await sam.rest.createConversation("group", ["tess"]);
    const one = await sam.sendText(id, "first");
    const two = await sam.sendText(id, "second");
    const fromTess = waitFor(sam, "message", (m) => m.content?.text === "hi sam" && m);
    await tess.sendText(id, "hi sam");
    const hers = await fromTess;
    await until(() => texts(tess, id).length === 3, 10_000, "tess's copy");

    window.dispatchEvent(new Event("offline"));
    const edited = sam.edit(id, one.message_id, { kind: "text", text: "first, edited" });
    const deleted = sam.delete(id, two.message_id);
    const read = sam.markRead(id);
    assert.equal(sam.conversation(id).receipts.get("sam").read, hers.seq, "the own mark moves at once");
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(texts(tess, id), ["first", "second", "hi sam"], "nothing went while offline");
    // A refusal comes back to its promise: tess may not edit sam's message.
    await assert.rejects(tess.edit(id, one.message_id, { kind: "text", text: "hijacked" }), (e) => e.code === "forbidden");

    const receipt = waitFor(tess, "receipt", (r) => r.user_id === "sam" && r.kind === "read" && r);
    window.dispatchEvent(new Event("online"));
    assert.equal((await edited).content.text, "first, edited");
    assert.ok((await deleted).deleted_at);
    await read;
    assert.ok((await receipt).seq >= hers.seq);
    await until(() => texts(tess, id).join("|") === "first, edited|hi sam", 10_000, "tess seeing the edit and the delete");
    assert.equal(sam.queued, 0);
  } finally {
    sam.close();
    tess.close();
    delete globalThis.window;
  }
});

test("the conversation list: loaded by page, kept current by events (order, previews, unread counts) with no REST call per event", async () => {
  const calls = [];
  const counting = (url, init) => {
    calls.push(`${init?.method ?? "GET"} ${new URL(url).pathname}`);
    return fetch(url, init);
  };
  const lena = await client("lena", "web", { fetch: counting });
  const mo = await client("mo");
  try {
    const ids = [];
    for (const title of ["a", "b", "c"]) ids.push((await lena.rest.createConversation("group", ["mo"], title)).conversation_id);
    const list = lena.conversationList;
    await list.load();
    assert.deepEqual(list.items.map((c) => c.conversation_id), [...ids].reverse());
    let changes = 0;
    list.on("change", () => (changes += 1));
    const before = calls.length;

    // Mo writes in the oldest: it moves to the top, one unread each.
    for (let i = 0; i < 3; i++) await mo.sendText(ids[0], `from mo ${i}`);
    await until(() => list.get(ids[0]).unread_count === 3, 10_000, "three unread");
    assert.equal(list.items[0].conversation_id, ids[0]);
    assert.equal(list.items[0].preview, "from mo 2");
    assert.equal(list.unreadTotal, 3);
    // Her own message: she read what came before it.
    await lena.sendText(ids[1], "lena here");
    assert.equal(list.items[0].conversation_id, ids[1]);
    assert.equal(list.get(ids[1]).unread_count, 0);
    // Reading zeroes the count at once.
    const reading = lena.markRead(ids[0]);
    assert.equal(list.get(ids[0]).unread_count, 0);
    await reading;
    // An edit and a deletion of the last message change the preview.
    const last = lena.conversation(ids[0]).messages.at(-1);
    await mo.edit(ids[0], last.message_id, { kind: "text", text: "from mo, edited" });
    await until(() => list.get(ids[0]).preview === "from mo, edited", 10_000, "the edited preview");
    await mo.delete(ids[0], last.message_id);
    await until(() => list.get(ids[0]).preview === null, 10_000, "the deleted preview");
    assert.ok(changes >= 6);
    assert.deepEqual(calls.slice(before), [], "no REST call for any of it");

    // A conversation the list does not hold is read once, then follows events.
    const { conversation_id: fresh } = await mo.rest.createConversation("group", ["lena"], "new one");
    await mo.sendText(fresh, "surprise");
    await mo.sendText(fresh, "again");
    await until(() => list.get(fresh)?.unread_count === 2, 10_000, "the new conversation");
    assert.equal(list.items[0].conversation_id, fresh);
    assert.deepEqual(calls.slice(before), [`GET /v1/conversations/${encodeURIComponent(fresh)}`]);

    // What the events made of it is what the server says (once the read
    // mark is past its receipt window).
    await new Promise((r) => setTimeout(r, 1_500));
    const local = list.items.map((c) => [c.conversation_id, c.last_seq, c.unread_count, c.preview]);
    await list.refresh();
    assert.deepEqual(list.items.map((c) => [c.conversation_id, c.last_seq, c.unread_count, c.preview]), local);

    // Only what lena would call unread counts (v1.3): not a system
    // message, not a thread reply, not a deleted message, nothing from a
    // user she blocks; and the server counts the same.
    const root = await mo.sendText(ids[2], "one");
    const gone = await mo.sendText(ids[2], "two");
    await until(() => list.get(ids[2]).unread_count === 2, 10_000, "two unread");
    await mo.delete(ids[2], gone.message_id);
    await until(() => list.get(ids[2]).unread_count === 1, 10_000, "a deletion takes one off");
    await mo.rest.addMembers(ids[2], ["nell"]);
    await mo.sendText(ids[2], "in the thread", { threadId: root.message_id });
    await until(() => list.get(ids[2]).last_seq === gone.seq + 2, 10_000, "the system message and the reply");
    assert.equal(list.get(ids[2]).unread_count, 1);
    await list.refresh();
    assert.equal(list.get(ids[2]).unread_count, 1, "as the server counts");
    assert.equal(list.get(ids[2]).read_seq, 0);
    // Once lena blocks mo, none of his messages count, the one unread
    // before it neither (the list is read again).
    await lena.rest.block("mo");
    await mo.sendText(ids[2], "from someone blocked");
    await until(() => list.get(ids[2]).last_seq === gone.seq + 3 && list.get(ids[2]).unread_count === 0, 10_000, "nothing of mo's");
    assert.equal((await lena.rest.conversation(ids[2])).unread_count, 0);
  } finally {
    lena.close();
    mo.close();
  }
});

test("persistence: a client over the same store shows the last state at once, then catches up from its cursors and sends what waited", async () => {
  const store = new MemoryStore();
  const nina = await client("nina", "tablet", { persist: store });
  const otto = await client("otto");
  const { conversation_id: id } = await nina.rest.createConversation("group", ["otto"], "kept");
  let kept;
  try {
    await nina.conversationList.load();
    for (let i = 0; i < 3; i++) await otto.sendText(id, `before ${i}`);
    await until(() => texts(nina, id).length === 3, 10_000, "nina's three");
    kept = await nina.sendText(id, "mine");
    nina.close();
    // While closed: a send and an edit wait (and are stored).
    void nina.sendText(id, "written while away");
    void nina.edit(id, kept.message_id, { kind: "text", text: "mine, edited" });
    await nina.flush();
  } finally {
    nina.close();
  }
  const storedSeq = nina.conversation(id).contiguousSeq;
  for (let i = 0; i < 2; i++) await otto.sendText(id, `while gone ${i}`);

  const written = [];
  const again = new SwitchboardClient({
    url: dev.url,
    token: async () => token("nina", "tablet"),
    WebSocket: recording(written),
    reconnect: { minDelayMs: 100, maxDelayMs: 1_000 },
    persist: store,
  });
  try {
    // At once, before any network: the list, the messages, what waits.
    assert.deepEqual(texts(again, id), ["before 0", "before 1", "before 2", "mine"]);
    assert.equal(again.conversationList.items[0].conversation_id, id);
    assert.equal(again.conversationList.items[0].preview, "mine");
    assert.deepEqual(again.conversation(id).outgoing.map((o) => [o.content.text, o.status]), [["written while away", "pending"]]);
    assert.equal(again.queued, 2);
    assert.equal(written.length, 0);

    const outcomes = [];
    again.on("command", (e) => outcomes.push([e.type, e.outcome]));
    again.connect();
    await until(() => texts(again, id).includes("while gone 1"), 15_000, "the catch-up");
    await until(() => again.queued === 0, 15_000, "what waited going");
    assert.ok(
      written.some((f) => f.type === "pull_backlog" && f.conversation_id === id && f.since_seq === storedSeq),
      "pulled from the stored cursor",
    );
    assert.deepEqual(outcomes, [["edit_message", "done"]]);
    await until(() => texts(otto, id).includes("written while away"), 10_000, "otto getting it");
    assert.deepEqual(texts(again, id), ["before 0", "before 1", "before 2", "mine, edited", "while gone 0", "while gone 1", "written while away"]);
    const page = await otto.rest.history(id, { limit: 20 });
    assert.equal(page.messages.filter((m) => m.content?.text === "written while away").length, 1, "stored once");
    // The list caught up too (the reconnect read it again).
    await until(() => again.conversationList.items[0].preview === "written while away", 10_000, "the list");
  } finally {
    again.close();
    otto.close();
  }
});

test("persistence keeps its bounds and refuses another user's state", async () => {
  const store = new MemoryStore();
  const uma = await client("uma", "web", { persist: store, persistLimits: { messagesPerConversation: 3, conversations: 2 } });
  try {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const { conversation_id: id } = await uma.rest.createConversation("group", ["vic"], `bound ${i}`);
      ids.push(id);
      for (let j = 0; j < 5; j++) await uma.sendText(id, `m${i}.${j}`);
    }
    await uma.flush();
    const kept = [...store.records.keys()].filter((k) => k.startsWith("c:"));
    assert.deepEqual(kept.sort(), ids.slice(1).map((id) => `c:${id}`).sort(), "the two most recently active");
    assert.deepEqual(store.records.get(`c:${ids[2]}`).messages.map((m) => m.content.text), ["m2.2", "m2.3", "m2.4"]);
  } finally {
    uma.close();
  }
  // Someone else over that store sees none of it.
  const other = new SwitchboardClient({ url: dev.url, token: token("vic", "web"), WebSocket, persist: store });
  try {
    assert.equal(other.conversations.size, 0);
    await other.flush();
    assert.equal(store.records.size, 0, "and it is emptied");
  } finally {
    other.close();
  }
});

test("a message a moderation plugin rewrote shows, on its sender's own screen, as stored", async () => {
  // The word-list plugin masks "darn" (plugins/word-list); removed at the
  // end, so that no other test meets it.
  const wasm = readFileSync(new URL("../../../plugins/dist/word-list.wasm", import.meta.url));
  const admin = { authorization: `Bearer ${adminToken()}` };
  const deployed = await fetch(`${dev.url}/v1/admin/plugins/moderation?wait=true`, {
    method: "PUT",
    headers: { ...admin, "content-type": "application/wasm" },
    body: wasm,
  });
  assert.equal(deployed.status, 201, await deployed.text());
  const alice = await client("rewritten-a");
  try {
    const { conversation_id: id } = await alice.rest.createConversation("direct", ["rewritten-b"]);
    // The gateway may take a moment to load the version it was told of.
    const shown = async () => {
      const sent = await alice.sendText(id, `well darn it ${Date.now()}`);
      return alice.conversation(id).messages.find((m) => m.message_id === sent.message_id)?.content?.text ?? "";
    };
    const deadline = Date.now() + 10_000;
    let text = await shown();
    while (text.includes("darn") && Date.now() < deadline) text = await shown();
    assert.match(text, /^well \*\*\*\* it \d+$/, "the sender's copy is the stored one");
  } finally {
    alice.close();
    await fetch(`${dev.url}/v1/admin/plugins/moderation`, { method: "DELETE", headers: admin });
  }
});

// ---- Conversation features (v1.1) ----

/** Polls `read()` until `check` holds for what it answers; fails after `ms`. */
async function eventually(read, check, ms = 10_000, what = "the answer") {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await read();
    if (check(last)) return last;
    if (Date.now() > deadline) throw new Error(`${what} did not come within ${ms} ms: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A group of `owner` with `others`, each connected and holding its state. */
async function group(owner, others, title) {
  const clients = { [owner]: await client(owner) };
  for (const user of others) clients[user] = await client(user);
  const { conversation_id: id } = await clients[owner].rest.createConversation("group", others, title);
  return { id, clients, close: () => Object.values(clients).forEach((c) => c.close()) };
}

const reactionsOf = (c, id, messageId) => c.conversation(id).get(messageId)?.reactions ?? [];

test("reactions: add and remove with their answers, idempotent, seen by the other member with `me` right, and refusals as CommandErrors", async () => {
  const { id, clients, close } = await group("rhea", ["saul"], "reactions");
  const { rhea, saul } = clients;
  try {
    const arrived = waitFor(saul, "message", (m) => m.content?.text === "react to me" && m);
    const sent = await rhea.sendText(id, "react to me");
    await arrived;
    const seenByRhea = [];
    rhea.on("reaction", (e) => seenByRhea.push(e));

    // Saul adds 👍: his promise settles on the event that answers it.
    const toRhea = waitFor(rhea, "reaction", (e) => e.user_id === "saul" && e);
    const added = await saul.react(id, sent.message_id, "👍");
    assert.deepEqual(
      [added.user_id, added.emoji, added.action, added.counts],
      ["saul", "👍", "add", { "👍": 1 }],
    );
    assert.deepEqual(reactionsOf(saul, id, sent.message_id), [{ emoji: "👍", count: 1, me: true }]);
    // Rhea is told, and her state has it as someone else's.
    assert.deepEqual((await toRhea).counts, { "👍": 1 });
    assert.deepEqual(reactionsOf(rhea, id, sent.message_id), [{ emoji: "👍", count: 1, me: false }]);

    // Rhea adds 👍 and 🎉: the counts are absolute, `me` follows whose.
    await rhea.react(id, sent.message_id, "👍");
    const party = await rhea.react(id, sent.message_id, "🎉");
    assert.deepEqual(party.counts, { "👍": 2, "🎉": 1 });
    assert.deepEqual(reactionsOf(rhea, id, sent.message_id), [
      { emoji: "👍", count: 2, me: true },
      { emoji: "🎉", count: 1, me: true },
    ]);
    await until(() => reactionsOf(saul, id, sent.message_id).length === 2, 10_000, "saul seeing rhea's reactions");
    assert.deepEqual(reactionsOf(saul, id, sent.message_id), [
      { emoji: "👍", count: 2, me: true },
      { emoji: "🎉", count: 1, me: false },
    ]);

    // Adding again is answered (idempotent), changes nothing, and tells
    // no one else.
    const before = seenByRhea.length;
    const again = await saul.react(id, sent.message_id, "👍", "add");
    assert.deepEqual(again.counts, { "👍": 2, "🎉": 1 });
    // Toggling takes it back.
    const removed = await saul.toggleReaction(id, sent.message_id, "👍");
    assert.equal(removed.action, "remove");
    assert.deepEqual(removed.counts, { "👍": 1, "🎉": 1 });
    await until(() => reactionsOf(rhea, id, sent.message_id)[0]?.count === 1, 10_000, "rhea seeing the removal");
    assert.deepEqual(reactionsOf(rhea, id, sent.message_id)[0], { emoji: "👍", count: 1, me: true });
    assert.deepEqual(
      seenByRhea.slice(before).map((e) => [e.user_id, e.action]),
      [["saul", "remove"]],
      "the repeat went to saul's devices only",
    );
    // Removing what is not there is answered too.
    assert.equal((await saul.react(id, sent.message_id, "👍", "remove")).counts["👍"], 1);

    // History has them per reader.
    const page = await saul.rest.history(id, { limit: 10 });
    const stored = page.messages.find((m) => m.message_id === sent.message_id);
    assert.deepEqual(stored.reactions, [
      { emoji: "👍", count: 1, me: false },
      { emoji: "🎉", count: 1, me: false },
    ]);

    // Refusals reject with the server's code, naming the message.
    await assert.rejects(saul.react(id, "1234567", "👍"), (e) => {
      assert.ok(e instanceof CommandError);
      assert.equal(e.request, "react");
      assert.equal(e.code, "not_found");
      assert.equal(e.frame.message_id, "1234567");
      return true;
    });
    await assert.rejects(saul.react(id, sent.message_id, "no spaces"), (e) => e.code === "invalid_frame");

    // Made without a connection, a reaction waits, then goes.
    saul.close();
    const later = saul.react(id, sent.message_id, "🚀");
    assert.equal(saul.queued, 1);
    saul.connect();
    assert.equal((await later).counts["🚀"], 1);
    await until(() => reactionsOf(rhea, id, sent.message_id).some((r) => r.emoji === "🚀"), 10_000, "rhea seeing 🚀");

    // A deleted message has none, and takes none.
    await rhea.delete(id, sent.message_id);
    await until(() => saul.conversation(id).get(sent.message_id).deleted_at, 10_000, "saul seeing the delete");
    assert.deepEqual(reactionsOf(saul, id, sent.message_id), []);
    await assert.rejects(saul.react(id, sent.message_id, "👍"), (e) => e.code === "conflict");
  } finally {
    close();
  }
});

test("reactions wait without a connection, go one at a time per message, and each settles by its own answer (stand-in)", { timeout: 10_000 }, async () => {
  // The stand-in answers each react 50 ms later: refused on message 2,
  // else with the reactor's event. It notes overlaps on one message.
  const inFlight = new Map();
  let overlapped = 0;
  const server = await standIn((frame, socket) => {
    if (frame.type !== "react") return;
    const n = inFlight.get(frame.message_id) ?? 0;
    if (n > 0) overlapped += 1;
    inFlight.set(frame.message_id, n + 1);
    setTimeout(() => {
      inFlight.set(frame.message_id, inFlight.get(frame.message_id) - 1);
      if (frame.message_id === "2") {
        server.reply(socket, { type: "error", code: "not_found", message: "no such message", request_type: "react", conversation_id: frame.conversation_id, message_id: "2" });
        return;
      }
      server.reply(socket, {
        type: "reaction",
        conversation_id: frame.conversation_id,
        message_id: frame.message_id,
        user_id: "zoe",
        emoji: frame.emoji,
        action: frame.action,
        counts: frame.action === "add" ? { [frame.emoji]: 1 } : {},
      });
    }, 50);
  });
  const store = new MemoryStore();
  const c = new SwitchboardClient({ url: server.url, token: fakeToken("zoe"), WebSocket, persist: store });
  try {
    const a = c.react("c1", "1", "👍");
    const b = c.react("c1", "1", "👍", "remove");
    // (Its refusal is looked at after the others.)
    const refused = c.react("c1", "2", "👍").then(
      () => undefined,
      (e) => e,
    );
    const other = c.react("c1", "3", "🎉");
    const thread = c.markThreadRead("c1", "1", 9);
    assert.equal(c.queued, 4);
    await c.flush();
    const kept = store.records.get("outbox").commands;
    assert.deepEqual(
      kept.map((r) => [r.type, r.message_id ?? r.thread_id, r.emoji ?? r.seq, r.action ?? ""]),
      [["react", "1", "👍", "add"], ["react", "1", "👍", "remove"], ["react", "2", "👍", "add"], ["react", "3", "🎉", "add"], ["ack_read", "1", 9, ""]],
      "kept in the store while they wait",
    );
    c.connect();
    assert.equal((await a).action, "add");
    assert.equal((await b).action, "remove");
    const error = await refused;
    assert.ok(error instanceof CommandError && error.code === "not_found" && error.request === "react", String(error));
    assert.equal((await other).emoji, "🎉");
    await thread;
    assert.equal(overlapped, 0, "never two reactions in flight on one message");
    assert.deepEqual(
      server.frames.filter((f) => f.type === "ack_read"),
      [{ type: "ack_read", conversation_id: "c1", seq: 9, thread_id: "1" }],
    );
    assert.equal(c.queued, 0);
  } finally {
    c.close();
    server.close();
  }
});

test("custom messages and custom fields (v1.3): sent, received and edited as typed, kept in the outbox and the state", async () => {
  const { id, clients, close } = await group("kira", ["liam"], "custom");
  const { kira, liam } = clients;
  try {
    await liam.conversationList.load();
    const order = { kind: "custom", type: "shop.order", data: { order: 7 }, fallback_text: "Order #7" };
    const seen = waitFor(liam, "message", (m) => m.client_msg_id === "order-7" && m);
    const sent = await kira.send(id, order, { clientMsgId: "order-7", custom: { priority: "high" } });
    const got = await seen;
    assert.deepEqual(got.content, order);
    assert.deepEqual(got.custom, { priority: "high" });
    assert.deepEqual(kira.conversation(id).get(sent.message_id).custom, { priority: "high" });
    await until(() => liam.conversationList.get(id)?.preview === "Order #7", 10_000, "the preview");

    // An edit keeps the fields unless it names them; {} removes them.
    const edited = await kira.edit(id, sent.message_id, { ...order, fallback_text: "Order #7 (paid)" });
    assert.deepEqual(edited.custom, { priority: "high" });
    const cleared = await kira.edit(id, sent.message_id, order, { custom: {} });
    assert.equal(cleared.custom, undefined);
    await until(() => liam.conversation(id).get(sent.message_id)?.custom === undefined, 10_000, "liam's copy");

    // Past 4096 bytes: refused for good.
    await assert.rejects(kira.sendText(id, "too much", { custom: { k: "x".repeat(4100) } }), (e) => e instanceof SendError && e.code === "too_large");

    // The conversation's own fields: the owner sets them, the other
    // member's list follows the `conversation_updated` message.
    const updated = await kira.rest.updateConversation(id, { custom: { topic: "orders", color: 3 } });
    assert.deepEqual(updated.custom, { topic: "orders", color: 3 });
    await until(() => liam.conversationList.get(id)?.custom?.topic === "orders", 10_000, "liam's list item");
    await kira.rest.updateConversation(id, { custom: { color: null } });
    await until(() => liam.conversationList.get(id)?.custom?.color === undefined, 10_000, "a key removed");
    assert.deepEqual(liam.conversationList.get(id).custom, { topic: "orders" });
    await assert.rejects(liam.rest.updateConversation(id, { custom: { topic: "mine" } }), (e) => e.status === 403);
  } finally {
    close();
  }
});

const pollOf = (c, id, messageId) => c.conversation(id).get(messageId)?.poll_results;

test("polls (v1.3): sent and previewed, votes over the socket and REST answered by poll_updated, `me` kept per member, history per reader, closed by hand and by time, refusals as CommandErrors", async () => {
  const { id, clients, close } = await group("polly", ["quill", "rowan"], "polls");
  const { polly, quill, rowan } = clients;
  try {
    await quill.conversationList.load();
    const arrived = waitFor(quill, "message", (m) => m.content?.kind === "poll" && m);
    const sent = await polly.sendPoll(id, { question: "Lunch?", options: ["Pizza", "Sushi", "Tacos"] });
    const poll = sent.message_id;
    const got = await arrived;
    assert.deepEqual(got.content, {
      kind: "poll",
      question: "Lunch?",
      options: [{ id: "o1", text: "Pizza" }, { id: "o2", text: "Sushi" }, { id: "o3", text: "Tacos" }],
      multiple: false,
      anonymous: false,
    });
    const fresh = { counts: { o1: 0, o2: 0, o3: 0 }, closed: false, voters: { o1: [], o2: [], o3: [] }, me: [] };
    assert.deepEqual(got.poll_results, fresh);
    assert.deepEqual(pollOf(polly, id, poll), fresh, "the sender's copy, made from the ack, has fresh results");
    await until(() => quill.conversationList.get(id)?.preview === "[poll] Lunch?", 10_000, "the preview");

    // Quill votes: his promise settles on the answer, his `me` is his
    // choice; Polly's state takes the counts, with no `me`.
    const seenByPolly = [];
    polly.on("poll_updated", (e) => seenByPolly.push(e));
    const toPolly = waitFor(polly, "poll_updated", (e) => e.counts.o2 === 1 && e);
    const answer = await quill.vote(id, poll, ["o2"]);
    assert.deepEqual([answer.message_id, answer.counts, answer.closed, answer.voters], [poll, { o1: 0, o2: 1, o3: 0 }, false, { o1: [], o2: ["quill"], o3: [] }]);
    assert.deepEqual(quill.conversation(id).votedFor(poll), ["o2"]);
    await toPolly;
    assert.deepEqual(pollOf(polly, id, poll), { counts: { o1: 0, o2: 1, o3: 0 }, closed: false, voters: { o1: [], o2: ["quill"], o3: [] }, me: [] });

    // A single-choice poll: toggling another option replaces the vote.
    const moved = await quill.toggleVote(id, poll, "o1");
    assert.deepEqual(moved.counts, { o1: 1, o2: 0, o3: 0 });
    assert.deepEqual(quill.conversation(id).votedFor(poll), ["o1"]);
    // Polly votes over REST: her `me` follows the 204, her counts the event.
    await polly.rest.vote(id, poll, ["o1"]);
    await until(() => pollOf(polly, id, poll)?.counts.o1 === 2, 10_000, "polly's own vote counted");
    assert.deepEqual(polly.conversation(id).votedFor(poll), ["o1"]);
    assert.deepEqual(pollOf(quill, id, poll).voters.o1, ["polly", "quill"], "the latest voter first");
    assert.deepEqual(quill.conversation(id).votedFor(poll), ["o1"], "another's vote leaves quill's own");

    // The same vote again is answered, to the voter alone.
    const before = seenByPolly.length;
    assert.deepEqual((await quill.vote(id, poll, ["o1"])).counts, { o1: 2, o2: 0, o3: 0 });
    const retracted = await rowan.vote(id, poll, ["o3"]).then(() => rowan.vote(id, poll, []));
    assert.deepEqual(retracted.counts, { o1: 2, o2: 0, o3: 0 });
    assert.deepEqual(rowan.conversation(id).votedFor(poll), []);
    await until(() => seenByPolly.length >= before + 2, 10_000, "polly hearing rowan's vote and retraction");
    assert.deepEqual(seenByPolly.slice(before).map((e) => e.counts.o3), [1, 0], "quill's repeat went to quill alone");

    // History has `me` per reader.
    for (const [c, me] of [[quill, ["o1"]], [polly, ["o1"]], [rowan, []]]) {
      const page = await c.rest.history(id, { limit: 10 });
      const stored = page.messages.find((m) => m.message_id === poll);
      assert.deepEqual(stored.poll_results.me, me);
      assert.deepEqual(stored.poll_results.counts, { o1: 2, o2: 0, o3: 0 });
    }

    // Refusals reject with the server's code, naming the poll.
    await assert.rejects(quill.vote(id, poll, ["o1", "o2"]), (e) => {
      assert.ok(e instanceof CommandError);
      assert.equal(e.request, "vote");
      assert.equal(e.code, "invalid_request");
      assert.equal(e.frame.message_id, poll);
      return true;
    });
    await assert.rejects(quill.vote(id, poll, ["nope"]), (e) => e.code === "invalid_request");
    await assert.rejects(quill.vote(id, "1234567", ["o1"]), (e) => e.code === "not_found");
    const text = await polly.sendText(id, "not a poll");
    await assert.rejects(quill.vote(id, text.message_id, ["o1"]), (e) => e.code === "invalid_request");
    await assert.rejects(polly.edit(id, poll, { kind: "text", text: "Dinner?" }), (e) => e.request === "edit_message" && e.code === "conflict");
    assert.deepEqual(quill.conversation(id).votedFor(poll), ["o1"], "a refusal changes no choice");

    // Multiple choice, anonymous, options with their own ids.
    const days = (
      await polly.sendPoll(id, {
        question: "Which days?",
        options: [{ id: "mon", text: "Monday" }, { id: "tue", text: "Tuesday" }, { id: "wed", text: "Wednesday" }],
        multiple: true,
        anonymous: true,
      })
    ).message_id;
    await until(() => quill.conversation(id).get(days), 10_000, "quill receiving the second poll");
    await quill.toggleVote(id, days, "wed");
    const both = await quill.toggleVote(id, days, "mon");
    assert.deepEqual(both.counts, { mon: 1, tue: 0, wed: 1 });
    assert.equal(both.voters, undefined, "an anonymous poll names nobody");
    assert.deepEqual(quill.conversation(id).votedFor(days), ["mon", "wed"], "in the poll's order");
    assert.deepEqual((await quill.toggleVote(id, days, "wed")).counts, { mon: 1, tue: 0, wed: 0 });
    assert.deepEqual(quill.conversation(id).votedFor(days), ["mon"]);
    await until(() => pollOf(polly, id, days)?.counts.mon === 1 && pollOf(polly, id, days)?.counts.wed === 0, 10_000, "polly's counts");
    assert.deepEqual(pollOf(polly, id, days).me, []);

    // Made without a connection, a vote waits, then goes.
    quill.close();
    const later = quill.vote(id, days, ["tue"]);
    assert.equal(quill.queued, 1);
    quill.connect();
    assert.deepEqual((await later).counts, { mon: 0, tue: 1, wed: 0 });
    assert.deepEqual(quill.conversation(id).votedFor(days), ["tue"]);

    // Closing: not by a plain member; by the author, then every member
    // reads it closed and votes are refused.
    await assert.rejects(quill.closePoll(id, poll), (e) => e instanceof ApiError && e.status === 403);
    const closed = waitFor(quill, "poll_updated", (e) => e.message_id === poll && e.closed && e);
    await polly.closePoll(id, poll);
    assert.deepEqual((await closed).counts, { o1: 2, o2: 0, o3: 0 });
    assert.equal(pollOf(quill, id, poll).closed, true);
    assert.deepEqual(quill.conversation(id).votedFor(poll), ["o1"], "closing keeps the choice");
    await polly.closePoll(id, poll); // closing again changes nothing
    await assert.rejects(quill.vote(id, poll, ["o2"]), (e) => e.code === "conflict");
    await assert.rejects(quill.rest.vote(id, poll, ["o2"]), (e) => e instanceof ApiError && e.status === 409);

    // Closed by time: past its closes_at, refused and read as closed.
    const closesAt = Date.now() + 3_000;
    const soon = (await polly.sendPoll(id, { question: "Quick one?", options: ["Yes", "No"], closesAt: new Date(closesAt) })).message_id;
    await until(() => quill.conversation(id).get(soon), 10_000, "quill receiving the quick poll");
    assert.equal(Date.parse(quill.conversation(id).get(soon).content.closes_at), closesAt);
    await quill.vote(id, soon, ["o1"]);
    await new Promise((r) => setTimeout(r, closesAt - Date.now() + 200));
    await assert.rejects(quill.vote(id, soon, ["o2"]), (e) => e.code === "conflict");
    const page = await quill.rest.history(id, { limit: 10 });
    const stored = page.messages.find((m) => m.message_id === soon);
    assert.deepEqual([stored.poll_results.closed, stored.poll_results.me], [true, ["o1"]]);
    quill.conversation(id).update(stored);
    assert.equal(pollOf(quill, id, soon).closed, true);

    // A deleted poll has no results and takes no vote.
    await polly.delete(id, days);
    await until(() => quill.conversation(id).get(days)?.deleted_at, 10_000, "quill seeing the delete");
    assert.equal(pollOf(quill, id, days), undefined);
    await assert.rejects(quill.vote(id, days, ["mon"]), (e) => e.code === "conflict");
  } finally {
    close();
  }
});

test("votes wait without a connection, go one at a time per poll, kept in the store, and settle by the poll_updated that can answer them (stand-in)", { timeout: 10_000 }, async () => {
  // The stand-in answers each vote on poll 1 with another member's
  // update first (xavi voted for `a`; zoe's choice as it was before: it
  // cannot be the answer), then 50 ms later with zoe's own; a vote on
  // poll 2 is refused.
  const inFlight = new Map();
  let overlapped = 0;
  let zoe = [];
  const server = await standIn((frame, socket) => {
    if (frame.type !== "vote") return;
    const n = inFlight.get(frame.message_id) ?? 0;
    if (n > 0) overlapped += 1;
    inFlight.set(frame.message_id, n + 1);
    const update = (choice) => {
      const voters = { a: [...(choice.includes("a") ? ["zoe"] : []), "xavi"], b: choice.includes("b") ? ["zoe"] : [] };
      const counts = { a: voters.a.length, b: voters.b.length };
      return { type: "poll_updated", conversation_id: frame.conversation_id, message_id: frame.message_id, counts, closed: false, voters };
    };
    if (frame.message_id === "1") server.reply(socket, update(zoe));
    setTimeout(() => {
      inFlight.set(frame.message_id, inFlight.get(frame.message_id) - 1);
      if (frame.message_id === "2") {
        server.reply(socket, { type: "error", code: "conflict", message: "the poll is closed", request_type: "vote", conversation_id: frame.conversation_id, message_id: "2" });
        return;
      }
      zoe = frame.option_ids;
      server.reply(socket, update(zoe));
    }, 50);
  });
  const store = new MemoryStore();
  const c = new SwitchboardClient({ url: server.url, token: fakeToken("zoe"), WebSocket, persist: store });
  try {
    const content = { kind: "poll", question: "A or B?", options: [{ id: "a", text: "A" }, { id: "b", text: "B" }], multiple: true, anonymous: false };
    c.conversation("c1").add(message({ message_id: "1", conversation_id: "c1", seq: 1, content, poll_results: { counts: { a: 0, b: 0 }, closed: false, voters: { a: [], b: [] }, me: [] } }));
    const first = c.vote("c1", "1", ["b", "a"]);
    const second = c.vote("c1", "1", ["b"]);
    const refused = c.vote("c1", "2", ["a"]).then(
      () => undefined,
      (e) => e,
    );
    assert.equal(c.queued, 3);
    await c.flush();
    assert.deepEqual(
      store.records.get("outbox").commands.map((r) => [r.type, r.message_id, r.option_ids]),
      [["vote", "1", ["b", "a"]], ["vote", "1", ["b"]], ["vote", "2", ["a"]]],
      "kept in the store while they wait",
    );
    const settled = [];
    c.on("command", (e) => settled.push([e.type, e.outcome, e.poll?.counts ?? e.error?.code]));
    c.connect();
    assert.deepEqual((await first).voters, { a: ["zoe", "xavi"], b: ["zoe"] }, "the other member's update is not the answer");
    assert.deepEqual((await second).counts, { a: 1, b: 1 });
    assert.deepEqual(c.conversation("c1").votedFor("1"), ["b"]);
    assert.deepEqual(c.conversation("c1").get("1").poll_results.counts, { a: 1, b: 1 });
    const error = await refused;
    assert.ok(error instanceof CommandError && error.code === "conflict" && error.request === "vote", String(error));
    assert.equal(overlapped, 0, "never two votes in flight on one poll");
    assert.deepEqual(
      server.frames.filter((f) => f.type === "vote").map((f) => [f.message_id, f.option_ids]),
      [["1", ["b", "a"]], ["2", ["a"]], ["1", ["b"]]],
    );
    assert.deepEqual(settled.filter(([, outcome]) => outcome === "done"), [["vote", "done", { a: 2, b: 1 }], ["vote", "done", { a: 1, b: 1 }]]);
    assert.deepEqual(settled.filter(([, outcome]) => outcome === "failed"), [["vote", "failed", "conflict"]]);
    assert.equal(c.queued, 0);
  } finally {
    c.close();
    server.close();
  }
});

// ---- Link previews (v1.3) ----

const previewsOf = (c, id, messageId) => c.conversation(id).get(messageId)?.previews ?? [];
/** Waits a moment (for what must not come). */
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

test("link previews (v1.3): a link's card (title, description, site, image as media) comes as message_updated to every member and the sender, no edit; previews: false on a send, a REST send and a scheduled send gives none; the admin switch round-trips", async () => {
  const thumb = png(16, [232, 115, 26]);
  const page = await linkPage({
    title: "Harbour lights",
    description: "A walk along the old harbour at dusk, with <b>tags</b> that stay text.",
    siteName: "Local Gazette",
    image: thumb,
  });
  const { id, clients, close } = await group("ines", ["jonas"], "previews");
  const { ines, jonas } = clients;
  const admin = new SwitchboardClient({ url: dev.url, token: adminToken("preview-admin"), WebSocket });
  try {
    const edits = [];
    jonas.on("updated", (m) => edits.push(m));
    const arrived = waitFor(jonas, "message", (m) => m.content?.text?.startsWith("Tonight:") && m);
    const card = waitFor(jonas, "updated", (m) => m.previews?.length && m);
    const sent = await ines.sendText(id, `Tonight: ${page.url}, see you there.`);
    const first = await arrived;
    assert.equal(first.previews?.length ?? 0, 0, "the message comes first, without its card");
    const updated = await card;
    assert.equal(updated.message_id, sent.message_id);
    const [preview] = updated.previews;
    assert.deepEqual(
      { ...preview, image: { ...preview.image, blob_ref: typeof preview.image?.blob_ref } },
      {
        url: page.url,
        title: "Harbour lights",
        description: "A walk along the old harbour at dusk, with <b>tags</b> that stay text.",
        site_name: "Local Gazette",
        image: { blob_ref: "string", mime: "image/png", size: thumb.length },
      },
    );
    // Not an edit: the message is as it was, its card added.
    assert.equal(updated.edited_at, null);
    assert.deepEqual(updated.content, { kind: "text", text: `Tonight: ${page.url}, see you there.` });
    assert.deepEqual(previewsOf(jonas, id, sent.message_id), updated.previews);
    assert.equal(jonas.conversation(id).get(sent.message_id).edited_at, null);
    assert.ok(edits.every((m) => m.edited_at == null));
    // The sender's own copy (made from the ack) takes it too.
    await until(() => previewsOf(ines, id, sent.message_id).length === 1, 10_000, "the sender's card");
    assert.equal(ines.conversation(id).get(sent.message_id).edited_at, null);
    assert.deepEqual(previewsOf(ines, id, sent.message_id), updated.previews);
    // The image is media of the conversation.
    const bytes = Buffer.from(await (await jonas.rest.download(preview.image.blob_ref)).arrayBuffer());
    assert.deepEqual(bytes, thumb);
    // History has it (a device away reads it there).
    const history = await jonas.rest.history(id);
    assert.deepEqual(history.messages.find((m) => m.message_id === sent.message_id)?.previews, updated.previews);

    // previews: false, on the socket, over REST and scheduled: no card;
    // the same link sent after them without it gets its (cached) card.
    const quiet = await ines.sendText(id, `No card please: ${page.url}`, { previews: false });
    const posted = await ines.rest.postMessage(id, {
      client_msg_id: `quiet-rest-${Date.now()}`,
      content: { kind: "text", text: `No card over REST: ${page.url}` },
      previews: false,
    });
    const sendAt = new Date(Date.now() + 2000);
    const laterQuiet = waitFor(jonas, "message", (m) => m.content?.text?.startsWith("No card later:") && m);
    const laterLoud = waitFor(jonas, "message", (m) => m.content?.text?.startsWith("A card later:") && m);
    await ines.schedule(id, { kind: "text", text: `No card later: ${page.url}` }, sendAt, { previews: false });
    await ines.schedule(id, { kind: "text", text: `A card later: ${page.url}` }, sendAt);
    const [scheduledQuiet, scheduledLoud] = await Promise.all([laterQuiet, laterLoud]);
    const loud = await ines.sendText(id, `Again: ${page.url}`);
    await until(() => previewsOf(jonas, id, loud.message_id).length === 1, 10_000, "the control's card");
    await until(() => previewsOf(jonas, id, scheduledLoud.message_id).length === 1, 10_000, "the scheduled control's card");
    await pause(1000);
    const quietIds = [quiet.message_id, posted.message_id, scheduledQuiet.message_id];
    for (const messageId of quietIds) {
      assert.deepEqual(previewsOf(jonas, id, messageId), [], "no card for a send with previews: false");
      assert.deepEqual(previewsOf(ines, id, messageId), []);
    }
    const stored = (await jonas.rest.history(id)).messages.filter((m) => quietIds.includes(m.message_id));
    assert.equal(stored.length, 3);
    assert.ok(stored.every((m) => !m.previews?.length));

    // The tenant's switch (tenant admins only).
    assert.deepEqual(await admin.rest.previewSettings(), { enabled: true });
    assert.deepEqual(await admin.rest.setPreviewSettings(false), { enabled: false });
    assert.deepEqual(await admin.rest.previewSettings(), { enabled: false });
    assert.deepEqual(await admin.rest.setPreviewSettings(true), { enabled: true });
    assert.deepEqual(await admin.rest.previewSettings(), { enabled: true });
    await assert.rejects(jonas.rest.previewSettings(), (e) => e instanceof ApiError && e.status === 403);
    await assert.rejects(jonas.rest.setPreviewSettings(false), (e) => e instanceof ApiError && e.status === 403);
  } finally {
    admin.close();
    close();
    await page.close();
  }
});

test("a message_updated that only brings link previews is no edit's answer, and the sender's copy from its ack takes them; previews: false rides the frame, the store and resendAsNew (stand-in)", { timeout: 10_000 }, async () => {
  // The stand-in acks each send (and refuses "refuse me" for good); an
  // edit is answered by the message's cards first (not edited), then,
  // 100 ms later, by the edit itself.
  const card = { url: "https://example.com/a", title: "A page", image: { blob_ref: "b1", mime: "image/png", size: 3 } };
  const original = { kind: "text", text: "look https://example.com/a" };
  let seq = 0;
  const gateway = await standIn((frame, socket) => {
    if (frame.type === "send_message") {
      if (frame.content.text === "refuse me") {
        gateway.reply(socket, { type: "error", code: "invalid_request", message: "no", request_type: "send_message", client_msg_id: frame.client_msg_id, conversation_id: frame.conversation_id });
        return;
      }
      seq += 1;
      gateway.reply(socket, { type: "ack", client_msg_id: frame.client_msg_id, conversation_id: frame.conversation_id, message_id: String(seq), seq, status: "sent" });
    }
    if (frame.type === "edit_message") {
      // The server's own created_at, before this device's clock.
      const stored = message({ conversation_id: "c1", message_id: "1", seq: 1, sender_id: "zed", content: original, previews: [card] });
      gateway.reply(socket, { type: "message_updated", message: stored });
      setTimeout(() => {
        gateway.reply(socket, { type: "message_updated", message: { ...stored, content: frame.content, edited_at: "2026-01-01T00:00:05.000Z" } });
      }, 100);
    }
  });
  const store = new MemoryStore();
  const c = new SwitchboardClient({ url: gateway.url, token: fakeToken("zed"), WebSocket, persist: store });
  let again;
  try {
    const open = waitFor(c, "status", (s) => s === "open");
    c.connect();
    await open;
    await c.send("c1", original);
    assert.equal("previews" in gateway.frames.find((f) => f.type === "send_message"), false, "left out by default");
    assert.equal(c.conversation("c1").get("1").previews, undefined);

    const edits = [];
    c.on("command", (e) => edits.push(e));
    const edited = await c.edit("c1", "1", { kind: "text", text: "look https://example.com/a (edited)" });
    assert.equal(edited.edited_at, "2026-01-01T00:00:05.000Z", "settled by the edit, not by the cards");
    assert.equal(edited.content.text, "look https://example.com/a (edited)");
    assert.equal(edits.length, 1);
    const kept = c.conversation("c1").get("1");
    assert.deepEqual(kept.previews, [card]);
    assert.equal(kept.content.text, "look https://example.com/a (edited)");

    // A refused send with previews: false: resendAsNew keeps it.
    await assert.rejects(c.sendText("c1", "refuse me", { previews: false }), (e) => e instanceof SendError);
    const [failed] = c.conversation("c1").outgoing;
    assert.equal(failed.previews, false);
    await assert.rejects(c.resendAsNew(failed), (e) => e instanceof SendError);
    const refused = gateway.frames.filter((f) => f.type === "send_message" && f.content.text === "refuse me");
    assert.equal(refused.length, 2);
    assert.ok(refused.every((f) => f.previews === false));
    c.conversation("c1").outgoing.forEach((o) => o.discard());

    // A send waiting offline keeps it in the store, and writes it when
    // it goes.
    c.close();
    void c.sendText("c1", "quiet https://example.com/b", { previews: false }).catch(() => {});
    await c.flush();
    again = new SwitchboardClient({ url: gateway.url, token: fakeToken("zed"), WebSocket, persist: store });
    await again.ready;
    const [restored] = again.conversation("c1").outgoing;
    assert.equal(restored?.previews, false, "restored from the store");
    again.connect();
    await until(() => gateway.frames.some((f) => f.type === "send_message" && f.content.text.startsWith("quiet")), 5_000, "the waiting send written");
    assert.equal(gateway.frames.find((f) => f.type === "send_message" && f.content.text.startsWith("quiet")).previews, false);
  } finally {
    c.close();
    again?.close();
    gateway.close();
  }
});

test("public channels and invites (v1.3): found in the directory, joined into the list, settings followed, invites made, accepted and revoked", async () => {
  const { id, clients, close } = await group("vera", ["walt"], "SDK channel");
  const { vera, walt } = clients;
  const xena = await client("xena");
  try {
    await walt.conversationList.load();
    await xena.conversationList.load();
    const opened = await vera.rest.updateConversation(id, { visibility: "public", topic: "sdk things", posting: "admins" });
    assert.equal(opened.visibility, "public");
    // The other member's list follows the settings.
    await until(() => walt.conversationList.get(id)?.posting === "admins", 10_000, "walt's list item");
    assert.equal(walt.conversationList.get(id).topic, "sdk things");

    // Found by its topic; joined: the list takes it.
    const page = await xena.rest.channels({ q: "SDK THINGS" });
    assert.deepEqual(page.channels.map((c) => c.conversation_id), [id]);
    assert.equal(page.channels[0].member_count, 2);
    const joined = await xena.rest.join(id);
    assert.equal(joined.conversation_id, id);
    await until(() => xena.conversationList.get(id), 10_000, "xena's list item");
    // A plain member does not post here; a thread reply goes.
    const root = await vera.sendText(id, "announcement");
    await assert.rejects(xena.sendText(id, "me too"), (e) => e instanceof SendError && e.code === "forbidden");
    await xena.sendText(id, "nice", { threadId: root.message_id });

    // Invites: made, previewed, accepted once, revoked.
    const invite = await vera.rest.createInvite(id, { max_uses: 1, expires_at: new Date(Date.now() + 3_600_000) });
    assert.equal(invite.code.length, 12);
    const preview = await walt.rest.invite(invite.code);
    assert.equal(preview.channel.title, "SDK channel");
    await vera.rest.revokeInvite(id, invite.code);
    await assert.rejects(walt.rest.invite(invite.code), (e) => e.status === 404);
    assert.deepEqual((await vera.rest.invites(id)).invites, []);
  } finally {
    close();
    xena.close();
  }
});

test("replies and threads: a quoted reply, thread replies kept out of the timeline and counted on their root, thread history, the threads list and its read mark", async () => {
  const { id, clients, close } = await group("tara", ["umar"], "threads");
  const { tara, umar } = clients;
  try {
    await tara.conversationList.load();
    const root = await tara.sendText(id, "what do we ship?");
    await until(() => umar.conversation(id).get(root.message_id), 10_000, "umar's copy of the root");

    // A reply in the main timeline quotes the root.
    const quoted = waitFor(tara, "message", (m) => m.reply_to && m);
    const reply = await umar.sendText(id, "the SDK", { replyTo: root.message_id });
    const seen = await quoted;
    assert.equal(seen.reply_to, root.message_id);
    assert.equal(seen.thread_id, null);

    // Two replies in the thread: they arrive like any message (with
    // their own seq), but out of the main timeline, and the root counts
    // them.
    const inThread = [];
    for (const text of ["first in thread", "second in thread"]) {
      inThread.push(await umar.sendText(id, text, { threadId: root.message_id }));
    }
    const state = tara.conversation(id);
    await until(() => state.thread(root.message_id).length === 2, 10_000, "tara's copies of the thread");
    assert.deepEqual(state.thread(root.message_id).map((m) => m.content.text), ["first in thread", "second in thread"]);
    assert.deepEqual(state.timeline.map((m) => m.content.text), ["what do we ship?", "the SDK"]);
    assert.equal(state.messages.length, 4, "`messages` holds every seq");
    const summary = state.get(root.message_id).thread;
    assert.equal(summary.reply_count, 2);
    assert.deepEqual(summary.participants, ["umar"]);
    // The replier's own copy counts them too (from the acks).
    assert.equal(umar.conversation(id).get(root.message_id).thread.reply_count, 2);
    assert.deepEqual(umar.conversation(id).thread(root.message_id).map((m) => m.seq), inThread.map((s) => s.seq));

    // The thread's history: its replies and its root, newest first.
    const history = await tara.rest.threadHistory(id, root.message_id);
    assert.deepEqual(
      history.messages.map((m) => m.message_id),
      [...inThread.map((s) => s.message_id).reverse(), root.message_id],
    );
    assert.equal(history.messages.at(-1).thread.reply_count, 2);
    // And the state takes it as it is (no reply counted twice).
    for (const m of history.messages) state.update(m);
    assert.equal(state.get(root.message_id).thread.reply_count, 2);

    // The threads list: tara started it and has not read it; umar's own
    // replies read it up to themselves.
    const threadOf = (list) => list.threads.find((t) => t.root.message_id === root.message_id);
    const taras = threadOf(await tara.rest.threads(id));
    assert.deepEqual([taras.reply_count, taras.unread_count], [2, 2]);
    assert.equal(threadOf(await umar.rest.threads(id)).unread_count, 0);
    // Reading the thread (ack_read with its thread_id) zeroes it, and
    // leaves the conversation's own read mark where it was.
    // The conversation counts umar's quoted reply; its thread replies
    // count in the thread only.
    const unreadBefore = tara.conversationList.get(id).unread_count;
    assert.equal(unreadBefore, 1);
    await tara.markThreadRead(id, root.message_id);
    await eventually(() => tara.rest.threads(id), (list) => threadOf(list).unread_count === 0, 10_000, "the thread read");
    assert.equal(tara.conversationList.get(id).unread_count, unreadBefore);
    const listed = await tara.rest.conversationPage();
    assert.equal(listed.conversations.find((c) => c.conversation_id === id).unread_count, unreadBefore);

    // A reply in a thread cannot root one; a reply names a live message.
    await assert.rejects(umar.sendText(id, "nested", { threadId: inThread[0].message_id }), (e) => e instanceof SendError && e.code === "invalid_request");
    await assert.rejects(umar.sendText(id, "to nothing", { replyTo: "1234567" }), (e) => e instanceof SendError && e.code === "invalid_request");
    assert.ok(reply.seq < inThread[0].seq);
  } finally {
    close();
  }
});

test("mentions: carried by the message, counted in the list by events (mention_count), read away, mention_all for owners and admins only", async () => {
  const { id, clients, close } = await group("vera", ["wade", "xavi"], "mentions");
  const { vera, wade, xavi } = clients;
  try {
    await wade.conversationList.load();
    const list = wade.conversationList;
    assert.equal(list.get(id).mention_count, 0);

    const got = waitFor(wade, "message", (m) => m.content?.text === "@wade look" && m);
    await vera.sendText(id, "@wade look", { mentions: ["wade"] });
    const m = await got;
    assert.deepEqual(m.mentions, ["wade"]);
    assert.equal(mentionsUser(m, "wade"), true);
    assert.equal(mentionsUser(m, "xavi"), false);
    await until(() => list.get(id).mention_count === 1, 10_000, "one mention");
    // Everyone, from the owner; and a message mentioning someone else.
    await vera.sendText(id, "@all standup", { mentionAll: true });
    await vera.sendText(id, "@xavi only", { mentions: ["xavi"] });
    await until(() => list.get(id).last_seq === m.seq + 2, 10_000, "the other two");
    assert.equal(list.get(id).mention_count, 2);
    assert.equal(list.mentionTotal, 2);
    // What events made of it is what the server counts.
    const page = await wade.rest.conversationPage();
    assert.equal(page.conversations.find((c) => c.conversation_id === id).mention_count, 2);

    // A member may not mention all; mentions name members.
    await assert.rejects(xavi.sendText(id, "@all hey", { mentionAll: true }), (e) => e instanceof SendError && e.code === "forbidden");
    await assert.rejects(xavi.sendText(id, "@nobody", { mentions: ["nobody"] }), (e) => e instanceof SendError && e.code === "invalid_request");

    // Reading takes them away at once, and on the server.
    const reading = wade.markRead(id);
    assert.equal(list.get(id).mention_count, 0);
    await reading;
    await eventually(
      () => wade.rest.conversationPage(),
      (p) => p.conversations.find((c) => c.conversation_id === id).mention_count === 0,
      10_000,
      "the server's count",
    );
  } finally {
    close();
  }
});

test("notification settings: get and put, the list's notifications and muted, settings_changed on the user's other device, unmuted when the time passes", async () => {
  const yara = await client("yara", "laptop");
  const phone = await client("yara", "phone");
  try {
    const { conversation_id: id } = await yara.rest.createConversation("group", ["zack"], "settings");
    await phone.conversationList.load();
    assert.deepEqual(await yara.rest.settings(id), { notifications: "all", muted_until: null });
    const item = () => phone.conversationList.get(id);
    assert.deepEqual([item().notifications, item().muted], ["all", false]);

    const until1h = new Date(Date.now() + 3_600_000).toISOString();
    const told = waitFor(phone, "settings_changed", (e) => e.conversation_id === id && e);
    const set = await yara.rest.setSettings(id, { notifications: "mentions", muted_until: until1h });
    assert.equal(set.notifications, "mentions");
    assert.equal(Date.parse(set.muted_until), Date.parse(until1h));
    const event = await told;
    assert.equal(event.notifications, "mentions");
    assert.equal(Date.parse(event.muted_until), Date.parse(until1h));
    // The other device's list follows the event, with no REST call.
    assert.deepEqual([item().notifications, item().muted], ["mentions", true]);
    assert.equal((await phone.rest.settings(id)).notifications, "mentions");

    // Muted for a moment: the list unmutes by itself when it passes.
    const soon = new Date(Date.now() + 1_500).toISOString();
    const second = waitFor(phone, "settings_changed", (e) => e.notifications === "none" && e);
    await yara.rest.setSettings(id, { notifications: "none", muted_until: soon });
    await second;
    assert.deepEqual([item().notifications, item().muted], ["none", true]);
    await until(() => item().muted === false, 5_000, "the mute running out");
    const fresh = (await phone.rest.conversationPage()).conversations.find((c) => c.conversation_id === id);
    assert.deepEqual([fresh.notifications, fresh.muted], ["none", false]);

    // A bad level is refused; settings are the caller's own.
    await assert.rejects(yara.rest.setSettings(id, { notifications: "loud" }), (e) => e instanceof ApiError && e.status === 400);
    const zack = await client("zack");
    try {
      assert.equal((await zack.rest.settings(id)).notifications, "all");
    } finally {
      zack.close();
    }
  } finally {
    yara.close();
    phone.close();
  }
});

test("pins: an owner pins and unpins, members get pins_changed and the state's pins follow, a member may not pin", async () => {
  const { id, clients, close } = await group("abel", ["bria"], "pins");
  const { abel, bria } = clients;
  try {
    const sent = await abel.sendText(id, "the plan");
    await until(() => bria.conversation(id).get(sent.message_id), 10_000, "bria's copy");
    const pinned = waitFor(bria, "pins_changed", (e) => e.action === "pin" && e);
    await abel.rest.pin(id, sent.message_id);
    assert.deepEqual(await pinned, { conversation_id: id, message_id: sent.message_id, action: "pin", by: "abel" });
    assert.deepEqual(bria.conversation(id).pins.map((p) => [p.message_id, p.by]), [[sent.message_id, "abel"]]);
    assert.equal(bria.conversation(id).isPinned(sent.message_id), true);
    assert.equal(abel.conversation(id).isPinned(sent.message_id), true);
    // The pin is a system message too (for devices that were away).
    await until(() => bria.conversation(id).messages.some((m) => m.content?.event === "message_pinned"), 10_000, "the system message");

    const listed = await bria.rest.pins(id);
    assert.deepEqual(listed.pins.map((p) => [p.message_id, p.by, p.message?.content?.text]), [[sent.message_id, "abel", "the plan"]]);

    // A plain member may not.
    await assert.rejects(bria.rest.pin(id, sent.message_id), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");

    const unpinned = waitFor(bria, "pins_changed", (e) => e.action === "unpin" && e);
    await abel.rest.unpin(id, sent.message_id);
    await unpinned;
    assert.deepEqual(bria.conversation(id).pins, []);
    assert.deepEqual((await bria.rest.pins(id)).pins, []);
    // History, read newest first, does not pin it back.
    const page = await bria.rest.history(id, { limit: 10 });
    for (const m of page.messages) bria.conversation(id).update(m);
    assert.deepEqual(bria.conversation(id).pins, []);
  } finally {
    close();
  }
});

test("roles: an owner makes an admin, every member's state learns it, and refusals are typed ApiErrors", async () => {
  const { id, clients, close } = await group("cora", ["dion", "enzo"], "roles");
  const { cora, dion, enzo } = clients;
  try {
    await cora.sendText(id, "hello");
    await until(() => enzo.conversation(id).messages.length > 0, 10_000, "enzo's copy");
    await enzo.rest.conversation(id);
    assert.deepEqual(Object.fromEntries(enzo.conversation(id).roles), { cora: "owner", dion: "member", enzo: "member" });

    // A member may not change roles.
    await assert.rejects(enzo.rest.changeRole(id, "dion", "admin"), (e) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 403);
      assert.equal(e.code, "forbidden");
      return true;
    });

    const detail = await cora.rest.changeRole(id, "dion", "admin");
    assert.equal(detail.members.find((m) => m.user_id === "dion").role, "admin");
    // Enzo learns it from the role_changed message, with no REST call.
    await until(() => enzo.conversation(id).roleOf("dion") === "admin", 10_000, "enzo learning the role");
    assert.equal(enzo.conversationList.loaded, false);
    const change = enzo.conversation(id).messages.find((m) => m.content?.event === "role_changed");
    assert.deepEqual([change.content.actor, change.content.user_ids, change.content.role], ["cora", ["dion"], "admin"]);

    // An admin may pin and mention all, but not make owners; the last
    // owner stays.
    const msg = await dion.sendText(id, "@all as admin", { mentionAll: true });
    await dion.rest.pin(id, msg.message_id);
    await assert.rejects(dion.rest.changeRole(id, "enzo", "owner"), (e) => e instanceof ApiError && e.code === "forbidden");
    await assert.rejects(cora.rest.changeRole(id, "cora", "member"), (e) => e instanceof ApiError && e.status === 409 && e.code === "conflict");
  } finally {
    close();
  }
});

// ---- Safety (v1.2): blocks, bans, the policy and slow mode ----

test("blocks: the set read at start and kept on every device, blocked_sender in groups (live, held, history) for the blocker alone, the direct conversation closed both ways", async () => {
  const { id, clients, close } = await group("fern", ["gus", "hana"], "blocks");
  const { fern, gus, hana } = clients;
  const phone = await client("fern", "phone");
  let tablet;
  try {
    const { conversation_id: direct } = await gus.rest.createConversation("direct", ["fern"]);
    await until(() => fern.blocked.loaded && phone.blocked.loaded, 10_000, "the blocks read at start");
    assert.equal(fern.blocked.size, 0);
    const before = await gus.sendText(id, "before the block");
    await until(() => fern.conversation(id).get(before.message_id), 10_000, "fern's copy");
    assert.equal(fern.conversation(id).get(before.message_id).blocked_sender, undefined);

    // Blocked from the laptop: the set changes at once, the phone is told.
    const toPhone = waitFor(phone, "blocks_changed", (e) => e.user_id === "gus" && e);
    const toLaptop = [];
    fern.on("blocks_changed", (e) => toLaptop.push(e));
    const block = await fern.rest.block("gus");
    assert.equal(block.user_id, "gus");
    assert.ok(Date.parse(block.blocked_at) > 0);
    assert.equal(fern.isBlocked("gus"), true);
    assert.deepEqual(await toPhone, { user_id: "gus", action: "block" });
    assert.deepEqual(phone.blocked.list().map((b) => b.user_id), ["gus"]);
    // The messages held here are flagged now, for the blocker's UI.
    assert.equal(fern.conversation(id).get(before.message_id).blocked_sender, true);
    assert.equal(fern.isBlockedSender(fern.conversation(id).get(before.message_id)), true);
    // Idempotent; the list; a new device reads the set as it connects.
    assert.equal((await fern.rest.block("gus")).user_id, "gus");
    assert.deepEqual((await fern.rest.blocks()).blocks.map((b) => b.user_id), ["gus"]);
    tablet = await client("fern", "tablet");
    await until(() => tablet.blocked.loaded, 10_000, "the tablet's blocks");
    assert.equal(tablet.isBlocked("gus"), true);
    assert.deepEqual(toLaptop, [{ user_id: "gus", action: "block" }], "told once, however many sources said it");

    // In the group the blocked user's messages still come, flagged for
    // the blocker only.
    const toFern = waitFor(fern, "message", (m) => m.content?.text === "after the block" && m);
    const toHana = waitFor(hana, "message", (m) => m.content?.text === "after the block" && m);
    const after = await gus.sendText(id, "after the block");
    assert.equal((await toFern).blocked_sender, true);
    assert.equal((await toHana).blocked_sender, undefined);
    assert.equal(hana.isBlockedSender(await toHana), false);
    const fernsPage = await fern.rest.history(id, { limit: 20 });
    const fromGus = fernsPage.messages.filter((m) => m.sender_id === "gus");
    assert.deepEqual(fromGus.map((m) => m.blocked_sender), [true, true]);
    assert.ok((await hana.rest.history(id, { limit: 20 })).messages.every((m) => m.blocked_sender === undefined));

    // The direct conversation is closed both ways, and cannot be opened.
    await assert.rejects(gus.sendText(direct, "hello?"), (e) => e instanceof SendError && e.code === "forbidden");
    await assert.rejects(fern.sendText(direct, "go away"), (e) => e instanceof SendError && e.code === "forbidden");
    await assert.rejects(gus.rest.createConversation("direct", ["fern"]), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");
    await assert.rejects(fern.rest.block("fern"), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");

    // Unblocked from the phone: the laptop follows, and the flags go.
    const unblocked = waitFor(fern, "blocks_changed", (e) => e.action === "unblock" && e);
    await phone.rest.unblock("gus");
    assert.equal(phone.isBlocked("gus"), false);
    assert.deepEqual(await unblocked, { user_id: "gus", action: "unblock" });
    assert.equal(fern.isBlocked("gus"), false);
    assert.equal(fern.conversation(id).get(after.message_id).blocked_sender, undefined);
    assert.equal(fern.isBlockedSender(fern.conversation(id).get(after.message_id)), false);
    await until(() => !tablet.isBlocked("gus"), 10_000, "the tablet unblocking");
    assert.deepEqual((await fern.rest.blocks()).blocks, []);
    await phone.rest.unblock("gus");
    await gus.sendText(direct, "friends again?");
  } finally {
    close();
    phone.close();
    tablet?.close();
  }
});

test("bans: an admin bans a member (taken out, member_banned to all, the state and lists follow), adding them back is refused until lifted; refusals are typed", async () => {
  const { id, clients, close } = await group("iris", ["jack", "kurt"], "bans");
  const { iris, jack, kurt } = clients;
  try {
    await iris.rest.changeRole(id, "kurt", "admin");
    await iris.sendText(id, "house rules");
    await until(() => jack.conversation(id).messages.some((m) => m.content?.text === "house rules"), 10_000, "jack's copy");
    await iris.rest.conversation(id);
    await iris.conversationList.load();
    await jack.conversationList.load();

    // A member neither lists nor bans; nobody bans an owner or themselves,
    // nor until a time already past.
    await assert.rejects(jack.rest.bans(id), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");
    await assert.rejects(jack.rest.ban(id, "kurt"), (e) => e instanceof ApiError && e.status === 403);
    await assert.rejects(kurt.rest.ban(id, "iris"), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");
    await assert.rejects(iris.rest.ban(id, "iris"), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");
    await assert.rejects(iris.rest.ban(id, "jack", new Date(Date.now() - 60_000)), (e) => e instanceof ApiError && e.status === 409 && e.code === "conflict");

    // The admin bans jack for an hour: he is told, and taken out.
    const end = new Date(Date.now() + 3_600_000);
    const toJack = waitFor(jack, "message", (m) => m.content?.event === "member_banned" && m);
    const toIris = waitFor(iris, "message", (m) => m.content?.event === "member_banned" && m);
    const ban = await kurt.rest.ban(id, "jack", end);
    assert.deepEqual([ban.user_id, ban.by, Date.parse(ban.until)], ["jack", "kurt", end.getTime()]);
    const told = await toJack;
    assert.deepEqual([told.content.actor, told.content.user_ids, Date.parse(told.content.until)], ["kurt", ["jack"], end.getTime()]);
    await toIris;
    // Iris's state and list know he is gone, with no REST call; his list
    // drops the conversation.
    assert.equal(iris.conversation(id).roleOf("jack"), undefined);
    assert.equal(iris.conversation(id).roleOf("kurt"), "admin");
    await until(() => !iris.conversationList.get(id).members.includes("jack"), 10_000, "iris's list");
    assert.equal(iris.conversationList.get(id).preview, "kurt banned jack");
    await until(() => jack.conversationList.get(id) === undefined, 10_000, "jack's list dropping it");
    await assert.rejects(jack.sendText(id, "let me back"), (e) => e instanceof SendError && e.code === "not_a_member");

    // Listed; adding him is refused while it holds.
    const listed = await iris.rest.bans(id);
    assert.deepEqual(listed.bans.map((b) => [b.user_id, b.by]), [["jack", "kurt"]]);
    await assert.rejects(iris.rest.addMembers(id, ["jack"]), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");

    // Lifted: the members are told, and he may be added again.
    const lifted = waitFor(kurt, "message", (m) => m.content?.event === "member_unbanned" && m);
    await iris.rest.unban(id, "jack");
    assert.deepEqual((await lifted).content.user_ids, ["jack"]);
    assert.deepEqual((await iris.rest.bans(id)).bans, []);
    const back = await iris.rest.addMembers(id, ["jack"]);
    assert.ok(back.members.some((m) => m.user_id === "jack"));

    // A direct conversation has no bans.
    const { conversation_id: direct } = await iris.rest.createConversation("direct", ["kurt"]);
    await assert.rejects(iris.rest.ban(direct, "kurt"), (e) => e instanceof ApiError && e.status === 409 && e.code === "conflict");
  } finally {
    close();
  }
});

test("policy: an owner sets slow mode, retention and disappearing messages; every member's state and list follow; a member's early send fails with retryAfterMs and goes as a new one after the wait", async () => {
  const { id, clients, close } = await group("mina", ["noah"], "policy");
  const { mina, noah } = clients;
  try {
    await mina.sendText(id, "welcome");
    await until(() => noah.conversation(id).messages.length > 0, 10_000, "noah's copy");
    await noah.rest.conversation(id);
    await noah.conversationList.load();
    assert.deepEqual(noah.conversation(id).policy, { slow_mode_secs: 0, retention_days: null, disappearing_secs: null, frozen: false });
    assert.equal(noah.conversationList.get(id).slow_mode_secs, 0);

    // A member may not; bounds are checked; a direct conversation has no slow mode.
    await assert.rejects(noah.rest.updateConversation(id, { slow_mode_secs: 5 }), (e) => e instanceof ApiError && e.status === 403);
    await assert.rejects(mina.rest.updateConversation(id, { slow_mode_secs: 21_601 }), (e) => e instanceof ApiError && e.status === 400);
    await assert.rejects(mina.rest.updateConversation(id, { retention_days: 0 }), (e) => e instanceof ApiError && e.status === 400);
    const { conversation_id: direct } = await mina.rest.createConversation("direct", ["noah"]);
    await assert.rejects(mina.rest.updateConversation(direct, { slow_mode_secs: 5 }), (e) => e instanceof ApiError && e.status === 409);

    const updated = waitFor(noah, "message", (m) => m.content?.event === "conversation_updated" && m);
    const detail = await mina.rest.updateConversation(id, { slow_mode_secs: 2, retention_days: 30, disappearing_secs: 3600 });
    assert.deepEqual([detail.slow_mode_secs, detail.retention_days, detail.disappearing_secs], [2, 30, 3600]);
    const m = await updated;
    assert.deepEqual(m.content.policy, { slow_mode_secs: 2, retention_days: 30, disappearing_secs: 3600 });
    // Noah's state and list follow the message, with no REST call.
    assert.deepEqual(noah.conversation(id).policy, { slow_mode_secs: 2, retention_days: 30, disappearing_secs: 3600, frozen: false });
    const item = noah.conversationList.get(id);
    assert.deepEqual([item.slow_mode_secs, item.retention_days, item.disappearing_secs], [2, 30, 3600]);
    assert.equal(item.preview, "mina changed the conversation's settings");

    // Slow mode: noah's second message comes too early. It fails at once
    // (its client_msg_id stays refused), saying how long to wait.
    await noah.sendText(id, "first");
    const early = await noah.sendText(id, "second", { clientMsgId: "noah-early-1" }).then(
      () => assert.fail("an early send is refused"),
      (e) => e,
    );
    assert.ok(early instanceof SendError, String(early));
    assert.equal(early.code, "rate_limited");
    assert.equal(early.slowMode, true);
    assert.ok(early.retryAfterMs > 0 && early.retryAfterMs <= 2_000, String(early.retryAfterMs));
    const failed = noah.outgoing("noah-early-1");
    assert.equal(failed.status, "failed");
    assert.equal(failed.error.retryAfterMs, early.retryAfterMs);
    // After the wait it goes as a new message; the failed one leaves.
    await new Promise((r) => setTimeout(r, early.retryAfterMs + 250));
    const arrived = waitFor(mina, "message", (x) => x.content?.text === "second" && x);
    const sent = await noah.resendAsNew(failed);
    assert.notEqual(sent.client_msg_id, "noah-early-1");
    assert.equal(noah.outgoing("noah-early-1"), undefined);
    assert.equal((await arrived).message_id, sent.message_id);
    await assert.rejects(noah.resendAsNew(sent.client_msg_id), /only a failed message/);
    // Owners are not held.
    await mina.sendText(id, "one");
    await mina.sendText(id, "two");

    // Null turns retention off; what is left out stays.
    const off = await mina.rest.updateConversation(id, { retention_days: null });
    assert.deepEqual([off.slow_mode_secs, off.retention_days, off.disappearing_secs], [2, null, 3600]);
    await until(() => noah.conversation(id).policy.retention_days === null, 10_000, "noah's state");
    assert.equal(noah.conversationList.get(id).retention_days, null);
  } finally {
    close();
  }
});

test("reports: a member reports a message, a tenant admin lists them newest first by page and resolves them (delete, ban, dismiss); a resolved report stays as it was; refusals are typed", async () => {
  const { id, clients, close } = await group("lorna", ["milo", "nico"], "reports");
  const { lorna, milo, nico } = clients;
  // A tenant admin: a token with `role: "admin"` (`switchboard token --admin`).
  const moderator = new SwitchboardClient({ url: dev.url, token: adminToken("moderator"), WebSocket });
  const outsider = new SwitchboardClient({ url: dev.url, token: token("reports-outsider"), WebSocket });
  try {
    const spam = await nico.sendText(id, "cheap followers at spam.example");
    const rude = await nico.sendText(id, "you are all fools");
    const owners = await lorna.sendText(id, "the owner speaks");
    await until(() => milo.conversation(id).get(owners.message_id), 10_000, "milo's copies");

    // Members report; with a note, or without.
    const first = await milo.rest.report(id, spam.message_id, "spam", "posted in every group");
    const second = await milo.rest.report(id, rude.message_id, "abuse");
    const third = await milo.rest.report(id, owners.message_id, "other");
    assert.match(first.report_id, /^\d+$/);
    // Not a member, not a system message, not a message of it, a note too long.
    await assert.rejects(outsider.rest.report(id, spam.message_id, "spam"), (e) => e instanceof ApiError && e.status === 403 && e.code === "not_a_member");
    const roleChange = waitFor(milo, "message", (m) => m.content?.event === "role_changed" && m);
    await lorna.rest.changeRole(id, "milo", "admin");
    const system = await roleChange;
    await assert.rejects(milo.rest.report(id, system.message_id, "spam"), (e) => e instanceof ApiError && e.status === 409 && e.code === "conflict");
    await assert.rejects(milo.rest.report(id, "123456789", "spam"), (e) => e instanceof ApiError && e.status === 404);
    await assert.rejects(milo.rest.report(id, spam.message_id, "spam", "x".repeat(1001)), (e) => e instanceof ApiError && e.status === 400);

    // Only tenant admins read them: an owner or admin of the conversation does not.
    await assert.rejects(lorna.rest.reports(), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");
    await assert.rejects(lorna.rest.resolveReport(first.report_id, "dismiss"), (e) => e instanceof ApiError && e.status === 403);

    // Open ones, newest first, a page at a time; each with the message as reported.
    const ours = new Set([first.report_id, second.report_id, third.report_id]);
    const open = [];
    let cursor;
    do {
      const page = await moderator.rest.reports({ status: "open", limit: 2, cursor });
      assert.ok(page.reports.length <= 2);
      open.push(...page.reports.filter((r) => ours.has(r.report_id)));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    assert.deepEqual(open.map((r) => r.report_id), [third.report_id, second.report_id, first.report_id]);
    const [, , spamReport] = open;
    assert.deepEqual(
      [spamReport.conversation_id, spamReport.message_id, spamReport.reporter, spamReport.sender_id, spamReport.reason, spamReport.note, spamReport.status, spamReport.action],
      [id, spam.message_id, "milo", "nico", "spam", "posted in every group", "open", null],
    );
    assert.equal(spamReport.message.content.text, "cheap followers at spam.example");
    assert.equal(open[1].note, null);

    // Deleting the message: every member's copy is deleted; the report
    // keeps it as it was.
    const deleted = waitFor(milo, "updated", (m) => m.message_id === spam.message_id && m.deleted_at && m);
    const resolved = await moderator.rest.resolveReport(first.report_id, "delete_message");
    assert.deepEqual([resolved.status, resolved.action, resolved.resolved_by], ["resolved", "delete_message", "moderator"]);
    assert.ok(Date.parse(resolved.resolved_at) > 0);
    assert.equal(resolved.message.content.text, "cheap followers at spam.example");
    await deleted;
    await until(() => nico.conversation(id).get(spam.message_id)?.deleted_at, 10_000, "the sender's copy deleted");
    // Resolving again changes nothing.
    const again = await moderator.rest.resolveReport(first.report_id, "dismiss");
    assert.deepEqual([again.action, again.resolved_at], ["delete_message", resolved.resolved_at]);

    // Banning the sender: taken out, and listed among the bans.
    const banned = waitFor(lorna, "message", (m) => m.content?.event === "member_banned" && m);
    assert.equal((await moderator.rest.resolveReport(second.report_id, "ban_sender")).action, "ban_sender");
    assert.deepEqual((await banned).content.user_ids, ["nico"]);
    assert.deepEqual((await lorna.rest.bans(id)).bans.map((b) => [b.user_id, b.by, b.until]), [["nico", "moderator", null]]);

    // An owner is not banned: refused, and the report stays open; then dismissed.
    await assert.rejects(moderator.rest.resolveReport(third.report_id, "ban_sender"), (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden");
    assert.ok((await moderator.rest.reports({ limit: 200 })).reports.some((r) => r.report_id === third.report_id));
    const dismissed = await moderator.rest.resolveReport(third.report_id, "dismiss");
    assert.deepEqual([dismissed.status, dismissed.action], ["resolved", "dismiss"]);
    await assert.rejects(moderator.rest.resolveReport("123456789", "dismiss"), (e) => e instanceof ApiError && e.status === 404);

    const stillOpen = (await moderator.rest.reports({ limit: 200 })).reports;
    assert.ok(!stillOpen.some((r) => ours.has(r.report_id)));
    const closed = (await moderator.rest.reports({ status: "resolved", limit: 200 })).reports.filter((r) => ours.has(r.report_id));
    assert.deepEqual(closed.map((r) => [r.report_id, r.action]), [
      [third.report_id, "dismiss"],
      [second.report_id, "ban_sender"],
      [first.report_id, "delete_message"],
    ]);
  } finally {
    close();
  }
});

test("erasure: a tenant admin erases a user; their messages stay as tombstones under a pseudonym, the job names nobody, and nobody else may ask", async () => {
  const { id, clients, close } = await group("oona", ["pia"], "erasure");
  const { oona, pia } = clients;
  const admin = new SwitchboardClient({ url: dev.url, token: adminToken("eraser"), WebSocket });
  try {
    const hers = await pia.sendText(id, "pia's words");
    const named = await oona.sendText(id, "hi pia", { mentions: ["pia"] });
    await until(() => oona.conversation(id).get(hers.message_id), 10_000, "oona's copy");
    pia.close();
    // Not an admin; nobody of this tenant.
    await assert.rejects(oona.rest.eraseUser("pia"), (e) => e instanceof ApiError && e.status === 403);
    await assert.rejects(admin.rest.eraseUser("nobody-at-all"), (e) => e instanceof ApiError && e.status === 404);
    const started = await admin.rest.eraseUser("pia");
    assert.equal(started.kind, "erase_user");
    assert.match(started.pseudonym, /^erased-[0-9a-f]{16}$/);
    const job = await admin.rest.eraseUserAndWait("pia", { everyMs: 300, timeoutMs: 60_000 });
    assert.equal(job.job_id, started.job_id);
    assert.equal(job.state, "done");
    assert.ok(!JSON.stringify(job).includes("pia\""));
    const page = await oona.rest.history(id, { limit: 50 });
    const tombstone = page.messages.find((m) => m.message_id === hers.message_id);
    assert.deepEqual([tombstone.sender_id, tombstone.content, Boolean(tombstone.deleted_at)], [started.pseudonym, null, true]);
    assert.deepEqual(page.messages.find((m) => m.message_id === named.message_id).mentions, [started.pseudonym]);
    const detail = await oona.rest.conversation(id);
    assert.deepEqual(detail.members.map((m) => m.user_id), ["oona"]);
  } finally {
    admin.close();
    close();
  }
});

test("profiles: set and read, the cache follows profile_updated on every member, a device away reads the changes it missed, custom is the admins'", async () => {
  const { id, clients, close } = await group("ivy", ["jay"], "profiles");
  const { ivy, jay } = clients;
  const admin = new SwitchboardClient({ url: dev.url, token: adminToken("profiler"), WebSocket });
  try {
    assert.ok(id);
    const [blank] = await jay.profiles.load(["ivy"]);
    assert.equal(blank.display_name, null);
    assert.equal(blank.updated_at, null);
    assert.equal(jay.profiles.displayName("ivy"), "ivy");

    // A change reaches the other member's cache as an event.
    const heard = waitFor(jay, "profile_updated", (p) => p.user_id === "ivy" && p.display_name === "Ivy" && p);
    const mine = await ivy.rest.updateProfile({ display_name: "Ivy", status: { text: "around", emoji: "🌿" } });
    assert.equal(mine.display_name, "Ivy");
    assert.equal((await heard).status.emoji, "🌿");
    assert.equal(jay.profiles.displayName("ivy"), "Ivy");
    assert.equal(ivy.profiles.get("ivy").display_name, "Ivy", "the answer fills the caller's own cache");

    // Away while it changes: read again as the connection opens.
    jay.close();
    await ivy.rest.updateProfile({ display_name: "Ivy R.", status: null });
    const caughtUp = waitFor(jay, "profile_updated", (p) => p.display_name === "Ivy R." && p);
    jay.connect();
    assert.equal((await caughtUp).status, null);
    assert.equal(jay.profiles.get("ivy").display_name, "Ivy R.");

    // custom: the tenant admins', refused to the user.
    await assert.rejects(
      ivy.rest.updateProfile({ custom: { team: "x" } }),
      (e) => e instanceof ApiError && e.status === 403 && e.code === "forbidden",
    );
    const toJay = waitFor(jay, "profile_updated", (p) => p.custom?.team === "green" && p);
    const set = await admin.rest.setCustomProfile("ivy", { team: "green" });
    assert.deepEqual(set.custom, { team: "green" });
    assert.equal((await toJay).display_name, "Ivy R.");
    const [read] = await admin.rest.users(["ivy"]);
    assert.deepEqual(read.custom, { team: "green" });
    await assert.rejects(
      ivy.rest.updateProfile({ display_name: "x".repeat(65) }),
      (e) => e instanceof ApiError && e.status === 400 && e.code === "invalid_request",
    );
  } finally {
    close();
    admin.close();
  }
});

test("reports are rate limited per user: past 10 a minute, 429", async () => {
  const { id, clients, close } = await group("rory", ["sage"], "report rate");
  try {
    const sent = await clients.sage.sendText(id, "report me");
    for (let i = 0; i < 10; i++) await clients.rory.rest.report(id, sent.message_id, "other", `report ${i}`);
    await assert.rejects(clients.rory.rest.report(id, sent.message_id, "other"), (e) => e instanceof ApiError && e.status === 429 && e.code === "rate_limited");
  } finally {
    close();
  }
});

test("export: the caller's own data as one parsed document (profile, blocks, each conversation with the messages they sent, newest first), 4 an hour", async () => {
  const { id, clients, close } = await group("exporter", ["export-peer"], "export");
  const { exporter, "export-peer": peer } = clients;
  try {
    const { conversation_id: direct } = await exporter.rest.createConversation("direct", ["export-friend"]);
    await exporter.sendText(id, "mine, first");
    await peer.sendText(id, "not mine");
    const second = await exporter.sendText(id, "mine, second");
    await exporter.sendText(direct, "hello there");
    await exporter.rest.setSettings(id, { notifications: "mentions" });
    const block = await exporter.rest.block("export-blocked");

    const data = await exporter.rest.exportMyData();
    assert.deepEqual([data.profile.user_id, data.profile.tenant], ["exporter", "demo"]);
    assert.ok(Date.parse(data.profile.exported_at) > 0);
    assert.deepEqual(data.blocks, [block]);
    const byId = new Map(data.conversations.map((c) => [c.conversation_id, c]));
    assert.deepEqual([...byId.keys()].sort(), [id, direct].sort());
    const inGroup = byId.get(id);
    assert.deepEqual([inGroup.kind, inGroup.title, inGroup.role, inGroup.settings.notifications], ["group", "export", "owner", "mentions"]);
    assert.ok(Date.parse(inGroup.joined_at) > 0);
    assert.equal(typeof inGroup.read_seq, "number");
    assert.deepEqual(inGroup.messages.map((m) => m.content.text), ["mine, second", "mine, first"]);
    assert.equal(inGroup.messages[0].message_id, second.message_id);
    assert.deepEqual(byId.get(direct).messages.map((m) => m.content.text), ["hello there"]);
    // The other member's holds only theirs.
    const theirs = await peer.rest.exportMyData();
    assert.deepEqual(theirs.conversations.find((c) => c.conversation_id === id).messages.map((m) => m.content.text), ["not mine"]);
    assert.deepEqual(theirs.blocks, []);

    // 4 an hour per user: the second to the fourth, then refused.
    for (let i = 0; i < 3; i++) await exporter.rest.exportMyData();
    await assert.rejects(exporter.rest.exportMyData(), (e) => e instanceof ApiError && e.status === 429 && e.code === "rate_limited");
    await exporter.rest.unblock("export-blocked");
  } finally {
    close();
  }
});

test("slow mode's refusal is not written again, other rate_limited answers are; a REST refusal says when to try again (stand-ins)", { timeout: 10_000 }, async () => {
  // The stand-in refuses "slow" with retry_after_ms, and "busy" once
  // without (the gateway's own rate), then acks it.
  let busy = 0;
  const server = await standIn((frame, socket) => {
    if (frame.type !== "send_message") return;
    const refuse = (extra) =>
      server.reply(socket, {
        type: "error",
        code: "rate_limited",
        message: "slow down",
        request_type: "send_message",
        client_msg_id: frame.client_msg_id,
        conversation_id: frame.conversation_id,
        ...extra,
      });
    if (frame.client_msg_id === "slow") refuse({ retry_after_ms: 4_200 });
    else if (frame.client_msg_id === "busy" && busy++ === 0) refuse({});
    else server.reply(socket, { type: "ack", client_msg_id: frame.client_msg_id, conversation_id: frame.conversation_id, message_id: "9", seq: 1, status: "sent" });
  });
  // REST: a 429 with the body's retry_after_ms, then one with only the header.
  let answers = 0;
  const fetchStub = async () => {
    answers += 1;
    if (answers === 1) return new Response(JSON.stringify({ code: "rate_limited", message: "wait", retry_after_ms: 1500 }), { status: 429 });
    if (answers === 2) return new Response(JSON.stringify({ code: "rate_limited", message: "wait" }), { status: 429, headers: { "retry-after": "3" } });
    return new Response(JSON.stringify({ blocks: [] }), { status: 200 });
  };
  const c = new SwitchboardClient({ url: server.url, token: fakeToken("zed"), WebSocket, fetch: fetchStub });
  try {
    // (Before connecting: the list connecting reads gets the last answer.)
    assert.equal((await c.rest.block("x").catch((e) => e)).retryAfterMs, 1500);
    assert.equal((await c.rest.block("x").catch((e) => e)).retryAfterMs, 3000);
    c.connect();
    const slow = await c.send("c1", { kind: "text", text: "hi" }, "slow").catch((e) => e);
    assert.ok(slow instanceof SendError && slow.code === "rate_limited" && slow.retryAfterMs === 4_200, String(slow));
    assert.equal(server.frames.filter((f) => f.client_msg_id === "slow").length, 1, "written once");
    const sent = await c.send("c1", { kind: "text", text: "hi" }, "busy");
    assert.equal(sent.client_msg_id, "busy");
    assert.equal(server.frames.filter((f) => f.client_msg_id === "busy").length, 2, "written again after a plain rate_limited");
  } finally {
    c.close();
    server.close();
  }
});

test("a blocks list read: every message held follows it, each change of the set is told once, and a change seen after it was asked for wins (stand-in REST)", async () => {
  // GET /v1/blocks answers what `listed` holds once `gate` opens; DELETE
  // answers at once.
  let listed = [{ user_id: "ivan", blocked_at: "2026-01-02T03:04:05.000Z" }];
  let gate = Promise.resolve();
  const fetchStub = async (url, init) => {
    if ((init?.method ?? "GET") === "DELETE") return new Response(null, { status: 204 });
    await gate;
    return new Response(JSON.stringify({ blocks: listed }), { status: 200 });
  };
  const c = new SwitchboardClient({ url: "http://127.0.0.1:9", token: fakeToken("zed"), WebSocket, fetch: fetchStub });
  const told = [];
  c.on("blocks_changed", (e) => told.push(e));
  const state = c.conversation("c1");
  state.add(message({ conversation_id: "c1", message_id: "1", seq: 1, sender_id: "ivan" }));
  // Kept from before an unblock made while this client was away.
  state.add(message({ conversation_id: "c1", message_id: "2", seq: 2, sender_id: "judy", blocked_sender: true }));
  assert.equal(c.blocked.loaded, false);
  assert.equal(c.isBlockedSender(state.get("2")), true, "by its own flag until the list is read");

  await c.rest.blocks();
  assert.equal(c.blocked.loaded, true);
  assert.deepEqual(told, [{ user_id: "ivan", action: "block" }]);
  assert.deepEqual(state.messages.map((m) => [m.message_id, m.blocked_sender]), [["1", true], ["2", undefined]]);
  assert.deepEqual(c.blocked.list(), listed);
  await c.rest.blocks();
  assert.equal(told.length, 1, "a read that changes nothing tells nothing");

  // Ivan unblocked while a read (which still lists him) is on its way.
  let open;
  gate = new Promise((resolve) => (open = resolve));
  const reading = c.rest.blocks();
  await new Promise((r) => setTimeout(r, 5));
  await c.rest.unblock("ivan");
  assert.deepEqual(told.at(-1), { user_id: "ivan", action: "unblock" });
  assert.equal(state.get("1").blocked_sender, undefined);
  open();
  await reading;
  assert.equal(c.isBlocked("ivan"), false, "the older list does not block him again");
  assert.equal(told.length, 2);
  listed = [];
  await c.rest.blocks();
  assert.equal(told.length, 2);
  c.close();
});

test("an export whose body ends early rejects with a plain Error, never a partial document (stand-in REST)", async () => {
  // The server writes the document as it reads it: a failure midway cuts
  // the body (here once as truncated JSON, once as a stream that fails).
  const head = '{"profile":{"user_id":"zed","tenant":"demo","exported_at":"2026-01-02T03:04:05.000Z"},"blocks":[],"conversations":[{"conversation_id":"c1"';
  const bodies = [
    () => head,
    () =>
      new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(head));
          controller.error(new Error("connection reset"));
        },
      }),
    () => `${head},"kind":"group","title":null,"joined_at":"2026-01-02T03:04:05.000Z","role":"owner","settings":{"notifications":"all","muted_until":null},"read_seq":0,"messages":[]}]}`,
  ];
  let next = 0;
  const fetchStub = async () => new Response(bodies[next++](), { status: 200, headers: { "content-type": "application/json" } });
  const c = new SwitchboardClient({ url: "http://127.0.0.1:9", token: fakeToken("zed"), WebSocket, fetch: fetchStub });
  for (let i = 0; i < 2; i++) {
    await assert.rejects(c.rest.exportMyData(), (e) => !(e instanceof ApiError) && /ended before its end/.test(e.message) && e.cause !== undefined);
  }
  const whole = await c.rest.exportMyData();
  assert.deepEqual(whole.conversations.map((x) => [x.conversation_id, x.messages]), [["c1", []]]);
});

test("server API: a bot posts over REST without a socket, once per client_msg_id, and members see it live", async () => {
  const { id, clients, close } = await group("quinn", ["relay-bot"], "bots");
  const { quinn } = clients;
  clients["relay-bot"].close();
  // A bot's client never connects: its `rest` is the server API.
  const bot = new SwitchboardClient({ url: dev.url, token: botToken("relay-bot"), WebSocket });
  try {
    const arrived = waitFor(quinn, "message", (m) => m.content?.text === "build passed" && m);
    const posted = await bot.rest.postMessage(id, { client_msg_id: "ci-run-42", content: { kind: "text", text: "build passed" } });
    assert.equal(posted.status, "sent");
    const seen = await arrived;
    assert.deepEqual([seen.message_id, seen.seq, seen.sender_id], [posted.message_id, posted.seq, "relay-bot"]);
    // A retry answers the same message; postText makes its own ids.
    assert.deepEqual(await bot.rest.postMessage(id, { client_msg_id: "ci-run-42", content: { kind: "text", text: "build passed" } }), posted);
    const next = await bot.rest.postText(id, "deploying");
    assert.equal(next.seq, posted.seq + 1);
    // A stranger's post is refused with the socket's code.
    const stranger = new SwitchboardClient({ url: dev.url, token: botToken("other-bot"), WebSocket });
    await assert.rejects(stranger.rest.postText(id, "hi"), (e) => e instanceof ApiError && e.code === "not_a_member");
  } finally {
    close();
  }
});

test("scheduled messages: kept for later, listed, cancelled, then sent to every device at their time", async () => {
  const { id, clients, close } = await group("rosa", ["sami"], "scheduled");
  const { rosa, sami } = clients;
  try {
    const sendAt = new Date(Date.now() + 2500);
    const kept = await rosa.schedule(id, { kind: "text", text: "see you soon" }, sendAt);
    assert.equal(kept.status, "scheduled");
    assert.ok(kept.scheduled_id && kept.seq == null);
    const dropped = await rosa.schedule(id, { kind: "text", text: "never mind" }, sendAt);
    assert.deepEqual((await rosa.rest.scheduled()).map((s) => s.content.text), ["see you soon", "never mind"]);
    await rosa.rest.cancelScheduled(dropped.scheduled_id);
    await assert.rejects(rosa.rest.cancelScheduled(dropped.scheduled_id), (e) => e instanceof ApiError && e.status === 404);
    const toSami = waitFor(sami, "message", (m) => m.content?.text === "see you soon" && m);
    const toRosa = waitFor(rosa, "message", (m) => m.content?.text === "see you soon" && m);
    const [seen, mine] = await Promise.all([toSami, toRosa]);
    assert.equal(seen.message_id, mine.message_id);
    assert.equal(seen.sender_device, "sb:scheduled");
    assert.ok(new Date(seen.created_at) >= new Date(sendAt.toISOString().replace(/\.\d+Z$/, ".000Z")));
    assert.deepEqual(await rosa.rest.scheduled(), []);
    await assert.rejects(
      rosa.schedule(id, { kind: "text", text: "too late" }, new Date(Date.now() - 1000)),
      (e) => e instanceof ApiError && e.code === "invalid_request",
    );
  } finally {
    close();
  }
});

test("webhooks: verifyWebhook takes a signed body and refuses a forged, altered or old one", async () => {
  const { createHmac } = await import("node:crypto");
  const secret = "receiver-secret-0123";
  const body = JSON.stringify({ id: "created-1", type: "message.created", tenant: "demo", conversation_id: "c", created_at: "2026-01-01T00:00:00.000Z", data: {} });
  const t = Math.floor(Date.now() / 1000);
  const sign = (s, b, at) => `t=${at},v1=${createHmac("sha256", s).update(`${at}.${b}`).digest("hex")}`;
  const event = await verifyWebhook(secret, sign(secret, body, t), body);
  assert.equal(event.id, "created-1");
  assert.equal((await verifyWebhook(secret, sign(secret, body, t), new TextEncoder().encode(body))).type, "message.created");
  await assert.rejects(verifyWebhook("another-secret-0123", sign(secret, body, t), body), /does not match/);
  await assert.rejects(verifyWebhook(secret, sign(secret, body, t), body.replace("c", "d")), /does not match/);
  await assert.rejects(verifyWebhook(secret, sign(secret, body, t - 3600), body), /off/);
  await assert.rejects(verifyWebhook(secret, "v1=00", body), /not t=/);
});

test("search: a member finds a message within 2 s of its ack, with highlights, and pages", async () => {
  const { id, clients, close } = await group("tess", ["umar"], "search");
  const { tess, umar } = clients;
  try {
    const sent = await tess.sendText(id, "the zebracorn migration is done");
    const deadline = Date.now() + 2000;
    let found = await umar.rest.search("zebracorn");
    while (found.results.length === 0) {
      assert.ok(Date.now() < deadline, "findable within 2 s of the ack");
      await new Promise((r) => setTimeout(r, 50));
      found = await umar.rest.search("zebracorn");
    }
    assert.equal(found.results[0].message.message_id, sent.message_id);
    assert.match(found.results[0].highlights[0], /<b>zebracorn<\/b>/);
    for (let i = 0; i < 5; i += 1) await tess.sendText(id, `okapiword note ${i}`);
    const indexedBy = Date.now() + 2000;
    while ((await umar.rest.search("okapiword")).results.length < 5) {
      assert.ok(Date.now() < indexedBy, "all five findable within 2 s");
      await new Promise((r) => setTimeout(r, 50));
    }
    const ids = new Set();
    let cursor;
    do {
      const page = await umar.rest.search("okapiword", { limit: 2, cursor, conversationId: id });
      page.results.forEach((r) => ids.add(r.message.message_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    assert.equal(ids.size, 5);
  } finally {
    close();
  }
});

test("an erased user's session ends for good: `ended` with 4004, the client closed, no reconnect", async () => {
  const erin = await client("erased-erin");
  const statuses = [];
  erin.on("status", (s) => statuses.push(s));
  try {
    // Something of hers, so that the tenant has a trace of her.
    await erin.rest.createConversation("group", ["bob"], "before the erasure");
    const ended = waitFor(erin, "ended", (e) => e);
    const res = await fetch(`${dev.url}/v1/admin/users/erased-erin`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${adminToken()}` },
    });
    assert.equal(res.status, 202);
    const { code } = await ended;
    assert.equal(code, 4004);
    assert.equal(erin.status, "closed");
    // It stays closed: no attempt is made again.
    await new Promise((ok) => setTimeout(ok, 1_500));
    assert.equal(erin.status, "closed");
    assert.ok(!statuses.includes("reconnecting"), statuses.join(","));
  } finally {
    erin.close();
  }
});

test("moderation without code (v1.3): a tenant admin's word list, tenant ban (tokens refused as `banned`) and shadow ban, an owner's mute and freeze, each in the audit log", async () => {
  const { id, clients, close } = await group("vera", ["walt"], "moderation");
  const { vera, walt } = clients;
  const admin = new SwitchboardClient({ url: dev.url, token: adminToken("mod-admin"), WebSocket });
  const outcast = new SwitchboardClient({ url: dev.url, token: token("mod-outcast"), WebSocket });
  try {
    // The word list, stored normalized; an empty one turns it off.
    assert.deepEqual(await admin.rest.setBlocklist(["Gosh", "gosh"], "mask"), { words: ["gosh"], mode: "mask" });
    assert.deepEqual(await admin.rest.blocklist(), { words: ["gosh"], mode: "mask" });
    await admin.rest.setBlocklist([]);
    // Push templates (v1.3): stored as given, `{}` for none.
    const worded = { mention: { title: "{sender} mentioned you", body: "{text}" } };
    assert.deepEqual(await admin.rest.setPushTemplates(worded), worded);
    assert.deepEqual(await admin.rest.pushTemplates(), worded);
    await assert.rejects(admin.rest.setPushTemplates({ message: { title: "{name}" } }), (e) => e instanceof ApiError && e.status === 400);
    assert.deepEqual(await admin.rest.setPushTemplates({}), {});
    await assert.rejects(walt.rest.blocklist(), (e) => e instanceof ApiError && e.status === 403);

    // A mute: walt's sends are refused until it is lifted.
    const mute = await vera.rest.mute(id, "walt");
    assert.equal(mute.user_id, "walt");
    assert.deepEqual((await vera.rest.mutes(id)).map((m) => m.user_id), ["walt"]);
    await assert.rejects(walt.sendText(id, "can I speak?"), (e) => e instanceof SendError && e.code === "forbidden");
    await vera.rest.unmute(id, "walt");
    await walt.sendText(id, "I can speak");

    // Frozen: walt may not post; thawed, he may.
    assert.equal((await vera.rest.freeze(id)).frozen, true);
    await assert.rejects(walt.sendText(id, "frozen?"), (e) => e instanceof SendError && e.code === "forbidden");
    assert.equal((await vera.rest.freeze(id, false)).frozen, undefined);
    await walt.sendText(id, "thawed");

    // A tenant ban refuses the user's tokens everywhere, until lifted.
    const ban = await admin.rest.banUser("mod-outcast", { reason: "spam" });
    assert.deepEqual([ban.user_id, ban.by, ban.reason], ["mod-outcast", "mod-admin", "spam"]);
    await assert.rejects(outcast.rest.conversations(), (e) => e instanceof ApiError && e.status === 403 && e.code === "banned");
    assert.ok((await admin.rest.tenantBans({ limit: 1000 })).bans.some((b) => b.user_id === "mod-outcast"));
    await admin.rest.unbanUser("mod-outcast");
    await outcast.rest.conversations();

    // A shadow ban: walt's message is acked and his, not vera's to read.
    const shadow = await admin.rest.shadowBanUser("walt");
    assert.equal(shadow.user_id, "walt");
    assert.deepEqual((await admin.rest.shadowBans({ limit: 1000 })).bans.map((b) => b.user_id).filter((u) => u === "walt"), ["walt"]);
    const seen = async (who, sent) => (await who.rest.history(id)).messages.some((m) => m.message_id === sent.message_id);
    // The writers learn of it from the bans' bucket within moments.
    let hidden;
    for (let i = 0; i < 50; i++) {
      hidden = await walt.sendText(id, `only mine ${i}`);
      if (!(await seen(vera, hidden))) break;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    assert.equal(await seen(walt, hidden), true);
    assert.equal(await seen(vera, hidden), false);
    await admin.rest.unshadowBanUser("walt");

    // Every change, newest first.
    const log = await admin.rest.auditLog({ limit: 200 });
    const ours = log.entries.filter((e) => e.conversation_id === id || ["mod-admin"].includes(e.actor)).map((e) => e.action);
    assert.deepEqual(ours.slice(0, 10), [
      "user_shadow_unbanned",
      "user_shadow_banned",
      "user_unbanned",
      "user_banned",
      "conversation_thawed",
      "conversation_frozen",
      "member_unmuted",
      "member_muted",
      "blocklist_set",
      "blocklist_set",
    ]);
  } finally {
    admin.close();
    outcast.close();
    close();
  }
});
