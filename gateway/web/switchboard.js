// The Switchboard SDK (clients/js), bundled for the browser client by `npm run bundle`. Do not edit.
var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key2, value) => key2 in obj ? __defProp(obj, key2, { enumerable: true, configurable: true, writable: true, value }) : obj[key2] = value;
var __publicField = (obj, key2, value) => __defNormalProp(obj, typeof key2 !== "symbol" ? key2 + "" : key2, value);

// src/blocks.ts
var BlockSet = class {
  constructor() {
    /** By user: since when. */
    __publicField(this, "byUser", /* @__PURE__ */ new Map());
    /** By user: when (ms, this device's clock) a change of theirs was seen
     * here; a list asked for before it is older for that user. */
    __publicField(this, "seenAt", /* @__PURE__ */ new Map());
    __publicField(this, "read", false);
  }
  /** Whether the list was read from the server at least once (before,
   * only the changes seen here are known). */
  get loaded() {
    return this.read;
  }
  has(user) {
    return this.byUser.has(user);
  }
  get size() {
    return this.byUser.size;
  }
  /** The blocks, newest first. */
  list() {
    return [...this.byUser].map(([user_id, blocked_at]) => ({ user_id, blocked_at })).sort((a, b) => Date.parse(b.blocked_at) - Date.parse(a.blocked_at) || (a.user_id < b.user_id ? -1 : 1));
  }
  /** Takes the list as the server answered it (asked for at `askedAt`);
   * a user whose block changed here since keeps what that change said.
   * Returns the users whose state changed. */
  replace(blocks, askedAt) {
    const listed = new Map(blocks.map((b) => [b.user_id, b.blocked_at]));
    const changed = [];
    const newer2 = (user) => (this.seenAt.get(user) ?? -Infinity) >= askedAt;
    for (const user of [...this.byUser.keys()]) {
      if (listed.has(user) || newer2(user)) continue;
      this.byUser.delete(user);
      changed.push(user);
    }
    for (const [user, at] of listed) {
      if (newer2(user)) continue;
      if (!this.byUser.has(user)) changed.push(user);
      this.byUser.set(user, at);
    }
    this.read = true;
    return changed;
  }
  /** A block or unblock (an event, or the caller's own REST call); says
   * whether the set changed. */
  change(user, action, at = (/* @__PURE__ */ new Date()).toISOString()) {
    this.seenAt.set(user, Date.now());
    if (action === "block") {
      if (this.byUser.has(user)) return false;
      this.byUser.set(user, at);
      return true;
    }
    return this.byUser.delete(user);
  }
  /** Forgets everything (another user's session). */
  clear() {
    this.byUser.clear();
    this.seenAt.clear();
    this.read = false;
  }
};

// src/errors.ts
var CommandError = class _CommandError extends Error {
  constructor(request, conversationId, code, message, frame) {
    super(`${code}: ${message}`);
    __publicField(this, "request", request);
    __publicField(this, "conversationId", conversationId);
    __publicField(this, "code", code);
    __publicField(this, "frame");
    /** With a slow mode's `rate_limited` (v1.2): how long (ms, from the
     * refusal) until this user may send there again; undefined otherwise. */
    __publicField(this, "retryAfterMs");
    this.name = "CommandError";
    this.frame = frame;
    this.retryAfterMs = frame?.retry_after_ms ?? void 0;
  }
  /** The error of a refusal by the server. */
  static refused(request, conversationId, frame) {
    return new _CommandError(request, conversationId, frame.code, frame.message, frame);
  }
};
var SendError = class extends CommandError {
  constructor(frame) {
    super("send_message", frame.conversation_id ?? "", frame.code, frame.message, frame);
    this.name = "SendError";
  }
  /** Whether a slow mode refused it (v1.2): `rate_limited` saying when
   * to send again. */
  get slowMode() {
    return isSlowMode(this.frame);
  }
};
function isSlowMode(frame) {
  return frame?.code === "rate_limited" && typeof frame.retry_after_ms === "number";
}
var FINAL_CODES = /* @__PURE__ */ new Set([
  "invalid_frame",
  "invalid_request",
  "too_large",
  "unauthorized",
  "forbidden",
  "not_a_member",
  "not_found",
  "conflict",
  "rejected_by_policy",
  "quota_exceeded"
]);
var INTERNAL_ANSWERS = 3;
function onRefusal(code, answers) {
  if (FINAL_CODES.has(code) || code === "internal" && answers >= INTERNAL_ANSWERS) return { final: true };
  return { final: false, delayMs: Math.min(3e4, 1e3 * 2 ** Math.max(0, answers - 1)) };
}

// src/polls.ts
function pollContent(poll) {
  const taken = new Set(poll.options.flatMap((o) => typeof o === "string" ? [] : [o.id]));
  let next = 0;
  const freshId = () => {
    let id;
    do {
      next += 1;
      id = `o${next}`;
    } while (taken.has(id));
    taken.add(id);
    return id;
  };
  const closes = poll.closesAt instanceof Date ? poll.closesAt.toISOString() : poll.closesAt;
  return {
    kind: "poll",
    question: poll.question,
    options: poll.options.map((o) => typeof o === "string" ? { id: freshId(), text: o } : { id: o.id, text: o.text }),
    multiple: poll.multiple ?? false,
    anonymous: poll.anonymous ?? false,
    ...closes ? { closes_at: closes } : {}
  };
}
function freshResults(poll) {
  return {
    counts: Object.fromEntries(poll.options.map((o) => [o.id, 0])),
    closed: false,
    ...poll.anonymous ? {} : { voters: Object.fromEntries(poll.options.map((o) => [o.id, []])) },
    me: []
  };
}
function inPollOrder(poll, optionIds) {
  const unique = [...new Set(optionIds)];
  if (!poll) return unique;
  const order = new Map(poll.options.map((o, i) => [o.id, i]));
  return unique.sort((a, b) => (order.get(a) ?? Infinity) - (order.get(b) ?? Infinity));
}
var complete = (event, id, listed) => listed.length >= (event.counts[id] ?? 0);
function choiceAfter(poll, event, user, known) {
  const ids = poll ? poll.options.map((o) => o.id) : Object.keys(event.counts);
  const voters = event.voters;
  if (!voters || user === void 0) return ids.filter((id) => known.includes(id) && (event.counts[id] ?? 0) > 0);
  const listed = ids.filter((id) => voters[id]?.includes(user));
  if (listed.length && poll && !poll.multiple) return listed;
  return ids.filter((id) => {
    const users = voters[id] ?? [];
    if (users.includes(user)) return true;
    return known.includes(id) && !complete(event, id, users);
  });
}
function answersVote(event, optionIds, user) {
  if (event.closed) return false;
  if (optionIds.some((id) => (event.counts[id] ?? 0) < 1)) return false;
  const voters = event.voters;
  if (!voters || user === void 0) return true;
  for (const [id, users] of Object.entries(voters)) {
    const listed = users.includes(user);
    const chosen = optionIds.includes(id);
    if (listed && !chosen) return false;
    if (chosen && !listed && complete(event, id, users)) return false;
  }
  return true;
}

// src/commands.ts
var MARK_WINDOW_MS = 2e3;
var key = (kind, conversationId, threadId) => `${kind}\0${conversationId}\0${threadId ?? ""}`;
function parts(k) {
  const [kind, conversationId, threadId] = k.split("\0");
  return [kind, conversationId, threadId || void 0];
}
var laneOf = (u) => u.type === "react" ? `${u.conversationId}\0${u.messageId}` : u.type === "vote" ? `${u.conversationId}\0${u.messageId}\0vote` : u.conversationId;
var Commands = class {
  constructor(host, options) {
    __publicField(this, "host", host);
    __publicField(this, "options", options);
    /** Per conversation (edits and deletes), message (reactions) or poll
     * (votes), in order; the first is in flight once written. */
    __publicField(this, "lanes", /* @__PURE__ */ new Map());
    /** Per kind and conversation (or thread), the highest mark not yet
     * written. */
    __publicField(this, "marks", /* @__PURE__ */ new Map());
    /** Per kind and conversation (or thread), the highest mark written, and when. */
    __publicField(this, "written", /* @__PURE__ */ new Map());
  }
  /** Edits, deletes, reactions and votes waiting or in flight. */
  get size() {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.length;
    return n;
  }
  update(type, conversationId, messageId, content, custom) {
    if (!this.host.hasRoom()) {
      return Promise.reject(new CommandError(type, conversationId, "queue_full", "too many commands wait for a connection"));
    }
    return new Promise((resolve, reject) => {
      this.enqueue({
        type,
        conversationId,
        messageId,
        content,
        ...custom ? { custom } : {},
        createdAt: Date.now(),
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [{ resolve, reject }]
      });
    });
  }
  /** Adds or removes a reaction: resolves with the `reaction` event that
   * answers it (a repeat is answered too: reactions are idempotent). */
  react(conversationId, messageId, emoji, action) {
    if (!this.host.hasRoom()) {
      return Promise.reject(new CommandError("react", conversationId, "queue_full", "too many commands wait for a connection"));
    }
    return new Promise((resolve, reject) => {
      this.enqueue({
        type: "react",
        conversationId,
        messageId,
        content: void 0,
        emoji,
        action,
        createdAt: Date.now(),
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [{ resolve, reject }]
      });
    });
  }
  /** Replaces the user's vote in a poll (v1.3; empty retracts it):
   * resolves with the `poll_updated` that answers it (a repeat is
   * answered too: votes are idempotent). */
  vote(conversationId, messageId, optionIds) {
    if (!this.host.hasRoom()) {
      return Promise.reject(new CommandError("vote", conversationId, "queue_full", "too many commands wait for a connection"));
    }
    return new Promise((resolve, reject) => {
      this.enqueue({
        type: "vote",
        conversationId,
        messageId,
        content: void 0,
        optionIds,
        createdAt: Date.now(),
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [{ resolve, reject }]
      });
    });
  }
  /** Moves a mark (with `threadId`, the read mark of that thread):
   * resolves once it is written (or one at least as high was); while
   * there is no connection only the highest waits. */
  mark(kind, conversationId, seq, threadId) {
    const k = key(kind, conversationId, threadId);
    const done = this.written.get(k);
    if (done && done.seq >= seq) return Promise.resolve();
    return new Promise((resolve) => {
      const waiting = this.marks.get(k);
      if (waiting && waiting.seq >= seq) {
        waiting.waiters.push(resolve);
        return;
      }
      this.marks.set(k, { seq, waiters: [...waiting?.waiters ?? [], resolve] });
      this.host.changed();
      this.writeMark(k);
    });
  }
  /** A `message_updated`: the answer of the edit or delete in flight for
   * that message, if one is. */
  updated(message) {
    const lane = this.lanes.get(message.conversation_id);
    const head = lane?.[0];
    if (!head || head.messageId !== message.message_id || head.writtenAt === 0) return;
    if (head.type === "edit_message" && message.deleted_at) return;
    if (head.type === "delete_message" && !message.deleted_at) return;
    this.settle(head, message);
  }
  /** A `reaction` event: the answer of the reaction in flight on that
   * message, if it is the reactor's (`me`) with that emoji and action. */
  reacted(event, me) {
    const head = this.lanes.get(`${event.conversation_id}\0${event.message_id}`)?.[0];
    if (!head || head.writtenAt === 0 || event.user_id !== me) return;
    if (head.emoji !== event.emoji || head.action !== event.action) return;
    this.settle(head, event);
  }
  /** The choice of the vote in flight on that poll that a `poll_updated`
   * answers (`me`: this client's user), if one does. */
  voteAnswered(event, me) {
    const head = this.lanes.get(`${event.conversation_id}\0${event.message_id}\0vote`)?.[0];
    if (!head || head.writtenAt === 0 || !answersVote(event, head.optionIds, me)) return void 0;
    return head.optionIds;
  }
  /** A `poll_updated` event: the answer of the vote in flight on that
   * poll, if it can be (`voteAnswered`). */
  polled(event, me) {
    if (!this.voteAnswered(event, me)) return;
    this.settle(this.lanes.get(`${event.conversation_id}\0${event.message_id}\0vote`)[0], event);
  }
  /** An `error` frame: whether it answered a command here, and if so
   * whether that command is `settled` (refused for good) or `retrying`. */
  refused(frame) {
    const conversationId = frame.conversation_id;
    if (!conversationId) return void 0;
    if (frame.request_type === "ack_read" || frame.request_type === "ack_delivered") {
      const kind = frame.request_type === "ack_read" ? "read" : "delivered";
      const thread = kind === "read" ? frame.message_id ?? void 0 : void 0;
      const written = this.written.get(key(kind, conversationId, thread));
      if (!written || onRefusal(frame.code, 1).final) return void 0;
      written.retryAt = Date.now() + 1e3;
      this.host.busy();
      return "retrying";
    }
    const perMessage = frame.request_type === "react" || frame.request_type === "vote";
    const lane = perMessage ? frame.message_id ? laneOf({ type: frame.request_type, conversationId, messageId: frame.message_id }) : void 0 : conversationId;
    const head = lane === void 0 ? void 0 : this.lanes.get(lane)?.[0];
    if (!head || head.type !== frame.request_type) return void 0;
    head.answers += 1;
    const next = onRefusal(frame.code, head.answers);
    if (next.final) {
      this.settle(head, CommandError.refused(head.type, conversationId, frame));
      return "settled";
    }
    head.retryAt = Date.now() + next.delayMs;
    return "retrying";
  }
  /** A connection opened: the first edit or delete of each
   * conversation, the first reaction of each message, the first vote of
   * each poll, and every waiting mark go. */
  writeAll() {
    for (const lane of this.lanes.values()) {
      lane[0].retryAt = 0;
      this.writeUpdate(lane[0]);
    }
    for (const k of [...this.marks.keys()]) this.writeMark(k);
  }
  /** The connection ended: what is in flight goes again on the next one,
   * and so do marks written just before (the server may not have stored
   * them yet). */
  lost() {
    for (const lane of this.lanes.values()) lane[0].writtenAt = 0;
    const recent = Date.now() - MARK_WINDOW_MS;
    for (const [k, w] of this.written) {
      if (w.at < recent || this.marks.has(k)) continue;
      this.marks.set(k, { seq: w.seq, waiters: [] });
    }
  }
  /** Writes again what is overdue or due after a refusal, and gives up
   * what waited too long; says whether anything still waits. */
  tick(now, open) {
    let busy = false;
    for (const lane of [...this.lanes.values()]) {
      const head = lane[0];
      const giveUp = this.options.giveUpAfterMs;
      if (giveUp !== void 0 && now >= head.createdAt + giveUp) {
        const waited = Math.round((now - head.createdAt) / 1e3);
        this.settle(head, new CommandError(head.type, head.conversationId, "timeout", `not answered after ${waited} s`));
        busy = true;
        continue;
      }
      busy = true;
      if (!open) continue;
      if (head.retryAt) {
        if (now >= head.retryAt) {
          head.retryAt = 0;
          this.writeUpdate(head);
        }
      } else if (head.writtenAt <= now - this.options.resendAfterMs) {
        this.writeUpdate(head);
      }
    }
    for (const [k, w] of this.written) {
      if (!w.retryAt) continue;
      busy = true;
      if (!open || now < w.retryAt) continue;
      w.retryAt = 0;
      this.written.delete(k);
      if (!this.marks.has(k)) this.marks.set(k, { seq: w.seq, waiters: [] });
      this.writeMark(k);
    }
    return busy;
  }
  /** What waits, for the store. */
  records() {
    const out = [];
    for (const lane of this.lanes.values()) {
      for (const u of lane) {
        if (u.type === "react") {
          out.push({
            type: "react",
            conversation_id: u.conversationId,
            message_id: u.messageId,
            emoji: u.emoji,
            action: u.action,
            created_at: u.createdAt
          });
          continue;
        }
        if (u.type === "vote") {
          out.push({
            type: "vote",
            conversation_id: u.conversationId,
            message_id: u.messageId,
            option_ids: [...u.optionIds],
            created_at: u.createdAt
          });
          continue;
        }
        out.push({
          type: u.type,
          conversation_id: u.conversationId,
          message_id: u.messageId,
          ...u.content ? { content: u.content } : {},
          ...u.custom ? { custom: u.custom } : {},
          created_at: u.createdAt
        });
      }
    }
    for (const [k, m] of this.marks) {
      const [kind, conversationId, threadId] = parts(k);
      out.push({
        type: kind === "read" ? "ack_read" : "ack_delivered",
        conversation_id: conversationId,
        seq: m.seq,
        ...threadId ? { thread_id: threadId } : {}
      });
    }
    return out;
  }
  /** Takes back stored commands; their outcome is told by the `command`
   * event (nobody holds their promise any more). */
  restore(records) {
    for (const r of records) {
      if (r.type === "ack_read" || r.type === "ack_delivered") {
        void this.mark(r.type === "ack_read" ? "read" : "delivered", r.conversation_id, r.seq, r.thread_id);
        continue;
      }
      if (r.type !== "edit_message" && r.type !== "delete_message" && r.type !== "react" && r.type !== "vote") continue;
      this.enqueue({
        type: r.type,
        conversationId: r.conversation_id,
        messageId: r.message_id,
        content: r.type === "react" || r.type === "vote" ? void 0 : r.content,
        ...r.type !== "react" && r.type !== "vote" && r.custom ? { custom: r.custom } : {},
        ...r.type === "react" ? { emoji: r.emoji, action: r.action } : {},
        ...r.type === "vote" ? { optionIds: [...r.option_ids] } : {},
        createdAt: r.created_at,
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: []
      });
    }
  }
  /** Forgets everything (the stored state was someone else's). */
  clear() {
    this.lanes.clear();
    this.marks.clear();
    this.written.clear();
  }
  enqueue(u) {
    const name = laneOf(u);
    const lane = this.lanes.get(name);
    if (lane) lane.push(u);
    else this.lanes.set(name, [u]);
    this.host.changed();
    this.host.busy();
    if (!lane) this.writeUpdate(u);
  }
  writeUpdate(u) {
    const frame = u.type === "edit_message" ? {
      type: "edit_message",
      conversation_id: u.conversationId,
      message_id: u.messageId,
      content: u.content,
      ...u.custom ? { custom: u.custom } : {}
    } : u.type === "delete_message" ? { type: "delete_message", conversation_id: u.conversationId, message_id: u.messageId } : u.type === "react" ? { type: "react", conversation_id: u.conversationId, message_id: u.messageId, emoji: u.emoji, action: u.action } : { type: "vote", conversation_id: u.conversationId, message_id: u.messageId, option_ids: [...u.optionIds] };
    if (this.host.write(frame)) u.writtenAt = Date.now();
  }
  writeMark(k) {
    const m = this.marks.get(k);
    if (!m) return;
    const [kind, conversationId, threadId] = parts(k);
    const frame = kind === "read" ? { type: "ack_read", conversation_id: conversationId, seq: m.seq, ...threadId ? { thread_id: threadId } : {} } : { type: "ack_delivered", conversation_id: conversationId, seq: m.seq };
    if (!this.host.write(frame)) return;
    this.marks.delete(k);
    const before = this.written.get(k);
    this.written.set(k, { seq: Math.max(m.seq, before?.seq ?? 0), at: Date.now(), retryAt: 0 });
    this.host.changed();
    for (const resolve of m.waiters) resolve();
  }
  settle(u, outcome) {
    const name = laneOf(u);
    const lane = this.lanes.get(name);
    if (!lane || lane[0] !== u) return;
    lane.shift();
    if (lane.length === 0) this.lanes.delete(name);
    this.host.changed();
    const failed = outcome instanceof CommandError;
    for (const w of u.waiters) {
      if (failed) w.reject(outcome);
      else w.resolve(outcome);
    }
    this.host.settled({
      type: u.type,
      conversation_id: u.conversationId,
      message_id: u.messageId,
      outcome: failed ? "failed" : "done",
      ...failed ? { error: outcome } : u.type === "react" ? { reaction: outcome } : u.type === "vote" ? { poll: outcome } : { message: outcome }
    });
    if (lane.length) this.writeUpdate(lane[0]);
  }
};

