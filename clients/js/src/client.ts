import { ConversationState } from "./conversation.js";
import { Emitter } from "./emitter.js";
import { Liveness } from "./liveness.js";
import type { ClientFrame, Content, Message, ServerFrame, TypingState } from "./protocol.js";
import { Rest } from "./rest.js";
import { Tokens, type TokenSource } from "./token.js";

/** What the SDK uses of a WebSocket: the browser's and the `ws`
 * package's both fit. The handlers take `never` so that either's own
 * event types are accepted (the SDK reads only `data` of a message). */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: drops the connection without a closing handshake. */
  terminate?: () => void;
  onopen: ((event: never) => void) | null;
  onmessage: ((event: never) => void) | null;
  onclose: ((event: never) => void) | null;
  onerror: ((event: never) => void) | null;
}

/** A `WebSocket` constructor: the browser's, or `ws` under Node 20. */
export type WebSocketLike = new (url: string) => SocketLike;

export interface ClientOptions {
  /** The gateway's base address, e.g. `https://chat.example.com`. */
  url: string;
  /** A token, or a function that fetches a fresh one. */
  token: TokenSource;
  /** Defaults to the global `WebSocket`. */
  WebSocket?: WebSocketLike;
  /** Defaults to the global `fetch`. */
  fetch?: typeof fetch;
  /** Reconnect delays: a random wait up to a bound doubled from
   * `minDelayMs` (default 250 ms) to `maxDelayMs` (default 10 s) with
   * each failed attempt ("full jitter"). */
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  /** Send `ping` after this long without hearing from the server
   * (default 10 s). */
  pingIntervalMs?: number;
  /** The connection is dead when nothing (the `pong` or any frame)
   * arrives this long after a `ping` (default 5 s): it is closed and
   * reconnected, and pending sends are written again. */
  pongTimeoutMs?: number;
  /** A connection not open after this long is given up and tried again
   * (default 10 s). */
  connectTimeoutMs?: number;
  /** Send `ack_delivered` for what arrives (default true). */
  ackDelivered?: boolean;
  /** Refresh the token this long before it expires (default 60 s). */
  refreshBeforeMs?: number;
  /** Write a send again when its ack has not come this long after it was
   * written on an open connection (default 10 s): an ack can be lost
   * without the connection dropping (live delivery is at most once), and
   * the server answers a resend from the store. */
  resendAfterMs?: number;
}

export type Status = "connecting" | "open" | "reconnecting" | "closed";

/** What a send resolves to once the server has durably stored it. */
export interface Sent {
  client_msg_id: string;
  conversation_id: string;
  message_id: string;
  seq: number;
}

type ErrorFrame = Extract<ServerFrame, { type: "error" }>;

export interface ClientEvents extends Record<string, unknown> {
  status: Status;
  /** A message new to this client (never one already seen). */
  message: Message;
  /** A message edited or deleted. */
  updated: Message;
  receipt: { conversation_id: string; user_id: string; kind: "delivered" | "read"; seq: number };
  /** Who is typing in a conversation changed (a start, a stop, or one
   * running out). */
  typing: { conversation_id: string; users: string[] };
  presence: { user_id: string; status: "online" | "offline"; last_seen: string | null };
  /** An error frame that answers no pending send. */
  error: ErrorFrame;
  /** Something in a conversation changed: re-render it. */
  change: string;
}

/** Sent but not yet acked: resent with the same `client_msg_id` on every
 * reconnect until the server answers. */
interface PendingSend {
  frame: Extract<ClientFrame, { type: "send_message" }>;
  resolve: (sent: Sent) => void;
  reject: (error: SendError) => void;
  /** When it was last written (ms since the epoch). */
  writtenAt: number;
}

/** A send the server refused (the `error` frame's code and message). */
export class SendError extends Error {
  constructor(readonly frame: ErrorFrame) {
    super(`${frame.code}: ${frame.message}`);
    this.name = "SendError";
  }
}

/** Errors a resend cannot fix: the send is given up and its promise
 * rejected. Others (`unavailable`, `rate_limited`, `internal`) are
 * retried on the next connection. */
const FINAL_CODES = new Set([
  "invalid_frame",
  "too_large",
  "forbidden",
  "not_a_member",
  "not_found",
  "conflict",
  "rejected_by_policy",
  "quota_exceeded",
]);

