// The Switchboard SDK (clients/js), bundled for the browser client by `npm run bundle`. Do not edit.
var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

// src/conversation.ts
var ConversationState = class {
  constructor(conversationId) {
    __publicField(this, "conversationId", conversationId);
    /** By `message_id`: a message seen twice (a replay, a resend) is one. */
    __publicField(this, "byId", /* @__PURE__ */ new Map());
    __publicField(this, "sorted", []);
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
  }
  /** Every message, in `seq` order. */
  get messages() {
    if (!this.sorted) this.sorted = [...this.byId.values()].sort((a, b) => a.seq - b.seq);
    return this.sorted;
  }
  get(messageId) {
    return this.byId.get(messageId);
  }
  /** Adds a new message; false when it is one already known (by id). */
  add(message) {
    if (this.byId.has(message.message_id)) return false;
    if (this.byId.size === 0 && this.contiguousSeq === 0) this.contiguousSeq = message.seq - 1;
    this.byId.set(message.message_id, message);
    this.seqs.add(message.seq);
    this.sorted = void 0;
    this.highestSeq = Math.max(this.highestSeq, message.seq);
    this.advance();
    this.receipt(message.sender_id, "read", message.seq);
    return true;
  }
  /** Replaces a message with its edited or deleted self (or adds it). */
  update(message) {
    const known = this.byId.get(message.message_id);
    if (!known) {
      this.add(message);
      return;
    }
    const stamp = (m) => Date.parse(m.deleted_at ?? m.edited_at ?? m.created_at);
    if (known.deleted_at && !message.deleted_at) return;
    if (stamp(message) < stamp(known)) return;
    this.byId.set(message.message_id, message);
    this.sorted = void 0;
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
  advance() {
    while (this.seqs.has(this.contiguousSeq + 1)) this.contiguousSeq += 1;
  }
};

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

// src/rest.ts
var ApiError = class extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    __publicField(this, "status", status);
    __publicField(this, "code", code);
    this.name = "ApiError";
  }
};
var Rest = class {
  constructor(base, tokens, fetchImpl = globalThis.fetch.bind(globalThis)) {
    __publicField(this, "base", base);
    __publicField(this, "tokens", tokens);
    __publicField(this, "fetchImpl", fetchImpl);
  }
  createConversation(kind, members, title) {
    return this.json("POST", "/v1/conversations", { kind, members, ...title ? { title } : {} });
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
    return this.json("GET", `/v1/conversations/${enc(id)}`);
  }
  /** Adds members; answers the conversation as it is now. */
  addMembers(id, members) {
    return this.json("POST", `/v1/conversations/${enc(id)}/members`, { members });
  }
  removeMember(id, user) {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/members/${enc(user)}`);
  }
  /** One page of history, newest first; pass `next_before_seq` back as
   * `before_seq` for the page before it. */
  history(id, page = {}) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(page)) if (v !== void 0) query.set(k, String(v));
    const q = query.size ? `?${query}` : "";
    return this.json("GET", `/v1/conversations/${enc(id)}/messages${q}`);
  }
  versions(id, messageId) {
    return this.json("GET", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/versions`);
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
  async json(method, path, body) {
    const response = await this.send(method, path, body);
    const text = await response.text();
    return text ? JSON.parse(text) : void 0;
  }
  async empty(method, path) {
    await this.send(method, path);
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
async function apiError(response) {
  try {
    const body = await response.json();
    return new ApiError(response.status, body.code ?? "unknown", body.message ?? response.statusText);
  } catch {
    return new ApiError(response.status, "unknown", response.statusText);
  }
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
var SendError = class extends Error {
  constructor(frame) {
    super(`${frame.code}: ${frame.message}`);
    __publicField(this, "frame", frame);
    this.name = "SendError";
  }
};
var FINAL_CODES = /* @__PURE__ */ new Set([
  "invalid_frame",
  "too_large",
  "forbidden",
  "not_a_member",
  "not_found",
  "conflict",
  "rejected_by_policy",
  "quota_exceeded"
]);
var SwitchboardClient = class extends Emitter {
  constructor(options) {
    super();
    __publicField(this, "options", options);
    __publicField(this, "rest");
    __publicField(this, "conversations", /* @__PURE__ */ new Map());
    __publicField(this, "presence", /* @__PURE__ */ new Map());
    __publicField(this, "tokens");
    __publicField(this, "WebSocketImpl");
    __publicField(this, "socket");
    __publicField(this, "liveness");
    __publicField(this, "onOffline", () => this.wentOffline());
    __publicField(this, "onOnline", () => this.cameOnline());
    __publicField(this, "pending", /* @__PURE__ */ new Map());
    __publicField(this, "pulling", /* @__PURE__ */ new Set());
    __publicField(this, "attempt", 0);
    __publicField(this, "stopped", false);
    __publicField(this, "reconnectTimer");
    __publicField(this, "refreshTimer");
    __publicField(this, "ackTimer");
    __publicField(this, "resendTimer");
    __publicField(this, "unackedDelivered", /* @__PURE__ */ new Map());
    __publicField(this, "typingTimers", /* @__PURE__ */ new Map());
    __publicField(this, "counter", 0);
    __publicField(this, "currentStatus", "closed");
    this.tokens = new Tokens(options.token);
    const fetchImpl = options.fetch ?? globalThis.fetch?.bind(globalThis);
    this.rest = new Rest(options.url, this.tokens, fetchImpl);
    const ws = options.WebSocket ?? globalThis.WebSocket;
    if (!ws) throw new Error("no WebSocket: pass options.WebSocket (e.g. the `ws` package under Node 20)");
    this.WebSocketImpl = ws;
    this.liveness = new Liveness({
      intervalMs: options.pingIntervalMs ?? 1e4,
      timeoutMs: options.pongTimeoutMs ?? 5e3,
      ping: () => this.write({ type: "ping" }),
      dead: () => this.dropped(this.socket)
    });
  }
  get status() {
    return this.currentStatus;
  }
  /** Opens the session (and keeps it open until `close`). */
  connect() {
    this.stopped = false;
    browserWindow()?.addEventListener("offline", this.onOffline);
    browserWindow()?.addEventListener("online", this.onOnline);
    void this.open();
  }
  /** Closes the session for good; pending sends stay pending. */
  close() {
    this.stopped = true;
    browserWindow()?.removeEventListener("offline", this.onOffline);
    browserWindow()?.removeEventListener("online", this.onOnline);
    this.liveness.stop();
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = void 0;
    clearTimeout(this.refreshTimer);
    clearTimeout(this.ackTimer);
    clearInterval(this.resendTimer);
    for (const timer of this.typingTimers.values()) clearTimeout(timer);
    this.typingTimers.clear();
    this.socket?.close(1e3);
    this.socket = void 0;
    this.setStatus("closed");
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
   * however many reconnects that takes. `clientMsgId` defaults to a
   * fresh id; pass your own to resend after a restart of the app. */
  send(conversationId, content, clientMsgId = this.newClientMsgId()) {
    return new Promise((resolve, reject) => {
      const frame = { type: "send_message", client_msg_id: clientMsgId, conversation_id: conversationId, content };
      const pending = { frame, resolve, reject, writtenAt: 0 };
      this.pending.set(clientMsgId, pending);
      this.writePending(pending);
      this.emit("change", conversationId);
    });
  }
  /** Sends a text message. */
  sendText(conversationId, text) {
    return this.send(conversationId, { kind: "text", text });
  }
  /** How many sends wait for their ack. */
  get pendingSends() {
    return this.pending.size;
  }
  /** The sends to a conversation that wait for their ack, in order. */
  pendingIn(conversationId) {
    return [...this.pending.values()].filter((p) => p.frame.conversation_id === conversationId).map((p) => ({ client_msg_id: p.frame.client_msg_id, content: p.frame.content }));
  }
  /** Who this session speaks for (from its token), once connected. */
  get me() {
    return this.tokens.identity();
  }
  edit(conversationId, messageId, content) {
    this.write({ type: "edit_message", conversation_id: conversationId, message_id: messageId, content });
  }
  delete(conversationId, messageId) {
    this.write({ type: "delete_message", conversation_id: conversationId, message_id: messageId });
  }
  /** Marks everything up to `seq` (default: the newest message) read. */
  markRead(conversationId, seq = this.conversation(conversationId).highestSeq) {
    if (seq > 0) this.write({ type: "ack_read", conversation_id: conversationId, seq });
  }
  typing(conversationId, state) {
    this.write({ type: "typing", conversation_id: conversationId, state });
  }
  newClientMsgId() {
    const random = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    this.counter += 1;
    return `${random}-${this.counter}`;
  }
  setStatus(status) {
    if (this.currentStatus === status) return;
    this.currentStatus = status;
    this.emit("status", status);
  }
  async open() {
    if (this.stopped) return;
    this.setStatus(this.attempt === 0 ? "connecting" : "reconnecting");
    let token;
    try {
      token = this.attempt > 0 && this.tokens.refreshable ? await this.tokens.refresh() : await this.tokens.get();
    } catch {
      this.retry();
      return;
    }
    const url = new URL("/v1/ws", this.options.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("token", token);
    const socket = new this.WebSocketImpl(url.toString());
    this.socket = socket;
    this.liveness.expect(this.options.connectTimeoutMs ?? 1e4);
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.liveness.heard();
      this.attempt = 0;
      this.setStatus("open");
      this.scheduleRefresh();
      this.catchUp();
      for (const pending of this.pending.values()) this.writePending(pending);
      this.resendUnacked();
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
      this.handle(frame);
    };
    socket.onclose = () => this.dropped(socket);
    socket.onerror = () => {
    };
  }
  /** The connection ended, or is taken for dead (no answer to a ping,
   * not open in time, the browser went offline): it is let go at once,
   * without waiting for a closing handshake a dead peer never answers,
   * and a new one is made. Pending sends stay pending and are written
   * again on it, with their `client_msg_id`. */
  dropped(socket) {
    if (!socket || this.socket !== socket) return;
    this.socket = void 0;
    this.liveness.stop();
    clearTimeout(this.refreshTimer);
    clearInterval(this.resendTimer);
    socket.onopen = socket.onmessage = socket.onclose = null;
    socket.onerror = () => {
    };
    try {
      if (socket.terminate) socket.terminate();
      else socket.close();
    } catch {
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
  /** The browser lost its network: the socket cannot be trusted (it may
   * say open for minutes), so it goes now. */
  wentOffline() {
    this.dropped(this.socket);
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
  /** What the connection may have missed: this device's undelivered
   * messages, and each known conversation since its last contiguous
   * `seq` (a conversation that fans out on read keeps no inbox). */
  catchUp() {
    this.pulling.clear();
    this.write({ type: "pull_backlog" });
    for (const state of this.conversations.values()) this.pull(state);
  }
  pull(state) {
    if (this.pulling.has(state.conversationId)) return;
    this.pulling.add(state.conversationId);
    this.write({ type: "pull_backlog", conversation_id: state.conversationId, since_seq: state.contiguousSeq });
  }
  write(frame) {
    if (this.socket?.readyState === 1) this.socket.send(JSON.stringify(frame));
  }
  writePending(pending) {
    pending.writtenAt = Date.now();
    this.write(pending.frame);
  }
  /** While the connection is open, writes again, in the order they were
   * made, the sends whose acks are overdue. */
  resendUnacked() {
    clearInterval(this.resendTimer);
    const after = this.options.resendAfterMs ?? 1e4;
    this.resendTimer = setInterval(
      () => {
        const overdue = Date.now() - after;
        for (const pending of this.pending.values()) {
          if (pending.writtenAt <= overdue) this.writePending(pending);
        }
      },
      Math.min(1e3, Math.max(50, after / 4))
    );
    this.resendTimer.unref?.();
  }
  handle(frame) {
    switch (frame.type) {
      case "ack": {
        const pending = this.pending.get(frame.client_msg_id);
        this.pending.delete(frame.client_msg_id);
        const me = this.tokens.identity();
        if (pending && me) {
          this.received({
            message_id: frame.message_id,
            conversation_id: frame.conversation_id,
            seq: frame.seq,
            sender_id: me.user,
            sender_device: me.device,
            client_msg_id: frame.client_msg_id,
            content: frame.content ?? pending.frame.content,
            created_at: (/* @__PURE__ */ new Date()).toISOString(),
            edited_at: null,
            deleted_at: null
          });
        }
        pending?.resolve({
          client_msg_id: frame.client_msg_id,
          conversation_id: frame.conversation_id,
          message_id: frame.message_id,
          seq: frame.seq
        });
        return;
      }
      case "message":
        this.received(frame.message);
        return;
      case "message_updated": {
        const state = this.conversation(frame.message.conversation_id);
        state.update(frame.message);
        this.emit("updated", frame.message);
        this.emit("change", state.conversationId);
        return;
      }
      case "receipt": {
        const state = this.conversation(frame.conversation_id);
        state.receipt(frame.user_id, frame.kind, frame.seq);
        this.emit("receipt", {
          conversation_id: frame.conversation_id,
          user_id: frame.user_id,
          kind: frame.kind,
          seq: frame.seq
        });
        this.emit("change", state.conversationId);
        return;
      }
      case "typing":
        this.typed(frame.conversation_id, frame.user_id, frame.state, frame.expires_in_ms);
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
        } else if (frame.more) {
          this.write({ type: "pull_backlog" });
        }
        return;
      }
      case "error": {
        const pending = frame.client_msg_id ? this.pending.get(frame.client_msg_id) : void 0;
        if (pending && FINAL_CODES.has(frame.code)) {
          this.pending.delete(frame.client_msg_id);
          pending.reject(new SendError(frame));
        } else if (pending) {
          setTimeout(() => {
            if (this.pending.get(pending.frame.client_msg_id) === pending) this.writePending(pending);
          }, 1e3);
        } else {
          this.emit("error", frame);
        }
        return;
      }
      default:
        return;
    }
  }
  received(message) {
    const state = this.conversation(message.conversation_id);
    if (!state.add(message)) return;
    this.emit("message", message);
    this.emit("change", state.conversationId);
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
      for (const [conversation, seq] of this.unackedDelivered) {
        this.write({ type: "ack_delivered", conversation_id: conversation, seq });
      }
      this.unackedDelivered.clear();
    }, 200);
  }
  typed(conversationId, userId, state, expiresInMs) {
    const conversation = this.conversation(conversationId);
    const key = `${conversationId}\0${userId}`;
    clearTimeout(this.typingTimers.get(key));
    this.typingTimers.delete(key);
    const until = conversation.setTyping(userId, state, expiresInMs);
    if (until !== void 0) {
      this.typingTimers.set(
        key,
        setTimeout(() => {
          this.typingTimers.delete(key);
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
function browserWindow() {
  const w = globalThis.window;
  return typeof w?.addEventListener === "function" ? w : void 0;
}
export {
  ApiError,
  ConversationState,
  Rest,
  SendError,
  SwitchboardClient,
  expiryOf,
  identityOf
};