// src/liveness.ts
var Liveness = class {
  constructor(options) {
    __publicField(this, "options", options);
    __publicField(this, "idle");
    __publicField(this, "deadline");
  }
  /** Gives a connection being opened `ms` to open. */
  expect(ms) {
    this.stop();
    this.deadline = unref(setTimeout(() => this.expire(), ms));
  }
  /** Something arrived: the connection lives, and the next ping waits for
   * a full interval of silence again. */
  heard() {
    this.stop();
    this.idle = unref(setTimeout(() => this.probe(), this.options.intervalMs));
  }
  stop() {
    clearTimeout(this.idle);
    clearTimeout(this.deadline);
    this.idle = void 0;
    this.deadline = void 0;
  }
  probe() {
    this.idle = void 0;
    this.options.ping();
    this.deadline = unref(setTimeout(() => this.expire(), this.options.timeoutMs));
  }
  expire() {
    this.stop();
    this.options.dead();
  }
};
function unref(timer) {
  timer.unref?.();
  return timer;
}

// src/connection.ts
var FINAL_CLOSE_CODES = /* @__PURE__ */ new Set([4004]);
var Connection = class {
  constructor(options, tokens, handlers) {
    __publicField(this, "options", options);
    __publicField(this, "tokens", tokens);
    __publicField(this, "handlers", handlers);
    __publicField(this, "socket");
    __publicField(this, "liveness");
    __publicField(this, "onOffline", () => this.dropped(this.socket));
    __publicField(this, "onOnline", () => this.cameOnline());
    __publicField(this, "attempt", 0);
    __publicField(this, "stopped", true);
    __publicField(this, "wasOpen", false);
    __publicField(this, "reconnectTimer");
    __publicField(this, "refreshTimer");
    __publicField(this, "current", "closed");
    this.liveness = new Liveness({
      intervalMs: options.pingIntervalMs ?? 1e4,
      timeoutMs: options.pongTimeoutMs ?? 5e3,
      ping: () => this.write({ type: "ping" }),
      dead: () => this.dropped(this.socket)
    });
  }
  get status() {
    return this.current;
  }
  get isOpen() {
    return this.socket?.readyState === 1 && this.current === "open";
  }
  connect() {
    this.stopped = false;
    browserWindow()?.addEventListener("offline", this.onOffline);
    browserWindow()?.addEventListener("online", this.onOnline);
    void this.open();
  }
  close() {
    this.stopped = true;
    browserWindow()?.removeEventListener("offline", this.onOffline);
    browserWindow()?.removeEventListener("online", this.onOnline);
    this.liveness.stop();
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = void 0;
    clearTimeout(this.refreshTimer);
    const socket = this.socket;
    this.socket = void 0;
    socket?.close(1e3);
    if (this.wasOpen) {
      this.wasOpen = false;
      this.handlers.lost();
    }
    this.setStatus("closed");
  }
  /** Writes a frame if the connection is open; says whether it did. */
  write(frame) {
    if (!this.isOpen) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }
  setStatus(status) {
    if (this.current === status) return;
    this.current = status;
    this.handlers.status(status);
  }
  async open() {
    if (this.stopped) return;
    this.setStatus(this.attempt === 0 ? "connecting" : "reconnecting");
    let token;
    try {
      token = this.attempt > 0 && this.tokens.refreshable ? await this.tokens.refresh() : await this.tokens.get();
      if (!await this.handlers.prepare()) throw new Error("not now");
    } catch {
      this.retry();
      return;
    }
    if (this.stopped || this.socket) return;
    const url = new URL("/v1/ws", this.options.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    let socket;
    if (this.options.tokenIn === "query") {
      url.searchParams.set("token", token);
      socket = new this.options.WebSocket(url.toString());
    } else {
      socket = new this.options.WebSocket(url.toString(), ["switchboard.v1", `switchboard.token.${token}`]);
    }
    this.socket = socket;
    this.liveness.expect(this.options.connectTimeoutMs ?? 1e4);
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.liveness.heard();
      this.attempt = 0;
      this.wasOpen = true;
      this.setStatus("open");
      this.scheduleRefresh();
      this.handlers.opened();
    };
    socket.onmessage = (event) => {
      if (this.socket !== socket) return;
      this.liveness.heard();
      if (typeof event.data !== "string") return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      this.handlers.frame(frame);
    };
    socket.onclose = (event) => {
      if (this.socket === socket && event.code !== void 0 && FINAL_CLOSE_CODES.has(event.code)) {
        this.close();
        this.handlers.ended(event.code, event.reason ?? "");
        return;
      }
      this.dropped(socket);
    };
    socket.onerror = () => {
    };
  }
  /** The connection ended, or is taken for dead (no answer to a ping,
   * not open in time, the browser went offline): it is let go at once,
   * without waiting for a closing handshake a dead peer never answers,
   * and a new one is made. */
  dropped(socket) {
    if (!socket || this.socket !== socket) return;
    this.socket = void 0;
    this.liveness.stop();
    clearTimeout(this.refreshTimer);
    socket.onopen = socket.onmessage = socket.onclose = null;
    socket.onerror = () => {
    };
    try {
      if (socket.terminate) socket.terminate();
      else socket.close();
    } catch {
    }
    if (this.wasOpen) {
      this.wasOpen = false;
      this.handlers.lost();
    }
    this.retry();
  }
  retry() {
    if (this.stopped) return;
    this.setStatus("reconnecting");
    const min = this.options.reconnect?.minDelayMs ?? 250;
    const max = this.options.reconnect?.maxDelayMs ?? 1e4;
    const bound = Math.min(max, min * 2 ** this.attempt);
    this.attempt += 1;
    const wait = Math.random() * bound;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = void 0;
      void this.open();
    }, wait);
  }
  /** The network is back: a reconnect waiting out its back-off goes now. */
  cameOnline() {
    if (this.stopped || this.reconnectTimer === void 0) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = void 0;
    void this.open();
  }
  /** Renews the session's token shortly before it expires. */
  scheduleRefresh() {
    clearTimeout(this.refreshTimer);
    const expires = this.tokens.expiresAt();
    if (expires === void 0 || !this.tokens.refreshable) return;
    const before = this.options.refreshBeforeMs ?? 6e4;
    const wait = Math.max(1e3, expires - Date.now() - before);
    this.refreshTimer = setTimeout(async () => {
      try {
        const token = await this.tokens.refresh();
        this.write({ type: "refresh", token });
      } catch {
      }
      this.scheduleRefresh();
    }, wait);
  }
};
function browserWindow() {
  const w = globalThis.window;
  return typeof w?.addEventListener === "function" ? w : void 0;
}