/**
 * One device's session with Switchboard.
 *
 * - Connects, and reconnects with backoff whenever the connection drops.
 * - Resends every unacked send, with the same `client_msg_id`, on each
 *   connection, and on an open one when its ack is overdue
 *   (`resendAfterMs`): the server's idempotency makes a resend of a
 *   stored message return the original.
 * - Pulls the backlog on every (re)connect (this device's undelivered
 *   messages, and each known conversation since its last contiguous
 *   `seq`) and whenever a `seq` gap shows.
 * - Keeps per-conversation state: messages in `seq` order, de-duplicated
 *   by `message_id`; receipts; typing with expiry. And presence.
 */
export class SwitchboardClient extends Emitter<ClientEvents> {
  readonly rest: Rest;
  readonly conversations = new Map<string, ConversationState>();
  readonly presence = new Map<string, { status: "online" | "offline"; last_seen: string | null }>();
  private readonly tokens: Tokens;
  private readonly WebSocketImpl: WebSocketLike;
  private socket: SocketLike | undefined;
  private readonly liveness: Liveness;
  private readonly onOffline = () => this.wentOffline();
  private readonly onOnline = () => this.cameOnline();
  private pending = new Map<string, PendingSend>();
  private pulling = new Set<string>();
  private attempt = 0;
  private stopped = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  private resendTimer: ReturnType<typeof setInterval> | undefined;
  private unackedDelivered = new Map<string, number>();
  private typingTimers = new Map<string, ReturnType<typeof setTimeout>>();
  private counter = 0;
  private currentStatus: Status = "closed";

  constructor(private readonly options: ClientOptions) {
    super();
    this.tokens = new Tokens(options.token);
    const fetchImpl = options.fetch ?? globalThis.fetch?.bind(globalThis);
    this.rest = new Rest(options.url, this.tokens, fetchImpl);
    const ws = options.WebSocket ?? (globalThis.WebSocket as WebSocketLike | undefined);
    if (!ws) throw new Error("no WebSocket: pass options.WebSocket (e.g. the `ws` package under Node 20)");
    this.WebSocketImpl = ws;
    this.liveness = new Liveness({
      intervalMs: options.pingIntervalMs ?? 10_000,
      timeoutMs: options.pongTimeoutMs ?? 5_000,
      ping: () => this.write({ type: "ping" }),
      dead: () => this.dropped(this.socket),
    });
  }

  get status(): Status {
    return this.currentStatus;
  }

  /** Opens the session (and keeps it open until `close`). */
  connect(): void {
    this.stopped = false;
    browserWindow()?.addEventListener("offline", this.onOffline);
    browserWindow()?.addEventListener("online", this.onOnline);
    void this.open();
  }

  /** Closes the session for good; pending sends stay pending. */
  close(): void {
    this.stopped = true;
    browserWindow()?.removeEventListener("offline", this.onOffline);
    browserWindow()?.removeEventListener("online", this.onOnline);
    this.liveness.stop();
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    clearTimeout(this.refreshTimer);
    clearTimeout(this.ackTimer);
    clearInterval(this.resendTimer);
    for (const timer of this.typingTimers.values()) clearTimeout(timer);
    this.typingTimers.clear();
    this.socket?.close(1000);
    this.socket = undefined;
    this.setStatus("closed");
  }