// src/conversation.ts
function policyOf(p) {
  return {
    slow_mode_secs: p.slow_mode_secs ?? 0,
    retention_days: p.retention_days ?? null,
    disappearing_secs: p.disappearing_secs ?? null,
    frozen: p.frozen === true
  };
}
function mentionsUser(message, user) {
  if (!user) return false;
  return message.mention_all === true || (message.mentions ?? []).includes(user);
}
var PARTICIPANTS = 10;
var ConversationState = class {
  constructor(conversationId) {
    __publicField(this, "conversationId", conversationId);
    /** By `message_id`: a message seen twice (a replay, a resend) is one. */
    __publicField(this, "byId", /* @__PURE__ */ new Map());
    __publicField(this, "sorted", []);
    __publicField(this, "main");
    __publicField(this, "threads");
    __publicField(this, "seqs", /* @__PURE__ */ new Set());
    /** The highest `seq` up to which every message has been seen. A
     * conversation first met by a live message starts from there: what
     * came before is history (`Rest.history`), not a gap. */
    __publicField(this, "contiguousSeq", 0);
    /** The highest `seq` seen at all. */
    __publicField(this, "highestSeq", 0);
    /** Per member: the highest `seq` delivered to and read by them. */
    __publicField(this, "receipts", /* @__PURE__ */ new Map());
    /** Per member typing now: when their `start` runs out (ms). */
    __publicField(this, "typing", /* @__PURE__ */ new Map());
    /** Per member, their role (v1.1): from `GET /v1/conversations/{id}`
     * (`client.rest.conversation`, `changeRole`), then kept current by the
     * conversation's membership and `role_changed` messages. Empty until
     * one of those says. */
    __publicField(this, "roles", /* @__PURE__ */ new Map());
    /** Per member: the `seq` their role is known as of (older news is
     * ignored: history comes newest first). */
    __publicField(this, "roleSeqs", /* @__PURE__ */ new Map());
    /** Per thread root: the newest `last_reply_at` (ms) of a summary the
     * server gave; replies up to it are counted in it. */
    __publicField(this, "threadStamps", /* @__PURE__ */ new Map());
    __publicField(this, "pinList", []);
    /** Per message: the `seq` of the newest pin or unpin applied. */
    __publicField(this, "pinSeqs", /* @__PURE__ */ new Map());
    __publicField(this, "policyNow");
    /** The `seq` the policy is known as of. */
    __publicField(this, "policySeq", 0);
    __publicField(this, "out", /* @__PURE__ */ new Map());
  }
  /** What this client sent here that is not stored yet, in the order it
   * was made: `pending` and `failed` messages (see `OutgoingMessage`).
   * Once stored, a message is in `messages` instead. */
  get outgoing() {
    return [...this.out.values()];
  }
  /** Tracks one of this client's messages (the client calls this). */
  track(message, present) {
    if (present) this.out.set(message.client_msg_id, message);
    else this.out.delete(message.client_msg_id);
  }
  /** Every message, thread replies included, in `seq` order. */
  get messages() {
    if (!this.sorted) this.sorted = [...this.byId.values()].sort((a, b) => a.seq - b.seq);
    return this.sorted;
  }
  /** The main timeline: every message but thread replies, in `seq`
   * order (a thread's root is here, with its `thread` summary). */
  get timeline() {
    this.main ?? (this.main = this.messages.filter((m) => !m.thread_id));
    return this.main;
  }
  /** The replies of one thread known here, in `seq` order (the root is
   * `get(rootId)`; `rest.threadHistory` reads the rest). */
  thread(rootId) {
    if (!this.threads) {
      this.threads = /* @__PURE__ */ new Map();
      for (const m of this.messages) {
        if (!m.thread_id) continue;
        const replies = this.threads.get(m.thread_id);
        if (replies) replies.push(m);
        else this.threads.set(m.thread_id, [m]);
      }
    }
    return this.threads.get(rootId) ?? [];
  }
  get(messageId) {
    return this.byId.get(messageId);
  }
  /** Adds a new message; false when it is one already known (by id).
   * `sentHere`: the message is this client's own, made from its `ack`. */
  add(message, sentHere = false) {
    if (this.byId.has(message.message_id)) return false;
    if (this.byId.size === 0 && this.contiguousSeq === 0) this.contiguousSeq = message.seq - 1;
    this.byId.set(message.message_id, message);
    this.seqs.add(message.seq);
    this.changed();
    this.highestSeq = Math.max(this.highestSeq, message.seq);
    this.advance();
    this.receipt(message.sender_id, "read", message.seq);
    if (message.thread && !sentHere) this.stampThread(message);
    if (message.thread_id) this.countReply(message, sentHere);
    if (message.content?.kind === "system") this.systemEvent(message);
    return true;
  }
  /** Replaces a message with its edited or deleted self, or the same
   * version with its link previews (v1.3), or adds it; says whether
   * anything changed. `from`: `"store"` for a message read
   * for this reader (history, a replay), whose reactions' `me` is this
   * user's; `"event"` for a `message_updated`, which is the same for
   * every member, so the `me` known here stays. Takes a message of the
   * REST answers (`rest.history`, its generated type) as it is. */
  update(stored, from = "store") {
    const message = stored;
    const known = this.byId.get(message.message_id);
    if (!known) return this.add(message);
    const stamp = (m) => Date.parse(m.deleted_at ?? m.edited_at ?? m.created_at);
    if (known.deleted_at && !message.deleted_at) return false;
    const sameEdit = (known.edited_at ?? null) === (message.edited_at ?? null) && (known.deleted_at ?? null) === (message.deleted_at ?? null);
    if (!sameEdit && stamp(message) < stamp(known)) return false;
    if (message.thread) this.stampThread(message);
    const merged = merge(known, message, from);
    if (sameVersion(known, merged)) return false;
    this.byId.set(message.message_id, merged);
    this.changed();
    return true;
  }
  /** Applies a `reaction` event to its message (if known here): the
   * counts are absolute (the event may stand for several reactions);
   * `me` follows the reactions of `me` (this client's user). Says
   * whether anything changed. */
  reacted(event, me) {
    const m = this.byId.get(event.message_id);
    if (!m || m.deleted_at) return false;
    const known = m.reactions ?? [];
    const next = [];
    for (const r of known) {
      const count = event.counts[r.emoji] ?? 0;
      if (count > 0) next.push({ emoji: r.emoji, count, me: r.me ?? false });
    }
    for (const [emoji, count] of Object.entries(event.counts)) {
      if (count > 0 && !known.some((r) => r.emoji === emoji)) next.push({ emoji, count, me: false });
    }
    if (me !== void 0 && event.user_id === me) {
      const mine = next.find((r) => r.emoji === event.emoji);
      if (mine) mine.me = event.action === "add";
    }
    if (JSON.stringify(next) === JSON.stringify(known)) return false;
    this.byId.set(m.message_id, { ...m, reactions: next });
    this.changed();
    return true;
  }
  /** Whether this client's user reacted to a message with `emoji`. */
  reactedWith(messageId, emoji) {
    return this.byId.get(messageId)?.reactions?.some((r) => r.emoji === emoji && r.me) ?? false;
  }
  /** Applies a `poll_updated` event to its poll (v1.3, if known here):
   * `counts`, `closed` and `voters` as the event says. `me` (the
   * reader's own choice; the event has none) is `mine` when the event
   * answers this user's vote (`user`), else what the poll's voters show
   * of `user`, else what was known. Says whether anything changed. */
  pollUpdated(event, user, mine) {
    const m = this.byId.get(event.message_id);
    const poll = pollOf(m);
    if (!m || !poll || m.deleted_at) return false;
    const known = m.poll_results ?? freshResults(poll);
    const me = mine ? inPollOrder(poll, mine) : choiceAfter(poll, event, user, known.me ?? []);
    const next = {
      counts: { ...event.counts },
      closed: event.closed,
      ...event.voters ? { voters: event.voters } : {},
      me
    };
    if (JSON.stringify(next) === JSON.stringify(m.poll_results ?? null)) return false;
    this.byId.set(m.message_id, { ...m, poll_results: next });
    this.changed();
    return true;
  }
  /** Sets this user's own choice in a poll (v1.3): the client does this
   * for a vote sent over REST (`rest.vote`), whose results come as
   * `poll_updated`. Says whether it changed. */
  setVote(messageId, optionIds) {
    const m = this.byId.get(messageId);
    const poll = pollOf(m);
    if (!m || !poll || m.deleted_at) return false;
    const results = m.poll_results ?? freshResults(poll);
    const me = inPollOrder(poll, optionIds);
    if (JSON.stringify(me) === JSON.stringify(results.me ?? [])) return false;
    this.byId.set(m.message_id, { ...m, poll_results: { ...results, me } });
    this.changed();
    return true;
  }
  /** The options this client's user chose in a poll (v1.3), in the
   * poll's order; empty when they have not voted (or it is no poll). */
  votedFor(messageId) {
    return this.byId.get(messageId)?.poll_results?.me ?? [];
  }
  /** The pinned messages, newest pin first. */
  get pins() {
    return this.pinList;
  }
  isPinned(messageId) {
    return this.pinList.some((p) => p.message_id === messageId);
  }
  /** Takes the pins as `GET /v1/conversations/{id}/pins` lists them (the
   * client does this for `rest.pins`). */
  setPins(pins) {
    for (const p of this.pinList) this.pinSeqs.set(p.message_id, Math.max(this.pinSeqs.get(p.message_id) ?? 0, this.highestSeq));
    this.pinList = pins.map((p) => ({ message_id: p.message_id, by: p.by, pinned_at: p.pinned_at }));
    for (const p of this.pinList) this.pinSeqs.set(p.message_id, Math.max(this.pinSeqs.get(p.message_id) ?? 0, this.highestSeq));
  }
  /** A pin or unpin (a `pins_changed` event, a `message_pinned` or
   * `message_unpinned` message with its `seq`); says whether the pins
   * changed. One older than what is known of that message is ignored. */
  pinChanged(messageId, action, by, at = (/* @__PURE__ */ new Date()).toISOString(), seq = this.highestSeq) {
    if (seq < (this.pinSeqs.get(messageId) ?? 0)) return false;
    this.pinSeqs.set(messageId, seq);
    const pinned = this.isPinned(messageId);
    if (action === "pin") {
      if (pinned) return false;
      this.pinList = [{ message_id: messageId, by, pinned_at: at }, ...this.pinList].sort(
        (a, b) => Date.parse(b.pinned_at) - Date.parse(a.pinned_at)
      );
      return true;
    }
    if (!pinned) return false;
    this.pinList = this.pinList.filter((p) => p.message_id !== messageId);
    return true;
  }
  /** Slow mode, retention and disappearing messages (v1.2): from the
   * conversation object (`client.rest.conversation`,
   * `updateConversation`), then kept current by `conversation_updated`
   * messages. Undefined until one of those says. */
  get policy() {
    return this.policyNow;
  }
  /** Takes the policy as the conversation object carries it, as of
   * `asOfSeq` (its `last_seq`): a `conversation_updated` message after it
   * is newer. Says whether it changed. */
  setPolicy(policy, asOfSeq) {
    if (asOfSeq < this.policySeq) return false;
    this.policySeq = asOfSeq;
    const next = policyOf(policy);
    if (this.policyNow && samePolicy(this.policyNow, next)) return false;
    this.policyNow = next;
    return true;
  }
  /** Sets or clears `blocked_sender` on the messages of `sender` (the
   * reader blocked or unblocked them, v1.2); says whether any changed. */
  flagSender(sender, blocked) {
    return this.reflag((user) => user === sender ? blocked : void 0);
  }
  /** Sets `blocked_sender` on every message as `blocked(sender)` says
   * (undefined: left as it is); says whether any changed. */
  reflag(blocked) {
    let changed = false;
    for (const m of this.byId.values()) {
      const flag = blocked(m.sender_id);
      if (flag === void 0 || m.blocked_sender === true === flag) continue;
      this.byId.set(m.message_id, withBlockedFlag(m, flag));
      changed = true;
    }
    if (changed) this.changed();
    return changed;
  }
  /** A member's role, when known. */
  roleOf(userId) {
    return this.roles.get(userId);
  }
  /** Takes the members' roles as `GET /v1/conversations/{id}` lists them
   * (`asOfSeq`: its `last_seq`); the client does this for the REST
   * answers it sees. */
  setMembers(members, asOfSeq) {
    const listed = new Set(members.map((m) => m.user_id));
    for (const user of [...this.roles.keys()]) {
      if (!listed.has(user) && (this.roleSeqs.get(user) ?? 0) <= asOfSeq) this.roles.delete(user);
    }
    for (const m of members) {
      if ((this.roleSeqs.get(m.user_id) ?? 0) > asOfSeq) continue;
      this.roles.set(m.user_id, m.role ?? "member");
      this.roleSeqs.set(m.user_id, asOfSeq);
    }
  }
  /** Whether a `seq` is missing below the highest seen. */
  get hasGap() {
    return this.contiguousSeq < this.highestSeq;
  }
  /** Moves a member's mark forward (marks never go back). */
  receipt(userId, kind, seq) {
    const marks = this.receipts.get(userId) ?? { delivered: 0, read: 0 };
    marks[kind] = Math.max(marks[kind], seq);
    if (kind === "read") marks.delivered = Math.max(marks.delivered, seq);
    this.receipts.set(userId, marks);
  }
  /** Records a typing frame; returns when it runs out, if it started. */
  setTyping(userId, state, expiresInMs, now = Date.now()) {
    if (state === "stop") {
      this.typing.delete(userId);
      return void 0;
    }
    const until = now + expiresInMs;
    this.typing.set(userId, until);
    return until;
  }
  /** Users typing at `now`. */
  typingUsers(now = Date.now()) {
    return [...this.typing].filter(([, until]) => until > now).map(([user]) => user);
  }
  /** Says that everything up to `seq` is known (a replay ended there,
   * or the app loaded that history). */
  caughtUpTo(seq) {
    this.contiguousSeq = Math.max(this.contiguousSeq, seq);
    this.highestSeq = Math.max(this.highestSeq, seq);
    this.advance();
  }
  /** The newest `limit` messages and the cursors, for the store. */
  snapshot(limit) {
    const messages = this.messages;
    return {
      conversation_id: this.conversationId,
      contiguous_seq: this.contiguousSeq,
      highest_seq: this.highestSeq,
      messages: messages.slice(Math.max(0, messages.length - limit)),
      receipts: [...this.receipts].map(([user, marks]) => [user, { ...marks }]),
      roles: [...this.roles],
      pins: this.pinList.map((p) => ({ ...p })),
      ...this.policyNow ? { policy: { ...this.policyNow } } : {}
    };
  }
  /** Takes back a stored state (merged with what is known already). */
  restore(snapshot) {
    const asOf = snapshot.highest_seq;
    if (snapshot.roles) this.setMembers(snapshot.roles.map(([user_id, role]) => ({ user_id, role })), asOf);
    if (snapshot.pins && this.pinList.length === 0) {
      this.pinList = snapshot.pins.map((p) => ({ ...p }));
      for (const p of this.pinList) this.pinSeqs.set(p.message_id, Math.max(this.pinSeqs.get(p.message_id) ?? 0, asOf));
    }
    if (snapshot.policy) this.setPolicy(snapshot.policy, asOf);
    for (const m of snapshot.messages) this.update(m);
    this.caughtUpTo(snapshot.contiguous_seq);
    this.highestSeq = Math.max(this.highestSeq, snapshot.highest_seq);
    for (const [user, marks] of snapshot.receipts) {
      this.receipt(user, "delivered", marks.delivered);
      this.receipt(user, "read", marks.read);
    }
  }
  changed() {
    this.sorted = void 0;
    this.main = void 0;
    this.threads = void 0;
  }
  advance() {
    while (this.seqs.has(this.contiguousSeq + 1)) this.contiguousSeq += 1;
  }
  stampThread(root) {
    const at = Date.parse(root.thread.last_reply_at);
    if (at > (this.threadStamps.get(root.message_id) ?? -Infinity)) this.threadStamps.set(root.message_id, at);
  }
  /** A new reply counts in its root's `thread` summary, unless a summary
   * the server gave is as new as it (the root was read after the reply
   * was stored, so it counts it already). This client's own reply, made
   * from its ack with this device's clock, always counts. */
  countReply(reply, sentHere) {
    const root = this.byId.get(reply.thread_id);
    if (!root) return;
    const t = root.thread ?? void 0;
    const at = Date.parse(reply.created_at);
    if (!sentHere && at <= (this.threadStamps.get(root.message_id) ?? -Infinity)) return;
    this.byId.set(root.message_id, {
      ...root,
      thread: {
        reply_count: (t?.reply_count ?? 0) + 1,
        last_reply_at: t && Date.parse(t.last_reply_at) > at ? t.last_reply_at : reply.created_at,
        participants: [reply.sender_id, ...(t?.participants ?? []).filter((u) => u !== reply.sender_id)].slice(0, PARTICIPANTS)
      }
    });
  }
  /** What a system message says of roles, membership, pins, bans and
   * the policy. */
  systemEvent(m) {
    const c = m.content;
    if (c?.kind !== "system") return;
    const users = c.user_ids ?? [];
    const setRole = (user, role) => {
      if ((this.roleSeqs.get(user) ?? 0) >= m.seq) return;
      this.roleSeqs.set(user, m.seq);
      if (role) this.roles.set(user, role);
      else this.roles.delete(user);
    };
    switch (c.event) {
      case "members_added":
        if (this.roles.size) {
          for (const u of users) if (!this.roles.has(u)) setRole(u, "member");
        }
        return;
      case "members_removed":
      // A ban takes the user out (v1.2): its message is the only one.
      case "member_banned":
        for (const u of users) setRole(u, void 0);
        return;
      case "conversation_updated":
        if (c.policy) this.setPolicy(policyOf(c.policy), m.seq);
        return;
      case "role_changed":
        if (c.role) for (const u of users) setRole(u, c.role);
        return;
      case "message_pinned":
      case "message_unpinned":
        if (c.message_id) this.pinChanged(c.message_id, c.event === "message_pinned" ? "pin" : "unpin", c.actor, m.created_at, m.seq);
        return;
      default:
        return;
    }
  }
};
function samePolicy(a, b) {
  return a.slow_mode_secs === b.slow_mode_secs && a.retention_days === b.retention_days && a.disappearing_secs === b.disappearing_secs && a.frozen === b.frozen;
}
function withBlockedFlag(m, blocked) {
  const { blocked_sender: _flag, ...rest } = m;
  return blocked ? { ...rest, blocked_sender: true } : rest;
}
function pollOf(m) {
  return m?.content?.kind === "poll" ? m.content : void 0;
}
function merge(known, message, from) {
  if (message.deleted_at) return { ...message, reactions: [] };
  let reactions = message.reactions ?? known.reactions;
  if (from === "event" && message.reactions) {
    reactions = message.reactions.map((r) => {
      const mine = known.reactions?.find((k) => k.emoji === r.emoji);
      return mine ? { ...r, me: mine.me ?? false } : r;
    });
  }
  let thread = message.thread ?? known.thread;
  if (message.thread && known.thread && Date.parse(known.thread.last_reply_at) > Date.parse(message.thread.last_reply_at)) {
    thread = known.thread;
  }
  let poll_results = message.poll_results ?? known.poll_results;
  if (from === "event" && message.poll_results) {
    poll_results = { ...message.poll_results, me: known.poll_results?.me ?? [] };
  }
  return {
    ...message,
    ...reactions !== void 0 ? { reactions } : {},
    ...thread ? { thread } : {},
    ...poll_results ? { poll_results } : {}
  };
}
function sameVersion(a, b) {
  return a.blocked_sender === true === (b.blocked_sender === true) && (a.edited_at ?? null) === (b.edited_at ?? null) && (a.deleted_at ?? null) === (b.deleted_at ?? null) && JSON.stringify(a.content ?? null) === JSON.stringify(b.content ?? null) && JSON.stringify(a.reactions ?? []) === JSON.stringify(b.reactions ?? []) && JSON.stringify(a.poll_results ?? null) === JSON.stringify(b.poll_results ?? null) && JSON.stringify(a.previews ?? []) === JSON.stringify(b.previews ?? []) && JSON.stringify(a.thread ?? null) === JSON.stringify(b.thread ?? null);
}