  /** The state of one conversation (created empty on first use). */
  conversation(id: string): ConversationState {
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
  send(conversationId: string, content: Content, clientMsgId = this.newClientMsgId()): Promise<Sent> {
    return new Promise((resolve, reject) => {
      const frame = { type: "send_message" as const, client_msg_id: clientMsgId, conversation_id: conversationId, content };
      const pending = { frame, resolve, reject, writtenAt: 0 };
      this.pending.set(clientMsgId, pending);
      this.writePending(pending);
      this.emit("change", conversationId);
    });
  }

  /** Sends a text message. */
  sendText(conversationId: string, text: string): Promise<Sent> {
    return this.send(conversationId, { kind: "text", text });
  }

  /** How many sends wait for their ack. */
  get pendingSends(): number {
    return this.pending.size;
  }

  /** The sends to a conversation that wait for their ack, in order. */
  pendingIn(conversationId: string): { client_msg_id: string; content: Content }[] {
    return [...this.pending.values()]
      .filter((p) => p.frame.conversation_id === conversationId)
      .map((p) => ({ client_msg_id: p.frame.client_msg_id, content: p.frame.content }));
  }

  /** Who this session speaks for (from its token), once connected. */
  get me(): { user: string; device: string } | undefined {
    return this.tokens.identity();
  }

  edit(conversationId: string, messageId: string, content: Content): void {
    this.write({ type: "edit_message", conversation_id: conversationId, message_id: messageId, content });
  }

  delete(conversationId: string, messageId: string): void {
    this.write({ type: "delete_message", conversation_id: conversationId, message_id: messageId });
  }

  /** Marks everything up to `seq` (default: the newest message) read. */
  markRead(conversationId: string, seq = this.conversation(conversationId).highestSeq): void {
    if (seq > 0) this.write({ type: "ack_read", conversation_id: conversationId, seq });
  }

  typing(conversationId: string, state: TypingState): void {
    this.write({ type: "typing", conversation_id: conversationId, state });
  }

  private newClientMsgId(): string {
    const random = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    this.counter += 1;
    return `${random}-${this.counter}`;
  }

  private setStatus(status: Status): void {
    if (this.currentStatus === status) return;
    this.currentStatus = status;
    this.emit("status", status);
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    this.setStatus(this.attempt === 0 ? "connecting" : "reconnecting");
    let token: string;
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
    this.liveness.expect(this.options.connectTimeoutMs ?? 10_000);
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
    socket.onmessage = (event: { data: unknown }) => {
      if (this.socket !== socket) return;
      this.liveness.heard();
      if (typeof event.data !== "string") return;
      let frame: ServerFrame;
      try {
        frame = JSON.parse(event.data) as ServerFrame;
      } catch {
        return;
      }
      this.handle(frame);
    };
    socket.onclose = () => this.dropped(socket);
    socket.onerror = () => {
      // onclose follows and reconnects.
    };
  }

  /** The connection ended, or is taken for dead (no answer to a ping,
   * not open in time, the browser went offline): it is let go at once,
   * without waiting for a closing handshake a dead peer never answers,
   * and a new one is made. Pending sends stay pending and are written
   * again on it, with their `client_msg_id`. */
  private dropped(socket: SocketLike | undefined): void {
    if (!socket || this.socket !== socket) return;
    this.socket = undefined;
    this.liveness.stop();
    clearTimeout(this.refreshTimer);
    clearInterval(this.resendTimer);
    socket.onopen = socket.onmessage = socket.onclose = null;
    // Not null: `ws` throws an error event no listener takes (closing a
    // socket that is still connecting emits one).
    socket.onerror = () => {};
    try {
      if (socket.terminate) socket.terminate();
      else socket.close();
    } catch {
      // Already closed or never opened.
    }
    this.retry();
  }

  private retry(): void {
    if (this.stopped) return;
    this.setStatus("reconnecting");
    const min = this.options.reconnect?.minDelayMs ?? 250;
    const max = this.options.reconnect?.maxDelayMs ?? 10_000;
    const bound = Math.min(max, min * 2 ** this.attempt);
    this.attempt += 1;
    // Full jitter (anywhere from 0 to the bound), so clients a restart
    // dropped together come back apart.
    const wait = Math.random() * bound;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.open();
    }, wait);
  }

  /** The browser lost its network: the socket cannot be trusted (it may
   * say open for minutes), so it goes now. */
  private wentOffline(): void {
    this.dropped(this.socket);
  }

  /** The network is back: a reconnect waiting out its back-off goes now. */
  private cameOnline(): void {
    if (this.stopped || this.reconnectTimer === undefined) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    void this.open();
  }

  /** Renews the session's token shortly before it expires. */
  private scheduleRefresh(): void {
    clearTimeout(this.refreshTimer);
    const expires = this.tokens.expiresAt();
    if (expires === undefined || !this.tokens.refreshable) return;
    const before = this.options.refreshBeforeMs ?? 60_000;
    const wait = Math.max(1_000, expires - Date.now() - before);
    this.refreshTimer = setTimeout(async () => {
      try {
        const token = await this.tokens.refresh();
        this.write({ type: "refresh", token });
      } catch {
        // The connection ends at expiry and reconnects with a new token.
      }
      this.scheduleRefresh();
    }, wait);
  }

  /** What the connection may have missed: this device's undelivered
   * messages, and each known conversation since its last contiguous
   * `seq` (a conversation that fans out on read keeps no inbox). */
  private catchUp(): void {
    this.pulling.clear();
    this.write({ type: "pull_backlog" });
    for (const state of this.conversations.values()) this.pull(state);
  }

  private pull(state: ConversationState): void {
    if (this.pulling.has(state.conversationId)) return;
    this.pulling.add(state.conversationId);
    this.write({ type: "pull_backlog", conversation_id: state.conversationId, since_seq: state.contiguousSeq });
  }

  private write(frame: ClientFrame): void {
    if (this.socket?.readyState === 1) this.socket.send(JSON.stringify(frame));
  }

  private writePending(pending: PendingSend): void {
    pending.writtenAt = Date.now();
    this.write(pending.frame);
  }

  /** While the connection is open, writes again, in the order they were
   * made, the sends whose acks are overdue. */
  private resendUnacked(): void {
    clearInterval(this.resendTimer);
    const after = this.options.resendAfterMs ?? 10_000;
    this.resendTimer = setInterval(
      () => {
        const overdue = Date.now() - after;
        for (const pending of this.pending.values()) {
          if (pending.writtenAt <= overdue) this.writePending(pending);
        }
      },
      Math.min(1_000, Math.max(50, after / 4)),
    );
    // Under Node, the timer alone does not keep the process alive.
    (this.resendTimer as { unref?: () => void }).unref?.();
  }

  private handle(frame: ServerFrame): void {
    switch (frame.type) {
      case "ack": {
        const pending = this.pending.get(frame.client_msg_id);
        this.pending.delete(frame.client_msg_id);
        // The sending device gets the ack instead of the message: the
        // message joins the conversation's state from what was sent, or
        // from what was stored when a moderation plugin rewrote it (the
        // ack then carries the stored content).
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
            created_at: new Date().toISOString(),
            edited_at: null,
            deleted_at: null,
          });
        }
        pending?.resolve({
          client_msg_id: frame.client_msg_id,
          conversation_id: frame.conversation_id,
          message_id: frame.message_id,
          seq: frame.seq,
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
          seq: frame.seq,
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
        const pending = frame.client_msg_id ? this.pending.get(frame.client_msg_id) : undefined;
        if (pending && FINAL_CODES.has(frame.code)) {
          this.pending.delete(frame.client_msg_id!);
          pending.reject(new SendError(frame));
        } else if (pending) {
          // Busy or unavailable: the same send again, a little later.
          setTimeout(() => {
            if (this.pending.get(pending.frame.client_msg_id) === pending) this.writePending(pending);
          }, 1_000);
        } else {
          this.emit("error", frame);
        }
        return;
      }
      default:
        return;
    }
  }

  private received(message: Message): void {
    const state = this.conversation(message.conversation_id);
    if (!state.add(message)) return;
    this.emit("message", message);
    this.emit("change", state.conversationId);
    // A message from someone stops their typing.
    if (state.typing.delete(message.sender_id)) {
      this.emit("typing", { conversation_id: state.conversationId, users: state.typingUsers() });
    }
    if (state.hasGap) this.pull(state);
    if (this.options.ackDelivered ?? true) this.ackDelivered(state);
  }

  /** Acks what arrived, coalesced over a short window. */
  private ackDelivered(state: ConversationState): void {
    if (state.contiguousSeq === 0) return;
    this.unackedDelivered.set(state.conversationId, state.contiguousSeq);
    if (this.ackTimer !== undefined) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = undefined;
      for (const [conversation, seq] of this.unackedDelivered) {
        this.write({ type: "ack_delivered", conversation_id: conversation, seq });
      }
      this.unackedDelivered.clear();
    }, 200);
  }

  private typed(conversationId: string, userId: string, state: TypingState, expiresInMs: number): void {
    const conversation = this.conversation(conversationId);
    const key = `${conversationId}\u0000${userId}`;
    clearTimeout(this.typingTimers.get(key));
    this.typingTimers.delete(key);
    const until = conversation.setTyping(userId, state, expiresInMs);
    if (until !== undefined) {
      this.typingTimers.set(
        key,
        setTimeout(() => {
          this.typingTimers.delete(key);
          conversation.typing.delete(userId);
          this.emit("typing", { conversation_id: conversationId, users: conversation.typingUsers() });
          this.emit("change", conversationId);
        }, expiresInMs),
      );
    }
    this.emit("typing", { conversation_id: conversationId, users: conversation.typingUsers() });
    this.emit("change", conversationId);
  }
}

/** The browser's window, for its `online` and `offline` events; none
 * under Node or in a worker without them. */
function browserWindow(): Pick<Window, "addEventListener" | "removeEventListener"> | undefined {
  const w = (globalThis as { window?: Window }).window;
  return typeof w?.addEventListener === "function" ? w : undefined;
}