// src/emitter.ts
var Emitter = class {
  constructor() {
    __publicField(this, "listeners", /* @__PURE__ */ new Map());
  }
  on(event, listener) {
    let set = this.listeners.get(event);
    if (!set) {
      set = /* @__PURE__ */ new Set();
      this.listeners.set(event, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }
  emit(event, value) {
    for (const listener of this.listeners.get(event) ?? []) {
      try {
        listener(value);
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }
};

// src/conversations.ts
function previewOf(content) {
  if (!content) return null;
  switch (content.kind) {
    case "text":
      return oneLine(content.text);
    case "image":
    case "file":
    case "voice":
      return content.caption ? `[${content.kind}] ${oneLine(content.caption)}` : `[${content.kind}]`;
    case "ciphertext":
      return null;
    case "custom":
      return oneLine(content.fallback_text ?? `[${content.type}]`);
    case "poll":
      return `[poll] ${oneLine(content.question)}`;
    case "system": {
      const users = (content.user_ids ?? []).join(", ");
      if (content.event === "members_added") {
        const joined = content.user_ids?.length === 1 && content.user_ids[0] === content.actor;
        return joined ? `${content.actor} joined` : `${content.actor} added ${users}`;
      }
      if (content.event === "members_removed") {
        const left = content.user_ids?.length === 1 && content.user_ids[0] === content.actor;
        return left ? `${content.actor} left` : `${content.actor} removed ${users}`;
      }
      if (content.event === "role_changed") return `${content.actor} made ${users} ${content.role ?? "member"}`;
      if (content.event === "message_pinned") return `${content.actor} pinned a message`;
      if (content.event === "message_unpinned") return `${content.actor} unpinned a message`;
      if (content.event === "member_banned") return `${content.actor} banned ${users}`;
      if (content.event === "member_unbanned") return `${content.actor} lifted the ban on ${users}`;
      if (content.event === "conversation_updated") return `${content.actor} changed the conversation's settings`;
      return `${content.actor}: ${content.event}`;
    }
    default:
      return null;
  }
}
function oneLine(text) {
  const chars = [...text];
  const line = chars.slice(0, 100).join("").replace(/[\u0000-\u001f\u007f-\u009f]/g, " ");
  return chars.length > 100 ? `${line}\u2026` : line;
}
var activity = (c) => Date.parse(c.last_message?.created_at ?? c.created_at);
var MAX_COUNTED = 999;
var Tally = class {
  constructor(base, upTo) {
    __publicField(this, "base", base);
    __publicField(this, "upTo", upTo);
    __publicField(this, "seqs", []);
  }
  get count() {
    return Math.min(MAX_COUNTED, this.base + this.seqs.length);
  }
  /** The server's count `base` up to `upTo`, and what `before` (this
   * count as it was) holds after that. */
  resume(base, upTo, before) {
    this.base = base;
    this.upTo = upTo;
    this.seqs = before ? before.seqs.filter((s) => s > upTo) : [];
  }
  /** A message after `upTo` that counts. */
  add(seq) {
    if (seq > this.upTo && !this.seqs.includes(seq)) this.seqs.push(seq);
  }
  /** Message `seq`, after the read mark `mark`, counts no more (deleted):
   * one less, whether it was among `seqs` or the server's `base`. */
  remove(seq, mark) {
    if (seq <= mark) return;
    const at = this.seqs.indexOf(seq);
    if (at >= 0) this.seqs.splice(at, 1);
    else if (seq <= this.upTo && this.base > 0) this.base -= 1;
  }
  /** The caller read up to `seq`. Which of the server's count come before
   * it is not known, unless the mark reaches past all of them; those
   * left are at most one per seq after it. */
  read(seq) {
    this.base = seq >= this.upTo ? 0 : Math.min(this.base, this.upTo - seq);
    this.seqs = this.seqs.filter((s) => s > seq);
  }
};
function countsAsUnread(m, me) {
  return m.sender_id !== me && !m.thread_id && !m.deleted_at && m.content != null && m.content.kind !== "system" && m.blocked_sender !== true;
}
var ConversationList = class extends Emitter {
  constructor(source, me) {
    super();
    __publicField(this, "source", source);
    __publicField(this, "me", me);
    __publicField(this, "byId", /* @__PURE__ */ new Map());
    /** The caller's read mark per conversation (`read_seq`). */
    __publicField(this, "readSeq", /* @__PURE__ */ new Map());
    /** Per conversation, its unread messages and unread mentions. */
    __publicField(this, "unread", /* @__PURE__ */ new Map());
    __publicField(this, "mentions", /* @__PURE__ */ new Map());
    /** Per conversation muted until a time: the timer that unmutes it. */
    __publicField(this, "unmute", /* @__PURE__ */ new Map());
    __publicField(this, "sorted");
    __publicField(this, "cursor", null);
    __publicField(this, "more", false);
    __publicField(this, "pages", 0);
    __publicField(this, "restoredOnly", false);
    __publicField(this, "fetching");
    __publicField(this, "paging");
    /** Reads of the list, one after the other: a refresh that overlapped
     * a next page would drop what that page added. */
    __publicField(this, "reads", Promise.resolve());
    /** Conversations being read once (not in the list yet), with the
     * messages that came meanwhile: the answer may predate them. */
    __publicField(this, "looking", /* @__PURE__ */ new Map());
    /** Messages that came while the first page was on its way. */
    __publicField(this, "early", []);
    /** Ids changed by events while a refresh was under way: the newer of
     * the two copies stays. */
    __publicField(this, "touched", /* @__PURE__ */ new Set());
  }
  /** The conversations, most recent activity first (then by id). */
  get items() {
    if (!this.sorted) {
      this.sorted = [...this.byId.values()].sort(
        (a, b) => activity(b) - activity(a) || (a.conversation_id < b.conversation_id ? -1 : a.conversation_id > b.conversation_id ? 1 : 0)
      );
    }
    return this.sorted;
  }
  get(conversationId) {
    return this.byId.get(conversationId);
  }
  /** Whether a page was read (or a stored list restored). */
  get loaded() {
    return this.pages > 0 || this.restoredOnly;
  }
  /** Whether a page was read (or is being read) from the server in this
   * session: a restored list alone is not. */
  get fetched() {
    return this.pages > 0 || this.fetching !== void 0;
  }
  /** Whether pages after those loaded exist (`loadMore`). */
  get hasMore() {
    return this.more;
  }
  /** Unread messages over the conversations loaded. */
  get unreadTotal() {
    let n = 0;
    for (const c of this.byId.values()) n += c.unread_count;
    return n;
  }
  /** Unread mentions of the caller over the conversations loaded. */
  get mentionTotal() {
    let n = 0;
    for (const c of this.byId.values()) n += c.mention_count ?? 0;
    return n;
  }
  /** Reads the first page, unless one was read already in this session. */
  load() {
    if (this.pages > 0) return Promise.resolve();
    return this.refresh();
  }
  /** Reads the list again from its first page, as many pages as are
   * loaded (one at least): a conversation that moved is found where it
   * is now. One refresh at a time; a call during one joins it. */
  refresh() {
    this.fetching ?? (this.fetching = this.inTurn(() => this.fetch()).finally(() => {
      this.fetching = void 0;
    }));
    return this.fetching;
  }
  /** Reads the next page; resolves whether one was read. */
  loadMore() {
    this.paging ?? (this.paging = this.inTurn(() => this.nextPage()).finally(() => {
      this.paging = void 0;
    }));
    return this.paging;
  }
  inTurn(read) {
    const turn = this.reads.then(read);
    this.reads = turn.catch(() => {
    });
    return turn;
  }
  async fetch() {
    const want = Math.max(1, this.pages);
    this.touched = /* @__PURE__ */ new Set();
    const fresh = [];
    let cursor = null;
    let pages = 0;
    try {
      do {
        const page = await this.source.conversationPage(cursor ? { cursor } : {});
        fresh.push(...page.conversations);
        cursor = page.next_cursor ?? null;
        pages += 1;
      } while (cursor && pages < want);
    } catch (e) {
      this.early = [];
      this.emit("error", e);
      throw e;
    }
    const local = new Map(this.byId);
    const tallies = { unread: new Map(this.unread), mentions: new Map(this.mentions) };
    const marks = new Map(this.readSeq);
    this.byId.clear();
    for (const c of fresh) this.put(c);
    for (const id of this.touched) {
      const mine = local.get(id);
      const theirs = this.byId.get(id);
      if (!mine || theirs && mine.last_seq < theirs.last_seq) continue;
      this.put(mine);
      if (!theirs) continue;
      this.unread.get(id)?.resume(theirs.unread_count ?? 0, theirs.last_seq, tallies.unread.get(id));
      this.mentions.get(id)?.resume(theirs.mention_count ?? 0, theirs.last_seq, tallies.mentions.get(id));
      this.readSeq.set(id, Math.max(theirs.read_seq ?? 0, marks.get(id) ?? 0));
      this.readCounts(id, this.readSeq.get(id) ?? 0);
      this.replace(mine);
    }
    this.touched = /* @__PURE__ */ new Set();
    this.cursor = cursor;
    this.more = cursor !== null;
    this.pages = pages;
    this.restoredOnly = false;
    for (const m of this.early.splice(0)) this.message(m);
    this.changed();
  }
  async nextPage() {
    if (this.pages === 0 || this.cursor === null && this.more) await this.fetch();
    if (!this.cursor) return false;
    let page;
    try {
      page = await this.source.conversationPage({ cursor: this.cursor });
    } catch (e) {
      this.emit("error", e);
      throw e;
    }
    for (const c of page.conversations) if (!this.byId.has(c.conversation_id)) this.put(c);
    this.cursor = page.next_cursor ?? null;
    this.more = this.cursor !== null;
    this.pages += 1;
    this.changed();
    return true;
  }
  /** A message new to the client (live, replayed, or the caller's own
   * once stored). */
  message(m) {
    if (!this.loaded) {
      if (this.fetching) this.early.push(m);
      return;
    }
    const c = this.byId.get(m.conversation_id);
    if (!c) {
      const oldest = this.items[this.items.length - 1];
      if (this.more && oldest && Date.parse(m.created_at) < activity(oldest)) return;
      this.lookUp(m);
      return;
    }
    const me = this.me();
    const mine = m.sender_id === me;
    let next = c;
    if (!mine && m.seq > c.last_seq && m.seq > (this.readSeq.get(c.conversation_id) ?? 0)) {
      if (countsAsUnread(m, me)) this.tallyOf(this.unread, c, "unread_count").add(m.seq);
      if (mentionsUser(m, me)) this.tallyOf(this.mentions, c, "mention_count").add(m.seq);
    }
    if (m.seq >= c.last_seq) {
      next = { ...c, last_seq: m.seq, last_message: asListed(m), preview: previewOf(m.content) };
    }
    if (mine) {
      this.readSeq.set(c.conversation_id, Math.max(this.readSeq.get(c.conversation_id) ?? 0, m.seq));
      this.readCounts(c.conversation_id, m.seq);
    }
    const member = this.membership(next, m.content, m.seq >= c.last_seq);
    if (member) this.replace(member);
  }
  /** A message edited or deleted: the preview follows its last message,
   * and a deleted unread one counts no more. */
  updated(m) {
    const c = this.byId.get(m.conversation_id);
    if (!c) return;
    const me = this.me();
    const uncounted = m.deleted_at != null && m.sender_id !== me && !m.thread_id && m.blocked_sender !== true;
    if (uncounted) this.unread.get(c.conversation_id)?.remove(m.seq, this.readSeq.get(c.conversation_id) ?? 0);
    if (c.last_message?.message_id === m.message_id) {
      this.replace({ ...c, last_message: asListed(m), preview: previewOf(m.content) });
    } else if (uncounted) {
      this.replace(c);
    }
  }
  /** The caller read up to `seq` (here, or on another device). */
  read(conversationId, seq) {
    const c = this.byId.get(conversationId);
    if (!c) return;
    const before = this.readSeq.get(conversationId) ?? 0;
    if (seq <= before) return;
    this.readSeq.set(conversationId, seq);
    this.readCounts(conversationId, seq);
    this.replace(c);
  }
  /** The caller's settings of a conversation changed (here, through
   * `rest.setSettings`, or on another device: `settings_changed`). */
  settings(conversationId, settings) {
    clearTimeout(this.unmute.get(conversationId));
    this.unmute.delete(conversationId);
    const c = this.byId.get(conversationId);
    if (!c) return;
    const until = settings.muted_until ? Date.parse(settings.muted_until) : 0;
    const left = until - Date.now();
    const muted = left > 0;
    if (muted && left < 2 ** 31 - 1) {
      const timer = setTimeout(() => {
        this.unmute.delete(conversationId);
        const now = this.byId.get(conversationId);
        if (now?.muted) this.replace({ ...now, muted: false });
      }, left);
      timer.unref?.();
      this.unmute.set(conversationId, timer);
    }
    if (c.notifications === settings.notifications && c.muted === muted) return;
    this.replace({ ...c, notifications: settings.notifications, muted });
  }
  /** A conversation the caller created or was told about (REST answers). */
  conversation(detail) {
    if (!this.loaded) return;
    const me = this.me();
    const members = detail.members.map((m) => m.user_id);
    if (me && !members.includes(me)) {
      this.removed(detail.conversation_id);
      return;
    }
    const mark = detail.read_seq ?? detail.members.find((m) => m.user_id === me)?.read_seq ?? 0;
    const known = this.byId.get(detail.conversation_id);
    const { members: _members, ...rest } = detail;
    const summary = { ...rest, members, ...known ? pickNewer(known, detail) : {} };
    if (known) {
      summary.mention_count = known.mention_count;
      summary.unread_count = known.unread_count;
    } else {
      this.unread.set(detail.conversation_id, new Tally(detail.unread_count ?? 0, detail.last_seq));
      this.mentions.set(detail.conversation_id, new Tally(detail.mention_count ?? 0, detail.last_seq));
    }
    this.readSeq.set(detail.conversation_id, Math.max(this.readSeq.get(detail.conversation_id) ?? 0, mark));
    this.readCounts(detail.conversation_id, this.readSeq.get(detail.conversation_id) ?? 0);
    this.replace(summary);
  }
  /** The caller left the conversation, or was removed. */
  removed(conversationId) {
    if (!this.byId.delete(conversationId)) return;
    this.readSeq.delete(conversationId);
    this.unread.delete(conversationId);
    this.mentions.delete(conversationId);
    clearTimeout(this.unmute.get(conversationId));
    this.unmute.delete(conversationId);
    this.changed();
  }
  /** The newest `limit` items, for the store. */
  snapshot(limit) {
    const items = this.items;
    return { items: items.slice(0, limit), more: this.more || items.length > limit };
  }
  /** Takes back a stored list: shown until the first page is read. */
  restore(snapshot) {
    if (this.pages > 0) return;
    for (const c of snapshot.items) if (!this.byId.has(c.conversation_id)) this.put(c);
    this.more = snapshot.more;
    this.cursor = null;
    this.restoredOnly = true;
    this.changed();
  }
  /** Forgets everything (the stored state was someone else's). */
  clear() {
    this.byId.clear();
    this.readSeq.clear();
    this.unread.clear();
    this.mentions.clear();
    for (const timer of this.unmute.values()) clearTimeout(timer);
    this.unmute.clear();
    this.pages = 0;
    this.cursor = null;
    this.more = false;
    this.restoredOnly = false;
    this.changed();
  }
  put(c) {
    this.byId.set(c.conversation_id, c);
    this.readSeq.set(c.conversation_id, c.read_seq ?? Math.max(0, (c.last_seq ?? 0) - (c.unread_count ?? 0)));
    this.unread.set(c.conversation_id, new Tally(c.unread_count ?? 0, c.last_seq ?? 0));
    this.mentions.set(c.conversation_id, new Tally(c.mention_count ?? 0, c.last_seq ?? 0));
  }
  /** Stores a changed item with its counts from what is tracked. */
  replace(c) {
    const unread = this.unread.get(c.conversation_id)?.count ?? c.unread_count ?? 0;
    const mentions = this.mentions.get(c.conversation_id)?.count ?? c.mention_count ?? 0;
    this.byId.set(
      c.conversation_id,
      unread === c.unread_count && mentions === c.mention_count ? c : { ...c, unread_count: unread, mention_count: mentions }
    );
    this.touched.add(c.conversation_id);
    this.changed();
  }
  tallyOf(tallies, c, field) {
    let t = tallies.get(c.conversation_id);
    if (!t) {
      t = new Tally(c[field] ?? 0, c.last_seq ?? 0);
      tallies.set(c.conversation_id, t);
    }
    return t;
  }
  /** The caller read up to `seq`: what it passed counts no more. */
  readCounts(conversationId, seq) {
    this.unread.get(conversationId)?.read(seq);
    this.mentions.get(conversationId)?.read(seq);
  }
  /** A membership change applied to the item (a ban takes the user
   * out, v1.2), and a change of the settings that affect everyone;
   * undefined when the caller is no longer a member. `newest`: no later
   * message is known (an older settings change is not applied). */
  membership(c, content, newest) {
    if (content?.kind !== "system") return c;
    const users = content.user_ids ?? [];
    if (content.event === "members_added") {
      return { ...c, members: [.../* @__PURE__ */ new Set([...c.members, ...users])] };
    }
    if (content.event === "conversation_updated") {
      if (!newest) return c;
      return {
        ...c,
        ...content.policy ? policyOf(content.policy) : {},
        ...content.custom ? { custom: content.custom } : {},
        ...content.channel ?? {}
      };
    }
    if (content.event === "members_removed" || content.event === "member_banned") {
      const me = this.me();
      if (me && users.includes(me)) {
        this.removed(c.conversation_id);
        return void 0;
      }
      return { ...c, members: c.members.filter((u) => !users.includes(u)) };
    }
    return c;
  }
  /** Reads a conversation the list does not hold, once. */
  lookUp(m) {
    const id = m.conversation_id;
    const waiting = this.looking.get(id);
    if (waiting) {
      waiting.push(m);
      return;
    }
    this.looking.set(id, [m]);
    this.source.conversation(id).then((detail) => {
      this.conversation(detail);
      const came = this.looking.get(id) ?? [];
      this.looking.delete(id);
      if (this.byId.has(id)) for (const m2 of came) this.message(m2);
    }).catch((e) => this.emit("error", e)).finally(() => this.looking.delete(id));
  }
  changed() {
    this.sorted = void 0;
    this.emit("change", this.items);
  }
};
function pickNewer(known, detail) {
  if (known.last_seq <= detail.last_seq) return {};
  return { last_seq: known.last_seq, last_message: known.last_message, preview: known.preview };
}
function asListed(m) {
  return m;
}

// src/persist.ts
var MemoryStore = class {
  constructor() {
    __publicField(this, "records", /* @__PURE__ */ new Map());
  }
  load() {
    return Object.fromEntries([...this.records].map(([k, v]) => [k, structuredClone(v)]));
  }
  write(puts, deletes) {
    for (const k of deletes) this.records.delete(k);
    for (const [k, v] of Object.entries(puts)) this.records.set(k, structuredClone(v));
  }
  clear() {
    this.records.clear();
  }
};
var IndexedDbStore = class {
  constructor(name, factory = globalThis.indexedDB) {
    __publicField(this, "name", name);
    __publicField(this, "db");
    __publicField(this, "factory");
    if (!factory) throw new Error("IndexedDbStore: this environment has no indexedDB (use MemoryStore, or a store of your own)");
    this.factory = factory;
  }
  async load() {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const out = {};
      const request = db.transaction("records", "readonly").objectStore("records").openCursor();
      request.onsuccess = () => {
        const cursor = request.result;
        if (!cursor) {
          resolve(out);
          return;
        }
        out[String(cursor.key)] = cursor.value;
        cursor.continue();
      };
      request.onerror = () => reject(request.error);
    });
  }
  async write(puts, deletes) {
    const db = await this.open();
    await this.change(db, (store) => {
      for (const k of deletes) store.delete(k);
      for (const [k, v] of Object.entries(puts)) store.put(v, k);
    });
  }
  async clear() {
    const db = await this.open();
    await this.change(db, (store) => store.clear());
  }
  change(db, apply) {
    return new Promise((resolve, reject) => {
      const tx = db.transaction("records", "readwrite");
      apply(tx.objectStore("records"));
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  }
  open() {
    this.db ?? (this.db = new Promise((resolve, reject) => {
      const request = this.factory.open(`switchboard:${this.name}`, 1);
      request.onupgradeneeded = () => {
        if (!request.result.objectStoreNames.contains("records")) request.result.createObjectStore("records");
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    }));
    return this.db;
  }
};
var VERSION = 1;
function readRecords(records) {
  const meta = records.meta;
  if (!meta || meta.version !== VERSION) return { meta: void 0, list: void 0, outbox: void 0, conversations: [] };
  const conversations = Object.entries(records).filter(([k]) => k.startsWith("c:")).map(([, v]) => v);
  return {
    meta,
    list: records.list,
    outbox: records.outbox,
    conversations
  };
}
var Persistence = class {
  constructor(store, host, limits = {}, delayMs = 250) {
    __publicField(this, "store", store);
    __publicField(this, "host", host);
    __publicField(this, "delayMs", delayMs);
    __publicField(this, "dirty", /* @__PURE__ */ new Set());
    /** Stored conversations, by when they last changed. */
    __publicField(this, "stored", /* @__PURE__ */ new Map());
    __publicField(this, "timer");
    __publicField(this, "writing", Promise.resolve());
    __publicField(this, "messages");
    __publicField(this, "conversations");
    this.messages = limits.messagesPerConversation ?? 100;
    this.conversations = limits.conversations ?? 50;
  }
  /** Records what was restored as stored (by when it changed). */
  restored(conversations) {
    for (const c of conversations) this.stored.set(c.conversation_id, lastActivity(c));
  }
  conversationChanged(id) {
    this.mark(`c:${id}`, false);
  }
  listChanged() {
    this.mark("list", false);
  }
  outboxChanged() {
    this.mark("outbox", true);
  }
  /** Writes what changed now; resolves once it is in the store. */
  flush() {
    clearTimeout(this.timer);
    this.timer = void 0;
    this.writing = this.writing.then(() => this.writeDirty()).catch(() => {
    });
    return this.writing;
  }
  /** Empties the store (another user's state was in it). */
  clear() {
    this.dirty.clear();
    this.stored.clear();
    this.writing = this.writing.then(() => this.store.clear()).catch(() => {
    });
    return this.writing;
  }
  mark(key2, soon) {
    this.dirty.add(key2);
    if (soon) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.flush(), 0);
    } else {
      this.timer ?? (this.timer = setTimeout(() => void this.flush(), this.delayMs));
    }
  }
  async writeDirty() {
    const identity = this.host.identity();
    if (!identity || this.dirty.size === 0) return;
    const keys = [...this.dirty];
    this.dirty.clear();
    const puts = { meta: { version: VERSION, user: identity.user, device: identity.device } };
    const deletes = [];
    for (const key2 of keys) {
      if (key2 === "outbox") puts.outbox = this.host.outbox();
      else if (key2 === "list") {
        const list = this.host.list(this.conversations);
        if (list) puts.list = list;
      } else {
        const id = key2.slice(2);
        const snapshot = this.host.conversation(id);
        if (!snapshot) continue;
        puts[key2] = snapshot;
        this.stored.set(id, lastActivity(snapshot));
      }
    }
    if (this.stored.size > this.conversations) {
      const keep = new Set(this.host.outbox().sends.map((s) => s.conversation_id));
      const order = [...this.stored].sort((a, b) => a[1] - b[1]);
      for (const [id] of order) {
        if (this.stored.size <= this.conversations) break;
        if (keep.has(id)) continue;
        this.stored.delete(id);
        delete puts[`c:${id}`];
        deletes.push(`c:${id}`);
      }
    }
    try {
      await this.store.write(puts, deletes);
    } catch {
      for (const key2 of keys) this.dirty.add(key2);
    }
  }
  /** The bound on messages each stored conversation keeps. */
  get messagesPerConversation() {
    return this.messages;
  }
};
function lastActivity(c) {
  const last = c.messages[c.messages.length - 1];
  return last ? Date.parse(last.created_at) : 0;
}

// src/previews.ts
function previewsOf(message) {
  return message?.previews ?? [];
}
function onlyPreviewsChanged(known, message) {
  return known !== void 0 && (known.edited_at ?? null) === (message.edited_at ?? null) && (known.deleted_at ?? null) === (message.deleted_at ?? null) && JSON.stringify(previewsOf(known)) !== JSON.stringify(previewsOf(message));
}

// src/rest.ts
var ApiError = class extends Error {
  constructor(status, code, message, retryAfterMs) {
    super(`${status} ${code}: ${message}`);
    __publicField(this, "status", status);
    __publicField(this, "code", code);
    __publicField(this, "retryAfterMs", retryAfterMs);
    this.name = "ApiError";
  }
};
var Rest = class {
  constructor(base, tokens, fetchImpl = globalThis.fetch.bind(globalThis)) {
    __publicField(this, "base", base);
    __publicField(this, "tokens", tokens);
    __publicField(this, "fetchImpl", fetchImpl);
    /** Set by the client: see `RestObserver`. */
    __publicField(this, "observer");
  }
  createConversation(kind, members, title) {
    return this.told(this.json("POST", "/v1/conversations", { kind, members, ...title ? { title } : {} }));
  }
  /** The caller's newest conversations, most recent activity first,
   * each with its preview and unread count: the first page, of the
   * server's default size (`conversationPage` reads on). */
  async conversations() {
    return (await this.conversationPage()).conversations;
  }
  /** One page of the caller's conversations, most recent activity first;
   * pass `next_cursor` back as `cursor` for the next one. A conversation
   * whose activity changes while you page moves to the front: it is
   * never listed twice, and the pages after the move do not hold it (the
   * first page, and its live `message` events, do). A server from before
   * paging answers the whole list as one last page. */
  async conversationPage(page = {}) {
    const query = new URLSearchParams();
    if (page.limit !== void 0) query.set("limit", String(page.limit));
    if (page.cursor !== void 0) query.set("cursor", page.cursor);
    const q = query.size ? `?${query}` : "";
    const body = await this.json(
      "GET",
      `/v1/conversations${q}`
    );
    if (Array.isArray(body)) return { conversations: body, next_cursor: null };
    return { conversations: body.conversations, next_cursor: body.next_cursor ?? null };
  }
  conversation(id) {
    return this.told(this.json("GET", `/v1/conversations/${enc(id)}`));
  }
  /** Adds members; answers the conversation as it is now. */
  addMembers(id, members) {
    return this.told(this.json("POST", `/v1/conversations/${enc(id)}/members`, { members }));
  }
  async removeMember(id, user) {
    await this.empty("DELETE", `/v1/conversations/${enc(id)}/members/${enc(user)}`);
    this.observer?.removed(id, user);
  }
  /** One page of history, newest first; pass `next_before_seq` back as
   * `before_seq` for the page before it. With `thread_id` (v1.1), one
   * thread's (see `threadHistory`). Thread replies take their `seq` in
   * the conversation, so the conversation's history holds them too. */
  history(id, page = {}) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(page)) if (v !== void 0) query.set(k, String(v));
    const q = query.size ? `?${query}` : "";
    return this.json("GET", `/v1/conversations/${enc(id)}/messages${q}`);
  }
  versions(id, messageId) {
    return this.json("GET", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/versions`);
  }
  /** One page of a thread (v1.1): its replies and its root, newest first,
   * in the history format (`next_before_seq` pages back). */
  threadHistory(id, rootId, page = {}) {
    const query = new URLSearchParams({ thread_id: rootId });
    for (const [k, v] of Object.entries(page)) if (v !== void 0) query.set(k, String(v));
    return this.json("GET", `/v1/conversations/${enc(id)}/messages?${query}`);
  }
  /** The threads of a conversation the caller started or replied in
   * (v1.1), most recent reply first, with their unread counts (replies
   * after the caller's thread read mark: `client.markThreadRead`). */
  threads(id) {
    return this.json("GET", `/v1/conversations/${enc(id)}/threads`);
  }
  /** Changes a member's role (v1.1; owners and admins, and only an owner
   * makes owners or changes an owner's role: `403 forbidden` otherwise,
   * `409 conflict` for the last owner or a direct conversation). Answers
   * the conversation after the change. */
  changeRole(id, user, role) {
    return this.told(this.json("PATCH", `/v1/conversations/${enc(id)}/members/${enc(user)}`, { role }));
  }
  /** The caller's own settings of a conversation (v1.1). */
  async settings(id) {
    const settings = await this.json("GET", `/v1/conversations/${enc(id)}/settings`);
    this.observer?.settings?.(id, settings);
    return settings;
  }
  /** Sets the caller's own settings of a conversation (v1.1): the whole
   * object (an absent `muted_until` unmutes). The caller's other devices
   * get `settings_changed`. Answers the settings now. */
  async setSettings(id, settings) {
    const now = await this.json("PUT", `/v1/conversations/${enc(id)}/settings`, settings);
    this.observer?.settings?.(id, now);
    return now;
  }
  /** The pinned messages (v1.1), newest pin first (at most 50). */
  async pins(id) {
    const list = await this.json("GET", `/v1/conversations/${enc(id)}/pins`);
    this.observer?.pins?.(id, list);
    return list;
  }
  /** Pins a message (v1.1; owners and admins, either member of a direct
   * conversation: `403 forbidden` otherwise; at most 50, `409` past it).
   * Every member gets `pins_changed` and a `message_pinned` message. */
  async pin(id, messageId) {
    await this.empty("POST", `/v1/conversations/${enc(id)}/pins`, { message_id: messageId });
    this.observer?.pinned?.(id, messageId, "pin");
  }
  /** Unpins a message (v1.1; who may pin may unpin). */
  async unpin(id, messageId) {
    await this.empty("DELETE", `/v1/conversations/${enc(id)}/pins/${enc(messageId)}`);
    this.observer?.pinned?.(id, messageId, "unpin");
  }
  /** Votes in a poll (v1.3), as the `vote` frame does (`client.vote`),
   * for a client without a socket: replaces the caller's vote with
   * `optionIds` (one unless the poll is `multiple`); empty retracts it.
   * Idempotent. `400` for an option the poll lacks or two in a
   * single-choice poll, `403` while muted, `404` for a poll from before
   * the caller joined, `409` for a closed poll or a deleted message.
   * Every member gets `poll_updated`. */
  async vote(id, messageId, optionIds) {
    const option_ids = [...optionIds];
    await this.empty("POST", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/votes`, { option_ids });
    this.observer?.voted?.(id, messageId, option_ids);
  }
  /** Closes a poll (v1.3): its author, an owner or admin of the
   * conversation, or a tenant admin (`403 forbidden` for anyone else);
   * closing a closed poll changes nothing. Every member gets
   * `poll_updated` with `closed: true`. */
  closePoll(id, messageId) {
    return this.empty("POST", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/close`);
  }
  /** Changes the settings that affect every member (v1.2): any of
   * `slow_mode_secs` (0 to 21600, 0 turns it off; not in a direct
   * conversation: `409`), `retention_days` (1 to 36500, or null) and
   * `disappearing_secs` (5 to 31536000, or null); what is left out
   * stays. Owners and admins (`403 forbidden` otherwise), either member
   * of a direct conversation. Every member gets a `conversation_updated`
   * message with the settings as they are now. `custom` (v1.3): the
   * conversation's own fields, merged key by key (null removes one; at
   * most 4096 bytes of JSON after it). Answers the conversation after
   * the change (which carries them). */
  updateConversation(id, patch) {
    return this.told(this.json("PATCH", `/v1/conversations/${enc(id)}`, patch));
  }
  /** The users the caller blocks (v1.2), newest first. The client's
   * `blocked` set takes them (it reads them itself as each connection
   * opens). */
  async blocks() {
    const askedAt = Date.now();
    const list = await this.json("GET", "/v1/blocks");
    this.observer?.blocks?.(list, askedAt);
    return list;
  }
  /** A user's profile (v1.3): any user of the caller's tenant; one who
   * never set one has every field empty and `updated_at: null`. */
  async user(user) {
    const profile = await this.json("GET", `/v1/users/${enc(user)}`);
    this.observer?.profiles?.([profile]);
    return profile;
  }
  /** Several users' profiles (v1.3), in the order named (at most 100; a
   * repeated id once). */
  async users(ids) {
    const q = new URLSearchParams({ ids: ids.join(",") });
    const { users } = await this.json("GET", `/v1/users?${q}`);
    this.observer?.profiles?.(users);
    return users;
  }
  /** Changes the caller's own profile (v1.3): `display_name`, `avatar`
   * (a `blob_ref` of an image the caller uploaded), `status`; `null`
   * clears a field. Everyone who shares a conversation with the caller
   * gets `profile_updated`. */
  async updateProfile(patch) {
    const profile = await this.json("PATCH", "/v1/me/profile", patch);
    this.observer?.profiles?.([profile]);
    return profile;
  }
  /** Sets a user's `custom` profile fields (v1.3; tenant admins): each
   * key given is set, a key given `null` removed. */
  async setCustomProfile(user, custom) {
    const profile = await this.json("PATCH", `/v1/admin/users/${enc(user)}/profile`, { custom });
    this.observer?.profiles?.([profile]);
    return profile;
  }
  /** Blocks a user (v1.2; idempotent: blocking again answers the block
   * as it is). From then on neither writes in their direct conversation,
   * nor opens one (`forbidden`); in groups their messages still come,
   * flagged `blocked_sender` for the caller. The caller's devices get
   * `blocks_changed`. At most 1000 (`409` past it); not oneself (`403
   * forbidden`). */
  async block(user) {
    const block = await this.json("PUT", `/v1/blocks/${enc(user)}`);
    this.observer?.blocked?.(user, "block", block.blocked_at);
    return block;
  }
  /** Unblocks a user (v1.2; idempotent). */
  async unblock(user) {
    await this.empty("DELETE", `/v1/blocks/${enc(user)}`);
    this.observer?.blocked?.(user, "unblock", (/* @__PURE__ */ new Date()).toISOString());
  }
  /** A page of the tenant's public groups and channels (v1.3), oldest
   * first: `q` keeps those whose title or topic contains it, ignoring
   * case. With `q` a page may hold fewer than `limit` (even none) and
   * still have a `next_cursor`: follow it until it is null. */
  channels(page = {}) {
    const query = new URLSearchParams();
    if (page.q) query.set("q", page.q);
    if (page.cursor) query.set("cursor", page.cursor);
    if (page.limit !== void 0) query.set("limit", String(page.limit));
    const qs = query.toString();
    return this.json("GET", `/v1/channels${qs ? `?${qs}` : ""}`);
  }
  /** Joins a public group or channel (v1.3; a private one is `403
   * forbidden`, as is a ban). The members get `members_added` with the
   * caller as actor; the caller reads the history from there on unless
   * the channel opens it to newcomers. Answers the conversation, which
   * the client's list takes. */
  join(id) {
    return this.told(this.json("POST", `/v1/conversations/${enc(id)}/join`));
  }
  /** Makes an invite (v1.3; owners and admins): at most `max_uses`
   * joins, until `expires_at` (at most 365 days ahead); without either
   * it works until revoked. */
  createInvite(id, opts = {}) {
    const expires = opts.expires_at instanceof Date ? opts.expires_at.toISOString() : opts.expires_at;
    const body = { ...opts.max_uses !== void 0 ? { max_uses: opts.max_uses } : {}, ...expires ? { expires_at: expires } : {} };
    return this.json("POST", `/v1/conversations/${enc(id)}/invites`, body);
  }
  /** A conversation's invites (v1.3; owners and admins), newest first. */
  invites(id) {
    return this.json("GET", `/v1/conversations/${enc(id)}/invites`);
  }
  /** Revokes an invite (v1.3; owners and admins): it lets nobody in from
   * now on. */
  revokeInvite(id, code) {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/invites/${enc(code)}`);
  }
  /** What an invite leads to (v1.3): `404` once revoked, expired or used
   * up. */
  invite(code) {
    return this.json("GET", `/v1/invites/${enc(code)}`);
  }
  /** Joins the invite's conversation (v1.3), as `join` does. Answers the
   * conversation, which the client's list takes. */
  acceptInvite(code) {
    return this.told(this.json("POST", `/v1/invites/${enc(code)}/accept`));
  }
  /** The bans in force in a conversation (v1.2), newest first (owners
   * and admins only: `403 forbidden` otherwise). */
  bans(id) {
    return this.json("GET", `/v1/conversations/${enc(id)}/bans`);
  }
  /** Bans a user (v1.2; owners and admins, an admin bans members only,
   * and nobody bans an owner or themselves: `403 forbidden`; a direct
   * conversation has none, and an `until` already past is refused:
   * `409`). Takes them out if a member, and refuses adding
   * them again (`403 forbidden`) until `unban` or `until` (a time in the
   * future; left out: until lifted). Banning again replaces the ban.
   * Every member, the banned user included, gets a `member_banned`
   * message. Answers the ban. */
  ban(id, user, until) {
    const end = until instanceof Date ? until.toISOString() : until;
    return this.json("POST", `/v1/conversations/${enc(id)}/bans`, { user_id: user, ...end ? { until: end } : {} });
  }
  /** Lifts a ban (v1.2; owners and admins): the user may be added again
   * (they are not added back). The members get a `member_unbanned`
   * message. */
  unban(id, user) {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/bans/${enc(user)}`);
  }
  /** Reports a message of a conversation to the tenant's admins (v1.2;
   * members: `403 not_a_member` otherwise; a system message is refused
   * `409 conflict`, a message not in it `404`). `note`: at most 1000 characters.
   * The report keeps the message as it is now. At most 10 a minute per
   * user by default (`429 rate_limited`). Answers its id. */
  report(id, messageId, reason, note) {
    return this.json("POST", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/reports`, {
      reason,
      ...note ? { note } : {}
    });
  }
  /** One page of the tenant's reports (v1.2; tenant admins, a token
   * with `role: "admin"`: `403 forbidden` otherwise), newest first:
   * `status` `open` (the default) or `resolved`, `limit` per page (50 by
   * default, at most 200); pass `next_cursor` back as `cursor` for the
   * next page. */
  async reports(page = {}) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(page)) if (v !== void 0) query.set(k, String(v));
    const q = query.size ? `?${query}` : "";
    const list = await this.json("GET", `/v1/admin/reports${q}`);
    return { ...list, next_cursor: list.next_cursor ?? null };
  }
  /** Resolves a report (v1.2; tenant admins, `403` otherwise; `404` for
   * no such report): `dismiss` closes it, `delete_message` deletes the
   * message (the members get `message_updated` with `deleted_at`),
   * `ban_sender` bans its sender from the conversation until lifted
   * (`member_banned`; `403 forbidden` for an owner, and the report stays
   * open). A resolved report stays as it was: resolving it again answers
   * it unchanged. Answers the report. */
  resolveReport(reportId, action) {
    return this.json("POST", `/v1/admin/reports/${enc(reportId)}/resolve`, { action });
  }
  /** The tenant's word list (v1.3; tenant admins). */
  blocklist() {
    return this.json("GET", "/v1/admin/blocklist");
  }
  /** Replaces the tenant's word list (v1.3; tenant admins): at most 1000
   * words of letters and digits, `reject` or `mask`; `[]` turns it off.
   * Answers it as stored (lower case, sorted, each word once). */
  setBlocklist(words, mode = "reject") {
    return this.json("PUT", "/v1/admin/blocklist", { words, mode });
  }
  /** The tenant's push templates (v1.3; tenant admins); `{}` for none. */
  pushTemplates() {
    return this.json("GET", "/v1/admin/push/templates");
  }
  /** Replaces the tenant's push templates (v1.3; tenant admins): per
   * kind (`message`, `mention`, `reply`, `reaction`) a `title` and an
   * optional `body` with `{sender}`, `{conversation}` and `{text}`; `{}`
   * goes back to the default wording. Answers them as stored. */
  setPushTemplates(templates) {
    return this.json("PUT", "/v1/admin/push/templates", templates);
  }
  /** Whether the tenant's text messages get link previews (v1.3; tenant
   * admins): `{ enabled }`, true unless turned off. */
  previewSettings() {
    return this.json("GET", "/v1/admin/previews");
  }
  /** Turns the tenant's link previews on or off (v1.3; tenant admins):
   * off, no message sent from then on is unfurled (cards already made
   * stay). Answers the setting now. */
  setPreviewSettings(enabled) {
    return this.json("PUT", "/v1/admin/previews", { enabled });
  }
  /** Bans `user` from the whole tenant (v1.3; tenant admins): their
   * tokens are refused (`ApiError` code `banned`) and their connections
   * closed (code 4005) until `until` (RFC 3339) or until lifted. */
  banUser(user, opts = {}) {
    return this.json("PUT", `/v1/admin/bans/${enc(user)}`, opts);
  }
  /** Lifts `user`'s tenant ban (v1.3; idempotent). */
  unbanUser(user) {
    return this.empty("DELETE", `/v1/admin/bans/${enc(user)}`);
  }
  /** A page of the tenant's bans in force, newest first (v1.3); pass
   * `next_cursor` back as `cursor`. */
  tenantBans(page = {}) {
    return this.json("GET", `/v1/admin/bans${pageQuery(page)}`);
  }
  /** Shadow-bans `user` (v1.3; tenant admins): their new messages are
   * acked and reach their own devices only, never anyone else's; they
   * are not told. Until `until` (RFC 3339) or until lifted. */
  shadowBanUser(user, opts = {}) {
    return this.json("PUT", `/v1/admin/shadow_bans/${enc(user)}`, opts);
  }
  /** Lifts `user`'s shadow ban (v1.3; idempotent): their later messages
   * reach everyone again. */
  unshadowBanUser(user) {
    return this.empty("DELETE", `/v1/admin/shadow_bans/${enc(user)}`);
  }
  /** A page of the tenant's shadow bans in force, newest first (v1.3). */
  shadowBans(page = {}) {
    return this.json("GET", `/v1/admin/shadow_bans${pageQuery(page)}`);
  }
  /** Mutes a member of `id` (v1.3; owners and admins): they stay, but
   * their posts, replies, reactions and edits are refused (`forbidden`)
   * until `until` or until lifted. */
  mute(id, user, until) {
    return this.json("POST", `/v1/conversations/${enc(id)}/mutes`, { user_id: user, ...until ? { until } : {} });
  }
  /** Lifts a member's mute (v1.3; idempotent). */
  unmute(id, user) {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/mutes/${enc(user)}`);
  }
  /** The mutes in force in `id`, newest first (v1.3; owners and admins). */
  async mutes(id) {
    return (await this.json("GET", `/v1/conversations/${enc(id)}/mutes`)).mutes;
  }
  /** Freezes (`true`) or thaws `id` (v1.3; owners and admins): while
   * frozen only they post, react or change its members. */
  freeze(id, frozen = true) {
    return this.updateConversation(id, { frozen });
  }
  /** A page of the tenant's moderation audit log, newest first (v1.3;
   * tenant admins); pass `next_cursor` back as `cursor`. */
  auditLog(page = {}) {
    return this.json("GET", `/v1/admin/audit${pageQuery(page)}`);
  }
  /** Erases a user of the tenant (v1.2; tenant admins, `403`
   * otherwise; `404` for a user the tenant has no trace of): their
   * messages become tombstones under a pseudonym, live and archived,
   * and their reactions, memberships, devices, keys, push tokens,
   * settings, blocks and uploads go. Answers the job (`202`); asking
   * again while it runs answers the same job. Follow it with `job`, or
   * `eraseUserAndWait`. */
  eraseUser(user) {
    return this.json("DELETE", `/v1/admin/users/${enc(user)}`);
  }
  /** Sends as the caller over REST (v1.2, `POST .../messages`), for a
   * backend or a bot (a token with `"bot": true`) that holds no socket.
   * The same checks, moderation and writer as `send_message`; answers
   * once the message is committed. Idempotent by `client_msg_id`: a
   * retry (after a timeout, a `503`) answers the message first stored. */
  postMessage(id, body) {
    return this.json("POST", `/v1/conversations/${enc(id)}/messages`, body);
  }
  /** Full-text search (v1.2, `GET /v1/search`) over the messages of the
   * caller's conversations (or `conversationId`'s alone), best match
   * first: all the words, `"a phrase"` in quotes. A message is findable
   * within 2 s of its ack. Page with `cursor` (a `next_cursor`). */
  search(q, opts = {}) {
    const query = new URLSearchParams({ q });
    if (opts.conversationId) query.set("conversation_id", opts.conversationId);
    if (opts.limit !== void 0) query.set("limit", String(opts.limit));
    if (opts.cursor) query.set("cursor", opts.cursor);
    return this.json("GET", `/v1/search?${query}`);
  }
  /** The caller's messages waiting for their `send_at`, soonest first
   * (v1.2, `GET /v1/scheduled`). */
  async scheduled() {
    const list = await this.json("GET", "/v1/scheduled");
    return list.scheduled;
  }
  /** Cancels a waiting message (v1.2): `404` `ApiError` once it was sent
   * or cancelled. */
  async cancelScheduled(scheduledId) {
    await this.empty("DELETE", `/v1/scheduled/${enc(scheduledId)}`);
  }
  /** The tenant's outbound webhooks (v1.2; tenant admins), secrets as
   * fingerprints. */
  async webhooks() {
    return (await this.json("GET", "/v1/admin/webhooks")).webhooks;
  }
  /** Replaces the tenant's outbound webhooks (v1.2; tenant admins; at
   * most 10, an empty list turns them off); answers them as stored. */
  async setWebhooks(webhooks) {
    return (await this.json("PUT", "/v1/admin/webhooks", { webhooks })).webhooks;
  }
  /** `postMessage` of a text, with a fresh `client_msg_id` unless one is
   * given: pass your own (from your event's id, say) to retry safely. */
  postText(id, text, clientMsgId) {
    const generated = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    return this.postMessage(id, { client_msg_id: clientMsgId ?? generated, content: { kind: "text", text } });
  }
  /** An admin job as it is now (v1.2; tenant admins; `404` for an
   * unknown job or another tenant's). */
  job(jobId) {
    return this.json("GET", `/v1/admin/jobs/${enc(jobId)}`);
  }
  /** Erases a user and waits until the job is `done` (rejects if it
   * `failed`, or is still running after `timeoutMs`, 5 minutes by
   * default), asking every `everyMs` (1 s). */
  async eraseUserAndWait(user, opts = {}) {
    const every = opts.everyMs ?? 1e3;
    const deadline = Date.now() + (opts.timeoutMs ?? 3e5);
    let job = await this.eraseUser(user);
    while (job.state === "running") {
      if (Date.now() > deadline) throw new Error(`erasure job ${job.job_id} still running`);
      await new Promise((r) => setTimeout(r, every));
      job = await this.job(job.job_id);
    }
    if (job.state === "failed") throw new Error(`erasure job ${job.job_id} failed: ${job.error ?? "no reason given"}`);
    return job;
  }
  /** The caller's own data as one document (v1.2, `GET /v1/me/export`),
   * parsed: the profile, the blocks, and each conversation the caller is
   * a member of with every message they sent there. At most 4 an hour
   * per user by default (`429 rate_limited`). The server writes
   * it as it reads it: a body that ends early (a failure midway) rejects
   * with a plain `Error`, never a partial document. To save it as a
   * file, `JSON.stringify` it. */
  async exportMyData() {
    const response = await this.send("GET", "/v1/me/export");
    try {
      return JSON.parse(await response.text());
    } catch (cause) {
      throw new Error("the export ended before its end: try again", { cause });
    }
  }
  /** Uploads media through a grant: asks for one, then PUTs the bytes
   * straight to its `upload_url`. Returns the content to send. */
  async upload(bytes, mime, kind = mime.startsWith("image/") ? "image" : "file", caption) {
    const size = bytes instanceof Blob ? bytes.size : bytes.byteLength;
    const grant = await this.json("POST", "/v1/media", { mime, size });
    const url = new URL(grant.upload_url, this.base).toString();
    const put = await this.fetchImpl(url, {
      method: grant.method,
      headers: { "content-type": mime, ...grant.headers },
      body: bytes
    });
    if (!put.ok) throw await apiError(put);
    return { kind, blob_ref: grant.blob_ref, mime, size, ...caption ? { caption } : {} };
  }
  /** The bytes of a media message's blob (for members of a conversation
   * that references it). */
  async download(blobRef) {
    const response = await this.send("GET", `/v1/media/${enc(blobRef)}`);
    return response.blob();
  }
  ownKeys(device) {
    return this.json("GET", `/v1/devices/${enc(device)}/keys`);
  }
  publishKeys(device, keys) {
    return this.json("PUT", `/v1/devices/${enc(device)}/keys`, keys);
  }
  devices(user) {
    return this.json("GET", `/v1/users/${enc(user)}/devices`);
  }
  claimPrekey(user, device) {
    return this.json("POST", `/v1/users/${enc(user)}/devices/${enc(device)}/claim`);
  }
  registerPush(device, registration) {
    return this.json("PUT", `/v1/devices/${enc(device)}/push`, registration);
  }
  pushRegistration(device) {
    return this.json("GET", `/v1/devices/${enc(device)}/push`);
  }
  unregisterPush(device) {
    return this.empty("DELETE", `/v1/devices/${enc(device)}/push`);
  }
  presence(user) {
    return this.json("GET", `/v1/users/${enc(user)}/presence`);
  }
  async told(answer) {
    const detail = await answer;
    this.observer?.conversation(detail);
    return detail;
  }
  async json(method, path, body) {
    const response = await this.send(method, path, body);
    const text = await response.text();
    return text ? JSON.parse(text) : void 0;
  }
  async empty(method, path, body) {
    await this.send(method, path, body);
  }
  async send(method, path, body) {
    const attempt = async (token) => this.fetchImpl(new URL(path, this.base).toString(), {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...body === void 0 ? {} : { "content-type": "application/json" }
      },
      body: body === void 0 ? void 0 : JSON.stringify(body)
    });
    let response = await attempt(await this.tokens.get());
    if (response.status === 401 && this.tokens.refreshable) {
      response = await attempt(await this.tokens.refresh());
    }
    if (!response.ok) throw await apiError(response);
    return response;
  }
};
function enc(part) {
  return encodeURIComponent(part);
}
function pageQuery(page) {
  const query = new URLSearchParams();
  if (page.limit !== void 0) query.set("limit", String(page.limit));
  if (page.cursor) query.set("cursor", page.cursor);
  return query.size ? `?${query}` : "";
}
async function apiError(response) {
  const header = response.headers.get("retry-after")?.trim();
  const after = header && /^\d+$/.test(header) ? Number(header) * 1e3 : void 0;
  try {
    const body = await response.json();
    return new ApiError(response.status, body.code ?? "unknown", body.message ?? response.statusText, body.retry_after_ms ?? after);
  } catch {
    return new ApiError(response.status, "unknown", response.statusText, after);
  }
}

// src/profiles.ts
var PROFILES_PER_READ = 100;
function newer(next, held) {
  if (!held || !held.updated_at) return true;
  if (!next.updated_at) return false;
  return Date.parse(next.updated_at) >= Date.parse(held.updated_at);
}
var ProfileCache = class {
  constructor(readProfiles, changed) {
    __publicField(this, "readProfiles", readProfiles);
    __publicField(this, "changed", changed);
    __publicField(this, "byUser", /* @__PURE__ */ new Map());
    /** Reads under way, by user: one read per user at a time. */
    __publicField(this, "reading", /* @__PURE__ */ new Map());
  }
  /** The profile held for `user`, if any (no read). A status past its
   * `expires_at` is left out, as the server would. */
  get(user) {
    const held = this.byUser.get(user);
    if (!held?.status?.expires_at || Date.parse(held.status.expires_at) > Date.now()) return held;
    return { ...held, status: null };
  }
  /** The name to show for `user`: their display name, else their id. */
  displayName(user) {
    return this.byUser.get(user)?.display_name ?? user;
  }
  get size() {
    return this.byUser.size;
  }
  /** The users whose profiles are held. */
  users() {
    return [...this.byUser.keys()];
  }
  /** The profiles of `users`, read from the server for those not held
   * (or all of them with `refresh`), 100 a request. */
  async load(users, refresh = false) {
    const wanted = [...new Set(users)];
    const missing = wanted.filter((u) => refresh || !this.byUser.has(u) && !this.reading.has(u));
    for (let i = 0; i < missing.length; i += PROFILES_PER_READ) {
      const chunk = missing.slice(i, i + PROFILES_PER_READ);
      const read = this.readProfiles(chunk).then((found) => {
        for (const p of found) this.apply(p);
      });
      for (const u of chunk) {
        const one = read.then(() => this.byUser.get(u));
        this.reading.set(u, one);
        one.finally(() => {
          if (this.reading.get(u) === one) this.reading.delete(u);
        }).catch(() => {
        });
      }
    }
    await Promise.all(wanted.map((u) => this.reading.get(u)));
    return wanted.map((u) => this.get(u)).filter((p) => p !== void 0);
  }
  /** A profile as the server told it (an event, or a REST answer): held
   * when newer than the one held; the app is told of a change. */
  apply(profile) {
    const held = this.byUser.get(profile.user_id);
    if (!newer(profile, held)) return false;
    this.byUser.set(profile.user_id, profile);
    if (!held || JSON.stringify(held) !== JSON.stringify(profile)) {
      this.changed(profile);
      return true;
    }
    return false;
  }
  /** Reads every held profile again (as a connection opens after being
   * away). A failure leaves what is held. */
  refresh() {
    if (this.byUser.size === 0) return;
    this.load(this.users(), true).catch(() => {
    });
  }
};

// src/status.ts
var Waiters = class {
  constructor() {
    __publicField(this, "list", []);
  }
  add() {
    return new Promise((resolve, reject) => this.list.push({ resolve, reject }));
  }
  resolve(sent) {
    for (const w of this.list.splice(0)) w.resolve(sent);
  }
  reject(error) {
    for (const w of this.list.splice(0)) w.reject(error);
  }
};
var Outgoing = class {
  constructor(outbox, client_msg_id, conversation_id, content, created_at, extras = {}) {
    __publicField(this, "outbox", outbox);
    __publicField(this, "client_msg_id", client_msg_id);
    __publicField(this, "conversation_id", conversation_id);
    __publicField(this, "content", content);
    __publicField(this, "created_at", created_at);
    __publicField(this, "status", "pending");
    __publicField(this, "error");
    __publicField(this, "sent");
    /** When it was last written (ms since the epoch); 0: not on this
     * connection. */
    __publicField(this, "writtenAt", 0);
    /** Refusals answered since it was last made pending. */
    __publicField(this, "answers", 0);
    /** Written again no sooner than this (after a refusal worth retrying). */
    __publicField(this, "retryAt", 0);
    /** Given up at this time (0: never). */
    __publicField(this, "giveUpAt", 0);
    __publicField(this, "waiters", new Waiters());
    __publicField(this, "reply_to");
    __publicField(this, "thread_id");
    __publicField(this, "mentions");
    __publicField(this, "mention_all");
    __publicField(this, "custom");
    __publicField(this, "previews");
    this.reply_to = extras.reply_to ?? null;
    this.thread_id = extras.thread_id ?? null;
    this.mentions = extras.mentions ?? [];
    this.mention_all = extras.mention_all ?? false;
    this.custom = extras.custom ?? null;
    this.previews = extras.previews !== false;
  }
  /** What it carries besides its content, as sent (absent fields left out). */
  get extras() {
    return {
      ...this.reply_to ? { reply_to: this.reply_to } : {},
      ...this.thread_id ? { thread_id: this.thread_id } : {},
      ...this.mentions.length ? { mentions: [...this.mentions] } : {},
      ...this.mention_all ? { mention_all: true } : {},
      ...this.custom ? { custom: this.custom } : {},
      ...this.previews ? {} : { previews: false }
    };
  }
  get frame() {
    return {
      type: "send_message",
      client_msg_id: this.client_msg_id,
      conversation_id: this.conversation_id,
      content: this.content,
      ...this.extras
    };
  }
  retry() {
    return this.outbox.retry(this);
  }
  discard() {
    return this.outbox.discard(this);
  }
};
var Outbox = class {
  constructor(host, options) {
    __publicField(this, "host", host);
    __publicField(this, "options", options);
    __publicField(this, "items", /* @__PURE__ */ new Map());
  }
  get(clientMsgId) {
    return this.items.get(clientMsgId);
  }
  /** Pending and failed sends, in the order they were made. */
  all() {
    return [...this.items.values()];
  }
  get pendingCount() {
    let n = 0;
    for (const o of this.items.values()) if (o.status === "pending") n += 1;
    return n;
  }
  send(conversationId, content, clientMsgId, extras = {}) {
    const known = this.items.get(clientMsgId);
    if (known) return known.status === "failed" ? this.retry(known) : known.waiters.add();
    const room = this.host.hasRoom();
    const o = new Outgoing(this, clientMsgId, conversationId, content, (/* @__PURE__ */ new Date()).toISOString(), extras);
    this.items.set(clientMsgId, o);
    const done = o.waiters.add();
    if (room) this.makePending(o);
    else this.fail(o, new CommandError("send_message", conversationId, "queue_full", "too many commands wait for a connection"));
    return done;
  }
  retry(o) {
    if (o.status === "sent") return Promise.resolve(o.sent);
    if (this.items.get(o.client_msg_id) !== o) {
      this.items.set(o.client_msg_id, o);
    }
    const done = o.waiters.add();
    if (o.status === "failed") {
      if (!this.host.hasRoom()) {
        o.waiters.reject(new CommandError("send_message", o.conversation_id, "queue_full", "too many commands wait for a connection"));
        return done;
      }
      this.makePending(o);
    } else {
      o.retryAt = 0;
      this.write(o);
    }
    return done;
  }
  discard(o) {
    if (o.status !== "failed" || this.items.get(o.client_msg_id) !== o) return false;
    this.items.delete(o.client_msg_id);
    this.host.changed(o, true);
    return true;
  }
  /** The server stored a send: returns it, now `sent` and out of the
   * outbox (also when it had failed: a late ack of a send given up is
   * still the truth); undefined for an ack of nothing here. */
  acked(frame) {
    const o = this.items.get(frame.client_msg_id);
    if (!o || frame.message_id == null || frame.seq == null) return void 0;
    this.items.delete(o.client_msg_id);
    o.status = "sent";
    o.error = void 0;
    o.sent = {
      client_msg_id: frame.client_msg_id,
      conversation_id: frame.conversation_id,
      message_id: frame.message_id,
      seq: frame.seq
    };
    this.host.changed(o, true);
    o.waiters.resolve(o.sent);
    return o;
  }
  /** An `error` frame naming a send here: true when it answered one. */
  refused(frame) {
    const o = frame.client_msg_id ? this.items.get(frame.client_msg_id) : void 0;
    if (!o) return false;
    if (o.status !== "pending") return true;
    o.answers += 1;
    const next = isSlowMode(frame) ? { final: true } : onRefusal(frame.code, o.answers);
    if (next.final) this.fail(o, new SendError({ ...frame, conversation_id: frame.conversation_id ?? o.conversation_id }));
    else o.retryAt = Date.now() + next.delayMs;
    return true;
  }
  /** A connection opened: every pending send goes, in order. */
  writeAll() {
    for (const o of this.items.values()) {
      if (o.status !== "pending") continue;
      o.retryAt = 0;
      this.write(o);
    }
  }
  /** The connection ended: nothing is written on the next one yet. */
  lost() {
    for (const o of this.items.values()) o.writtenAt = 0;
  }
  /** Resends what is overdue or due after a refusal, and gives up what
   * waited too long; says whether anything is still pending. */
  tick(now, open) {
    let pending = false;
    for (const o of this.items.values()) {
      if (o.status !== "pending") continue;
      if (o.giveUpAt && now >= o.giveUpAt) {
        const waited = Math.round((now - Date.parse(o.created_at)) / 1e3);
        this.fail(o, new CommandError("send_message", o.conversation_id, "timeout", `not stored after ${waited} s`));
        continue;
      }
      pending = true;
      if (!open) continue;
      if (o.retryAt) {
        if (now >= o.retryAt) {
          o.retryAt = 0;
          this.write(o);
        }
      } else if (o.writtenAt <= now - this.options.resendAfterMs) {
        this.write(o);
      }
    }
    return pending;
  }
  /** Every pending and failed send, for the store. */
  records() {
    return this.all().map((o) => ({
      client_msg_id: o.client_msg_id,
      conversation_id: o.conversation_id,
      content: o.content,
      created_at: o.created_at,
      status: o.status === "failed" ? "failed" : "pending",
      ...o.error ? { error: { code: o.error.code, message: o.error.message } } : {},
      ...o.extras
    }));
  }
  /** Takes back stored sends (before any made since: they came first). */
  restore(records) {
    const restored = [];
    const newer2 = [...this.items.values()];
    this.items.clear();
    for (const r of records) {
      if (newer2.some((n) => n.client_msg_id === r.client_msg_id)) continue;
      const o = new Outgoing(this, r.client_msg_id, r.conversation_id, r.content, r.created_at, {
        reply_to: r.reply_to,
        thread_id: r.thread_id,
        mentions: r.mentions,
        mention_all: r.mention_all,
        custom: r.custom,
        previews: r.previews
      });
      if (r.status === "failed") {
        o.status = "failed";
        const code = r.error?.code ?? "internal";
        o.error = new CommandError("send_message", r.conversation_id, code, stripCode(r.error?.message ?? "failed", code));
      } else if (this.options.giveUpAfterMs !== void 0) {
        o.giveUpAt = Date.parse(r.created_at) + this.options.giveUpAfterMs;
      }
      this.items.set(o.client_msg_id, o);
      restored.push(o);
    }
    for (const n of newer2) this.items.set(n.client_msg_id, n);
    if (restored.some((o) => o.status === "pending")) this.host.busy();
    return restored;
  }
  /** Forgets everything (the stored state was someone else's). */
  clear() {
    this.items.clear();
  }
  makePending(o) {
    o.status = "pending";
    o.error = void 0;
    o.answers = 0;
    o.retryAt = 0;
    o.giveUpAt = this.options.giveUpAfterMs === void 0 ? 0 : Date.now() + this.options.giveUpAfterMs;
    this.host.changed(o, false);
    this.host.busy();
    this.write(o);
  }
  write(o) {
    if (this.host.write(o.frame)) o.writtenAt = Date.now();
  }
  fail(o, error) {
    o.status = "failed";
    o.error = error;
    o.writtenAt = 0;
    this.host.changed(o, false);
    o.waiters.reject(error);
  }
};
function stripCode(message, code) {
  return message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message;
}

// src/token.ts
var Tokens = class {
  constructor(source) {
    __publicField(this, "source", source);
    __publicField(this, "current");
    if (typeof source === "string") this.current = source;
  }
  /** Whether a fresh token can be fetched. */
  get refreshable() {
    return typeof this.source === "function";
  }
  /** The current token, fetched first if there is none yet. */
  async get() {
    if (this.current === void 0) return this.refresh();
    return this.current;
  }
  /** A fresh token from the source (the same one for a fixed token). */
  async refresh() {
    if (typeof this.source === "string") return this.source;
    this.current = await this.source();
    return this.current;
  }
  /** Who the current token speaks for. */
  identity() {
    return this.current === void 0 ? void 0 : identityOf(this.current);
  }
  /** When the current token expires (ms since the epoch), if it says. */
  expiresAt() {
    return this.current === void 0 ? void 0 : expiryOf(this.current);
  }
};
function expiryOf(token) {
  const exp = claimsOf(token).exp;
  return typeof exp === "number" ? exp * 1e3 : void 0;
}
function identityOf(token) {
  const claims = claimsOf(token);
  if (typeof claims.sub !== "string") return void 0;
  return { user: claims.sub, device: typeof claims.device === "string" ? claims.device : "default" };
}
function claimsOf(token) {
  const payload = token.split(".")[1];
  if (!payload) return {};
  try {
    const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
    const json = JSON.parse(atob(base64 + "=".repeat((4 - base64.length % 4) % 4)));
    return json && typeof json === "object" ? json : {};
  } catch {
    return {};
  }
}

// src/client.ts
var SwitchboardClient = class extends Emitter {
  constructor(options) {
    super();
    __publicField(this, "options", options);
    __publicField(this, "rest");
    __publicField(this, "conversations", /* @__PURE__ */ new Map());
    /** The caller's conversations with unread counts, kept current. */
    __publicField(this, "conversationList");
    __publicField(this, "presence", /* @__PURE__ */ new Map());
    /** The users this user blocks (v1.2): read as each connection opens
     * (`GET /v1/blocks`), then kept by `blocks_changed` events and this
     * client's `rest.block` and `rest.unblock`. */
    __publicField(this, "blocked", new BlockSet());
    /** Profiles (v1.3) of the users the app asked for (`profiles.load`),
     * kept by `profile_updated` events and read again as each connection
     * after the first opens. */
    __publicField(this, "profiles");
    /** Resolves once the stored state (`persist`) is loaded; at once
     * without a store, or with one that answers at once. */
    __publicField(this, "ready");
    __publicField(this, "tokens");
    __publicField(this, "connection");
    __publicField(this, "outbox");
    __publicField(this, "commands");
    __publicField(this, "persistence");
    __publicField(this, "restoredAs");
    __publicField(this, "pulling", /* @__PURE__ */ new Set());
    __publicField(this, "openedBefore", false);
    __publicField(this, "running", false);
    __publicField(this, "ticker");
    __publicField(this, "ackTimer");
    __publicField(this, "unackedDelivered", /* @__PURE__ */ new Map());
    __publicField(this, "typingTimers", /* @__PURE__ */ new Map());
    __publicField(this, "counter", 0);
    this.tokens = new Tokens(options.token);
    const fetchImpl = options.fetch ?? globalThis.fetch?.bind(globalThis);
    this.rest = new Rest(options.url, this.tokens, fetchImpl);
    this.profiles = new ProfileCache(
      (ids) => this.rest.users(ids),
      (profile) => this.emit("profile_updated", profile)
    );
    const ws = options.WebSocket ?? globalThis.WebSocket;
    if (!ws) throw new Error("no WebSocket: pass options.WebSocket (e.g. the `ws` package under Node 20)");
    this.connection = new Connection({ ...options, WebSocket: ws }, this.tokens, {
      prepare: () => this.prepare(),
      status: (status) => this.emit("status", status),
      opened: () => this.opened(),
      lost: () => {
        this.pulling.clear();
        this.outbox.lost();
        this.commands.lost();
      },
      frame: (frame) => this.handle(frame),
      ended: (code, reason) => {
        this.close();
        this.emit("ended", { code, reason });
      }
    });
    const timing = { resendAfterMs: options.resendAfterMs ?? 1e4, giveUpAfterMs: options.giveUpAfterMs };
    const hasRoom = () => this.queued < (options.maxQueued ?? 1e3);
    this.outbox = new Outbox(
      {
        write: (frame) => this.connection.write(frame),
        hasRoom,
        changed: (o, removed) => this.outgoingChanged(o, removed),
        busy: () => this.busy()
      },
      timing
    );
    this.commands = new Commands(
      {
        write: (frame) => this.connection.write(frame),
        hasRoom,
        changed: () => this.persistence?.outboxChanged(),
        settled: (event) => this.emit("command", event),
        busy: () => this.busy()
      },
      timing
    );
    this.conversationList = new ConversationList(this.rest, () => this.tokens.identity()?.user);
    this.rest.observer = {
      conversation: (detail) => {
        this.conversationList.conversation(detail);
        const state = this.conversations.get(detail.conversation_id);
        if (state) {
          state.setMembers(detail.members, detail.last_seq);
          state.setPolicy(policyOf(detail), detail.last_seq);
          this.changed(state.conversationId);
        }
      },
      removed: (id, user) => {
        if (user === this.tokens.identity()?.user) this.conversationList.removed(id);
      },
      settings: (id, settings) => this.conversationList.settings(id, settings),
      pins: (id, list) => {
        const state = this.conversations.get(id);
        if (!state) return;
        state.setPins(list.pins);
        this.changed(id);
      },
      pinned: (id, messageId, action) => {
        const state = this.conversations.get(id);
        const me = this.tokens.identity()?.user;
        if (state && me && state.pinChanged(messageId, action, me)) this.changed(id);
      },
      blocks: (list, askedAt) => {
        const changed = this.blocked.replace(list.blocks, askedAt);
        for (const state of this.conversations.values()) {
          if (state.reflag((sender) => this.isBlockedSender({ sender_id: sender }))) this.changed(state.conversationId);
        }
        for (const user of changed) this.emit("blocks_changed", { user_id: user, action: this.blocked.has(user) ? "block" : "unblock" });
      },
      blocked: (user, action, at) => {
        if (this.blocked.change(user, action, at)) this.blockChanged(user, action);
      },
      voted: (id, messageId, optionIds) => {
        if (this.conversations.get(id)?.setVote(messageId, optionIds)) this.changed(id);
      },
      profiles: (list) => {
        for (const profile of list) this.profiles.apply(profile);
      }
    };
    const store = this.storeOf(options);
    if (store) {
      this.persistence = new Persistence(store, {
        identity: () => this.tokens.identity(),
        conversation: (id) => this.conversations.get(id)?.snapshot(this.persistence.messagesPerConversation),
        list: (limit) => this.conversationList.loaded ? this.conversationList.snapshot(limit) : void 0,
        outbox: () => ({ sends: this.outbox.records(), commands: this.commands.records() })
      }, options.persistLimits);
      this.conversationList.on("change", () => this.persistence?.listChanged());
      this.ready = this.load(store);
    } else {
      this.ready = Promise.resolve();
    }
  }
  get status() {
    return this.connection.status;
  }
  /** Opens the session (and keeps it open until `close`). */
  connect() {
    this.running = true;
    this.connection.connect();
    this.busy();
  }
  /** Closes the session; what waits (sends, edits, deletes, marks) stays
   * waiting, and goes when `connect` is called again. */
  close() {
    this.running = false;
    this.connection.close();
    clearInterval(this.ticker);
    this.ticker = void 0;
    clearTimeout(this.ackTimer);
    this.ackTimer = void 0;
    for (const [conversation, seq] of this.unackedDelivered) void this.markDelivered(conversation, seq);
    this.unackedDelivered.clear();
    for (const timer of this.typingTimers.values()) clearTimeout(timer);
    this.typingTimers.clear();
    void this.persistence?.flush();
  }
  /** Writes the state to the store now (`persist`); resolves once it is
   * written. */
  flush() {
    return this.persistence?.flush() ?? Promise.resolve();
  }
  /** The state of one conversation (created empty on first use). */
  conversation(id) {
    let state = this.conversations.get(id);
    if (!state) {
      state = new ConversationState(id);
      this.conversations.set(id, state);
    }
    return state;
  }
  /** Sends a message; resolves once it is durably stored (its `ack`),
   * however many reconnects that takes; rejects when it fails (see
   * `OutgoingMessage`: it stays in the conversation's `outgoing` as
   * `failed`, to `retry()` or `discard()`). The third argument is the
   * `clientMsgId` (default: a fresh id; pass your own to resend after a
   * restart of the app), or `SendOptions`: a reply, a thread, mentions. */
  send(conversationId, content, options = {}) {
    const o = typeof options === "string" ? { clientMsgId: options } : options;
    const extras = {
      ...o.replyTo ? { reply_to: o.replyTo } : {},
      ...o.threadId ? { thread_id: o.threadId } : {},
      ...o.mentions?.length ? { mentions: [...new Set(o.mentions)] } : {},
      ...o.mentionAll ? { mention_all: true } : {},
      ...o.custom ? { custom: o.custom } : {},
      ...o.previews === false ? { previews: false } : {}
    };
    return this.outbox.send(conversationId, content, o.clientMsgId ?? this.newClientMsgId(), extras);
  }
  /** Keeps a message to send at `sendAt` (v1.2; at most 30 days ahead,
   * at most 100 waiting per user), through the REST API: answers at once
   * with `status: "scheduled"` and its `scheduled_id`. At its time it is
   * moderated and sent, and reaches this and every other device as a
   * `message` (its `sender_device` is `sb:scheduled`); refused then, this
   * device gets an `error` event naming its `client_msg_id`. List them with
   * `rest.scheduled()`, cancel one with `rest.cancelScheduled(id)`. */
  schedule(conversationId, content, sendAt, options = {}) {
    const o = typeof options === "string" ? { clientMsgId: options } : options;
    return this.rest.postMessage(conversationId, {
      client_msg_id: o.clientMsgId ?? this.newClientMsgId(),
      // The frames' SentContent and the REST schema's are the same JSON.
      content,
      send_at: typeof sendAt === "string" ? sendAt : sendAt.toISOString(),
      ...o.replyTo ? { reply_to: o.replyTo } : {},
      ...o.threadId ? { thread_id: o.threadId } : {},
      ...o.mentions?.length ? { mentions: [...new Set(o.mentions)] } : {},
      ...o.mentionAll ? { mention_all: true } : {},
      ...o.custom ? { custom: o.custom } : {},
      ...o.previews === false ? { previews: false } : {}
    });
  }
  /** Sends a text message (with `SendOptions`: a reply, into a thread,
   * with mentions). */
  sendText(conversationId, text, options = {}) {
    return this.send(conversationId, { kind: "text", text }, options);
  }
  /** Sends a poll (v1.3): `send` with the `poll` content that
   * `pollContent(poll)` makes (options given as texts get the ids `o1`,
   * `o2`, ...), with its status, resends and `SendError`s (bounds broken:
   * `invalid_request`). Members vote with `vote`; the message carries
   * `poll_results`. */
  sendPoll(conversationId, poll, options = {}) {
    return this.send(conversationId, pollContent(poll), options);
  }
  /** Replaces this user's vote in a poll (v1.3) with `optionIds` (one
   * unless the poll is `multiple`; empty retracts it): resolves with the
   * `poll_updated` event that answers it (the poll's results after it;
   * the conversation's state has applied them, and its `me` is this
   * choice), rejects with a `CommandError` (`not_found`, `conflict` for a
   * closed poll or a deleted message, `invalid_request` for an option the
   * poll lacks or two in a single-choice poll, `forbidden` while muted,
   * ...). Idempotent: the same vote again is answered as once. Waits
   * while there is no connection, as reactions do; votes in one poll go
   * one at a time. */
  vote(conversationId, messageId, optionIds) {
    return this.commands.vote(conversationId, messageId, [...new Set(optionIds)]);
  }
  /** Votes for `optionId`, or takes it back if this user chose it (as
   * the conversation's state knows it): in a `multiple` poll it joins or
   * leaves the user's choice, in another it replaces it. */
  toggleVote(conversationId, messageId, optionId) {
    const state = this.conversation(conversationId);
    const mine = state.votedFor(messageId);
    const content = state.get(messageId)?.content;
    const multiple = content?.kind === "poll" && content.multiple === true;
    const next = mine.includes(optionId) ? mine.filter((id) => id !== optionId) : multiple ? [...mine, optionId] : [optionId];
    return this.vote(conversationId, messageId, next);
  }
  /** Ends the voting of a poll (v1.3) over REST: its author, an owner or
   * admin of the conversation, or a tenant admin (`ApiError` 403 for
   * anyone else); closing a closed poll changes nothing. Every member
   * gets `poll_updated` with `closed: true`. */
  closePoll(conversationId, messageId) {
    return this.rest.closePoll(conversationId, messageId);
  }
  /** Adds (or with `"remove"`, takes back) this user's reaction to a
   * message (v1.1): resolves with the `reaction` event that answers it
   * (the message's counts after it; the conversation's state has applied
   * them), rejects with a `CommandError` (`not_found`, `conflict` for a
   * deleted message or past the limits, `invalid_frame` for a bad
   * emoji, ...). Idempotent: adding twice is answered as once. Waits
   * while there is no connection, as edits do; reactions to one message
   * go one at a time. */
  react(conversationId, messageId, emoji, action = "add") {
    return this.commands.react(conversationId, messageId, emoji, action);
  }
  /** Adds the reaction if this user has not reacted with that emoji
   * (as the conversation's state knows it), else removes it. */
  toggleReaction(conversationId, messageId, emoji) {
    const mine = this.conversation(conversationId).reactedWith(messageId, emoji);
    return this.react(conversationId, messageId, emoji, mine ? "remove" : "add");
  }
  /** Sends a failed message again as a new one (v1.2): its content,
   * reply, thread, mentions, `custom` and (v1.3) `previews: false` with
   * a fresh `client_msg_id`, the failed one discarded. For a send a slow
   * mode refused (`SendError` with `retryAfterMs`), whose `client_msg_id`
   * stays refused, once the wait is over; `retry()` is the resend with
   * the same id. Rejects at once for a message that is not failed. */
  resendAsNew(message) {
    const o = typeof message === "string" ? this.outbox.get(message) : message;
    if (!o || o.status !== "failed" || !o.discard()) {
      return Promise.reject(new Error("only a failed message is sent again as a new one"));
    }
    return this.send(o.conversation_id, o.content, {
      ...o.reply_to ? { replyTo: o.reply_to } : {},
      ...o.thread_id ? { threadId: o.thread_id } : {},
      ...o.mentions.length ? { mentions: [...o.mentions] } : {},
      ...o.mention_all ? { mentionAll: true } : {},
      ...o.custom ? { custom: o.custom } : {},
      ...o.previews ? {} : { previews: false }
    });
  }
  /** Whether this user blocks `user` (v1.2), as `blocked` knows it. */
  isBlocked(user) {
    return this.blocked.has(user);
  }
  /** Whether a message comes from a user this user blocks (v1.2): by the
   * `blocked` set once it is read (it follows unblocks at once), else by
   * the message's own `blocked_sender`. A UI folds such messages. */
  isBlockedSender(message) {
    if (message.sender_id === this.tokens.identity()?.user) return false;
    return this.blocked.has(message.sender_id) || !this.blocked.loaded && message.blocked_sender === true;
  }
  /** One of this client's messages not stored yet (pending or failed). */
  outgoing(clientMsgId) {
    return this.outbox.get(clientMsgId);
  }
  /** How many sends wait for their ack. */
  get pendingSends() {
    return this.outbox.pendingCount;
  }
  /** How many sends, edits, deletes and reactions wait for their answer
   * (the number `maxQueued` bounds). */
  get queued() {
    return this.outbox.pendingCount + this.commands.size;
  }
  /** The sends to a conversation that wait for their ack, in order. */
  pendingIn(conversationId) {
    return this.outbox.all().filter((o) => o.conversation_id === conversationId && o.status === "pending").map((o) => ({ client_msg_id: o.client_msg_id, content: o.content }));
  }
  /** Who this session speaks for (from its token), once connected. */
  get me() {
    return this.tokens.identity();
  }
  /** Edits a message: resolves with it as the server now has it (its
   * `message_updated`), rejects with a `CommandError` (`forbidden`,
   * `conflict`, ...). Waits while there is no connection. `custom`
   * (v1.3) replaces the message's own fields (`{}` removes them);
   * without it they stay. */
  edit(conversationId, messageId, content, options = {}) {
    return this.commands.update("edit_message", conversationId, messageId, content, options.custom);
  }
  /** Deletes a message: as `edit`, resolving with the deleted message. */
  delete(conversationId, messageId) {
    return this.commands.update("delete_message", conversationId, messageId);
  }
  /** Marks everything up to `seq` (default: the newest message known)
   * read. The conversation's own mark and unread count change at once;
   * resolves once the mark is written (the server answers marks with
   * nothing); while there is no connection, only the highest waits. */
  markRead(conversationId, seq) {
    const state = this.conversation(conversationId);
    const upTo = seq ?? Math.max(state.highestSeq, this.conversationList.get(conversationId)?.last_seq ?? 0);
    if (upTo <= 0) return Promise.resolve();
    const me = this.tokens.identity()?.user;
    if (me && (state.receipts.get(me)?.read ?? 0) < upTo) {
      state.receipt(me, "read", upTo);
      this.changed(conversationId);
    }
    this.conversationList.read(conversationId, upTo);
    return this.commands.mark("read", conversationId, upTo);
  }
  /** Marks one thread read up to `seq` (v1.1; default: its newest reply
   * known here, else its root): `ack_read` with the root as `thread_id`.
   * The conversation's own read mark does not move. Resolves once the
   * mark is written, as `markRead` does. (A reply of this user reads the
   * thread up to itself without this.) */
  markThreadRead(conversationId, rootId, seq) {
    const state = this.conversation(conversationId);
    const replies = state.thread(rootId);
    const upTo = seq ?? replies[replies.length - 1]?.seq ?? state.get(rootId)?.seq ?? 0;
    if (upTo <= 0) return Promise.resolve();
    return this.commands.mark("read", conversationId, upTo, rootId);
  }
  /** Says this device has everything up to `seq` (default: what arrived
   * without a gap). The client does this by itself unless `ackDelivered`
   * is false. Resolves as `markRead` does. */
  markDelivered(conversationId, seq = this.conversation(conversationId).contiguousSeq) {
    if (seq <= 0) return Promise.resolve();
    return this.commands.mark("delivered", conversationId, seq);
  }
  /** Tells the members connected now that this user is typing. Typing is
   * ephemeral: fire-and-forget, and dropped while there is no connection
   * (a late "typing" would be wrong). */
  typing(conversationId, state) {
    this.connection.write({ type: "typing", conversation_id: conversationId, state });
  }
  newClientMsgId() {
    const random = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    this.counter += 1;
    return `${random}-${this.counter}`;
  }
  changed(conversationId) {
    this.emit("change", conversationId);
    this.persistence?.conversationChanged(conversationId);
  }
  /** The blocked set changed for `user`: the messages held here follow,
   * then the app is told. */
  blockChanged(user, action) {
    for (const state of this.conversations.values()) {
      if (state.flagSender(user, action === "block")) this.changed(state.conversationId);
    }
    if (this.conversationList.fetched) this.conversationList.refresh().catch(() => {
    });
    this.emit("blocks_changed", { user_id: user, action });
  }
  /** Reads the blocks (as each connection opens: changes made while away
   * came as events to nobody here). A failure leaves what is known. */
  loadBlocks() {
    this.rest.blocks().catch(() => {
    });
  }
  outgoingChanged(o, removed) {
    this.conversation(o.conversation_id).track(o, !removed);
    this.persistence?.outboxChanged();
    this.emit("outgoing", o);
    this.changed(o.conversation_id);
  }
  /** Runs the timer that resends overdue commands and gives up old ones,
   * while anything waits. */
  busy() {
    if (this.ticker !== void 0 || !this.running) return;
    const every = Math.min(1e3, Math.max(50, (this.options.resendAfterMs ?? 1e4) / 4));
    this.ticker = setInterval(() => {
      const now = Date.now();
      const open = this.connection.isOpen;
      const sends = this.outbox.tick(now, open);
      const commands = this.commands.tick(now, open);
      if (!sends && !commands) {
        clearInterval(this.ticker);
        this.ticker = void 0;
      }
    }, every);
    this.ticker.unref?.();
  }
  storeOf(options) {
    if (options.persist !== "indexeddb") return options.persist;
    let name = options.storageName;
    if (name === void 0 && typeof options.token === "string") {
      const who = identityOf(options.token);
      if (who) name = `${new URL(options.url).host}/${who.user}/${who.device}`;
    }
    if (name === void 0) throw new Error('persist: "indexeddb" needs storageName when the token is a function');
    return new IndexedDbStore(name);
  }
  /** Loads the stored state: at once when the store answers at once. */
  load(store) {
    let records;
    try {
      records = store.load();
    } catch {
      return Promise.resolve();
    }
    if (records instanceof Promise || typeof records.then === "function") {
      return Promise.resolve(records).then(
        (r) => this.restore(r),
        () => {
        }
      );
    }
    this.restore(records);
    return Promise.resolve();
  }
  restore(records) {
    const r = readRecords(records);
    if (!r.meta) return;
    const me = this.tokens.identity();
    if (me && (me.user !== r.meta.user || me.device !== r.meta.device)) {
      void this.persistence?.clear();
      return;
    }
    this.restoredAs = r.meta;
    this.persistence?.restored(r.conversations);
    for (const c of r.conversations) {
      this.conversation(c.conversation_id).restore(c);
      this.emit("change", c.conversation_id);
    }
    if (r.list) this.conversationList.restore(r.list);
    if (r.outbox) {
      for (const o of this.outbox.restore(r.outbox.sends)) {
        this.conversation(o.conversation_id).track(o, true);
        this.emit("change", o.conversation_id);
      }
      this.commands.restore(r.outbox.commands);
    }
  }
  /** Before each connection: the stored state is loaded, and was this
   * user's and device's (else it is forgotten, and nothing of it sent). */
  async prepare() {
    await this.ready;
    const me = this.tokens.identity();
    const was = this.restoredAs;
    if (me && was && (me.user !== was.user || me.device !== was.device)) {
      this.restoredAs = void 0;
      this.outbox.clear();
      this.commands.clear();
      this.conversationList.clear();
      this.blocked.clear();
      const ids = [...this.conversations.keys()];
      this.conversations.clear();
      for (const id of ids) this.emit("change", id);
      await this.persistence?.clear();
    }
    return true;
  }
  opened() {
    this.catchUp();
    this.outbox.writeAll();
    this.commands.writeAll();
    this.busy();
    this.loadBlocks();
    if (this.openedBefore) this.profiles.refresh();
    const list = this.conversationList;
    if (list.loaded && (this.openedBefore || !list.fetched)) {
      list.refresh().catch(() => {
      });
    }
    this.openedBefore = true;
    void this.persistence?.flush();
  }
  /** What the connection may have missed: this device's undelivered
   * messages, and each known conversation since its last contiguous
   * `seq` (a conversation that fans out on read keeps no inbox). */
  catchUp() {
    this.pulling.clear();
    this.connection.write({ type: "pull_backlog" });
    for (const state of this.conversations.values()) this.pull(state);
  }
  pull(state) {
    if (this.pulling.has(state.conversationId)) return;
    this.pulling.add(state.conversationId);
    this.connection.write({ type: "pull_backlog", conversation_id: state.conversationId, since_seq: state.contiguousSeq });
  }
  handle(frame) {
    switch (frame.type) {
      case "ack": {
        const o = this.outbox.get(frame.client_msg_id);
        const me = this.tokens.identity();
        if (o && me && frame.message_id != null && frame.seq != null) {
          const content = frame.content ?? o.content;
          this.received(
            {
              message_id: frame.message_id,
              conversation_id: frame.conversation_id,
              seq: frame.seq,
              sender_id: me.user,
              sender_device: me.device,
              client_msg_id: frame.client_msg_id,
              content,
              created_at: (/* @__PURE__ */ new Date()).toISOString(),
              edited_at: null,
              deleted_at: null,
              reply_to: o.reply_to,
              thread_id: o.thread_id,
              reactions: [],
              mentions: [...o.mentions],
              mention_all: o.mention_all,
              ...o.custom && Object.keys(o.custom).length ? { custom: o.custom } : {},
              // A poll (v1.3) starts with nobody's vote.
              ...content.kind === "poll" ? { poll_results: freshResults(content) } : {}
            },
            true
          );
        }
        this.outbox.acked(frame);
        return;
      }
      case "message":
        this.received(this.flagged(frame.message));
        return;
      case "message_updated": {
        const message = this.flagged(frame.message);
        const state = this.conversation(message.conversation_id);
        const previewsOnly = onlyPreviewsChanged(state.get(message.message_id), message);
        state.update(message, "event");
        this.conversationList.updated(message);
        this.emit("updated", message);
        this.changed(state.conversationId);
        if (!previewsOnly) this.commands.updated(message);
        return;
      }
      case "receipt": {
        const state = this.conversation(frame.conversation_id);
        state.receipt(frame.user_id, frame.kind, frame.seq);
        if (frame.kind === "read" && frame.user_id === this.tokens.identity()?.user) {
          this.conversationList.read(frame.conversation_id, frame.seq);
        }
        this.emit("receipt", {
          conversation_id: frame.conversation_id,
          user_id: frame.user_id,
          kind: frame.kind,
          seq: frame.seq
        });
        this.changed(state.conversationId);
        return;
      }
      case "typing":
        this.typed(frame.conversation_id, frame.user_id, frame.state, frame.expires_in_ms);
        return;
      case "reaction": {
        const { type: _type, ...event } = frame;
        const me = this.tokens.identity()?.user;
        const state = this.conversations.get(frame.conversation_id);
        if (state?.reacted(event, me)) this.changed(state.conversationId);
        this.commands.reacted(event, me);
        this.emit("reaction", event);
        return;
      }
      case "poll_updated": {
        const { type: _type, ...event } = frame;
        const me = this.tokens.identity()?.user;
        const mine = this.commands.voteAnswered(event, me);
        const state = this.conversations.get(frame.conversation_id);
        if (state?.pollUpdated(event, me, mine)) this.changed(state.conversationId);
        this.commands.polled(event, me);
        this.emit("poll_updated", event);
        return;
      }
      case "pins_changed": {
        const state = this.conversations.get(frame.conversation_id);
        if (state?.pinChanged(frame.message_id, frame.action, frame.by)) this.changed(state.conversationId);
        this.emit("pins_changed", { conversation_id: frame.conversation_id, message_id: frame.message_id, action: frame.action, by: frame.by });
        return;
      }
      case "settings_changed": {
        const settings = { notifications: frame.notifications, muted_until: frame.muted_until ?? null };
        this.conversationList.settings(frame.conversation_id, settings);
        this.emit("settings_changed", { conversation_id: frame.conversation_id, ...settings });
        return;
      }
      case "blocks_changed":
        if (this.blocked.change(frame.user_id, frame.action)) this.blockChanged(frame.user_id, frame.action);
        return;
      case "profile_updated":
        this.profiles.apply(frame.profile);
        return;
      case "presence":
        this.presence.set(frame.user_id, { status: frame.status, last_seen: frame.last_seen ?? null });
        this.emit("presence", { user_id: frame.user_id, status: frame.status, last_seen: frame.last_seen ?? null });
        return;
      case "backlog_done": {
        if (frame.conversation_id) {
          const state = this.conversation(frame.conversation_id);
          this.pulling.delete(frame.conversation_id);
          if (frame.more) {
            this.pull(state);
          } else {
            state.caughtUpTo(frame.last_seq);
            if (state.hasGap) this.pull(state);
          }
          this.persistence?.conversationChanged(state.conversationId);
        } else if (frame.more) {
          this.connection.write({ type: "pull_backlog" });
        }
        return;
      }
      case "error": {
        if (this.outbox.refused(frame)) return;
        const answered = this.commands.refused(frame);
        if (answered !== "retrying") this.emit("error", frame);
        return;
      }
      default:
        return;
    }
  }
  /** A message with `blocked_sender` as the `blocked` set says, once it
   * is read (the gateway's copy of the set may be a moment behind or
   * ahead of this one). */
  flagged(message) {
    if (!this.blocked.loaded) return message;
    const blocked = this.isBlockedSender(message);
    return message.blocked_sender === true === blocked ? message : withBlockedFlag(message, blocked);
  }
  received(message, sentHere = false) {
    const state = this.conversation(message.conversation_id);
    if (!state.add(message, sentHere)) {
      if (state.update(message)) {
        this.conversationList.updated(message);
        this.emit("updated", message);
        this.changed(state.conversationId);
      }
      return;
    }
    this.conversationList.message(message);
    this.emit("message", message);
    this.changed(state.conversationId);
    if (state.typing.delete(message.sender_id)) {
      this.emit("typing", { conversation_id: state.conversationId, users: state.typingUsers() });
    }
    if (state.hasGap) this.pull(state);
    if (this.options.ackDelivered ?? true) this.ackDelivered(state);
  }
  /** Acks what arrived, coalesced over a short window. */
  ackDelivered(state) {
    if (state.contiguousSeq === 0) return;
    this.unackedDelivered.set(state.conversationId, state.contiguousSeq);
    if (this.ackTimer !== void 0) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = void 0;
      for (const [conversation, seq] of this.unackedDelivered) void this.markDelivered(conversation, seq);
      this.unackedDelivered.clear();
    }, 200);
  }
  typed(conversationId, userId, state, expiresInMs) {
    const conversation = this.conversation(conversationId);
    const key2 = `${conversationId}\0${userId}`;
    clearTimeout(this.typingTimers.get(key2));
    this.typingTimers.delete(key2);
    const until = conversation.setTyping(userId, state, expiresInMs);
    if (until !== void 0) {
      this.typingTimers.set(
        key2,
        setTimeout(() => {
          this.typingTimers.delete(key2);
          conversation.typing.delete(userId);
          this.emit("typing", { conversation_id: conversationId, users: conversation.typingUsers() });
          this.emit("change", conversationId);
        }, expiresInMs)
      );
    }
    this.emit("typing", { conversation_id: conversationId, users: conversation.typingUsers() });
    this.emit("change", conversationId);
  }
};

// src/webhooks.ts
var hex = (bytes) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
async function verifyWebhook(secret, signature, body, options = {}) {
  const parts2 = Object.fromEntries(
    signature.split(",").map((p) => {
      const at = p.indexOf("=");
      return [p.slice(0, at).trim(), p.slice(at + 1).trim()];
    })
  );
  const t = Number(parts2.t);
  if (!Number.isInteger(t) || !parts2.v1) throw new Error("Switchboard-Signature is not t=<unix>,v1=<hex>");
  const age = (options.now ?? Date.now()) / 1e3 - t;
  if (Math.abs(age) > (options.toleranceSecs ?? 300)) throw new Error(`the signature's time is ${Math.round(age)} s off`);
  const raw = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const signed = new Uint8Array(String(t).length + 1 + raw.length);
  signed.set(new TextEncoder().encode(`${t}.`));
  signed.set(raw, String(t).length + 1);
  const key2 = await globalThis.crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"]
  );
  const expected = hex(await globalThis.crypto.subtle.sign("HMAC", key2, signed));
  let diff = expected.length ^ parts2.v1.length;
  for (let i = 0; i < expected.length; i += 1) diff |= expected.charCodeAt(i) ^ (parts2.v1.charCodeAt(i) || 0);
  if (diff !== 0) throw new Error("the signature does not match");
  return JSON.parse(new TextDecoder().decode(raw));
}
export {
  ApiError,
  BlockSet,
  CommandError,
  ConversationList,
  ConversationState,
  IndexedDbStore,
  MemoryStore,
  PROFILES_PER_READ,
  ProfileCache,
  Rest,
  SendError,
  SwitchboardClient,
  expiryOf,
  identityOf,
  isSlowMode,
  mentionsUser,
  onlyPreviewsChanged,
  policyOf,
  pollContent,
  previewOf,
  previewsOf,
  verifyWebhook
};
