// Every message this client sends, from the moment it is made until the
// server stores it: its status (`pending`, then `sent` or `failed`),
// resends with the same `client_msg_id`, and `retry()`.
import { CommandError, SendError, isSlowMode, onRefusal, type ErrorFrame } from "./errors.js";
import type { ClientFrame, SentContent, ServerFrame } from "./protocol.js";

/** Where a message this client sent stands: `pending` (not stored yet:
 * written, or waiting for a connection), `sent` (the server's durable
 * `ack` came), `failed` (refused for a reason a resend cannot fix, or
 * given up; `retry()` tries again). */
export type MessageStatus = "pending" | "sent" | "failed";

/** What a send resolves to once the server has durably stored it. */
export interface Sent {
  client_msg_id: string;
  conversation_id: string;
  message_id: string;
  seq: number;
}

/** A message's own fields (v1.3): a JSON object, at most 4096 bytes. */
export type Custom = { [key: string]: unknown };

/** What a send carries besides its content (v1.1), as the
 * `send_message` frame names it: the message it replies to (quoted in
 * the main timeline), the root of the thread it goes into, the members
 * it mentions, whether it mentions everyone (owners and admins), and
 * (v1.3) its `custom` fields and `previews: false` (no link previews). */
export interface SendExtras {
  reply_to?: string;
  thread_id?: string;
  mentions?: string[];
  mention_all?: boolean;
  custom?: Custom;
  /** `false`: the server unfurls none of its links (v1.3); `true`, the
   * default, is left out of the frame. */
  previews?: boolean;
}

/** A message this client sent (or is sending). */
export interface OutgoingMessage {
  readonly client_msg_id: string;
  readonly conversation_id: string;
  readonly content: SentContent;
  /** The message it replies to, or null. */
  readonly reply_to: string | null;
  /** The root of the thread it goes into, or null (the main timeline). */
  readonly thread_id: string | null;
  /** The members it mentions. */
  readonly mentions: readonly string[];
  /** Whether it mentions everyone. */
  readonly mention_all: boolean;
  /** Its `custom` fields (v1.3), or null. */
  readonly custom: Custom | null;
  /** Whether the server may unfurl its links (v1.3): false when it was
   * sent with `previews: false`. */
  readonly previews: boolean;
  /** When the app made it (this device's clock). */
  readonly created_at: string;
  readonly status: MessageStatus;
  /** Why it failed, while `failed`. */
  readonly error: CommandError | undefined;
  /** Where it was stored, once `sent`. */
  readonly sent: Sent | undefined;
  /** Sends it again with the same `client_msg_id` (the server stores it
   * once however often it comes): a failed message becomes pending, a
   * pending one is written again now; resolves with its ack. */
  retry(): Promise<Sent>;
  /** Forgets a failed message (it leaves `outgoing`); false for one that
   * is pending or sent, which cannot be taken back. */
  discard(): boolean;
}

/** A stored pending or failed send (persist.ts). */
export interface OutgoingRecord {
  client_msg_id: string;
  conversation_id: string;
  content: SentContent;
  created_at: string;
  status: "pending" | "failed";
  error?: { code: string; message: string };
  reply_to?: string;
  thread_id?: string;
  mentions?: string[];
  mention_all?: boolean;
  custom?: Custom;
  previews?: boolean;
}

type SendFrame = Extract<ClientFrame, { type: "send_message" }>;
type AckFrame = Extract<ServerFrame, { type: "ack" }>;

export interface OutboxHost {
  /** Writes a frame if the connection is open; says whether it did. */
  write(frame: ClientFrame): boolean;
  /** Whether one more command may wait (`maxQueued`). */
  hasRoom(): boolean;
  /** A message's status changed, or it left the outbox. */
  changed(message: Outgoing, removed: boolean): void;
  /** Something is pending: the client's timer should run. */
  busy(): void;
}

export interface OutboxOptions {
  resendAfterMs: number;
  giveUpAfterMs: number | undefined;
}

class Waiters {
  private list: { resolve: (sent: Sent) => void; reject: (error: CommandError) => void }[] = [];

  add(): Promise<Sent> {
    return new Promise((resolve, reject) => this.list.push({ resolve, reject }));
  }

  resolve(sent: Sent): void {
    for (const w of this.list.splice(0)) w.resolve(sent);
  }

  reject(error: CommandError): void {
    for (const w of this.list.splice(0)) w.reject(error);
  }
}

export class Outgoing implements OutgoingMessage {
  status: MessageStatus = "pending";
  error: CommandError | undefined;
  sent: Sent | undefined;
  /** When it was last written (ms since the epoch); 0: not on this
   * connection. */
  writtenAt = 0;
  /** Refusals answered since it was last made pending. */
  answers = 0;
  /** Written again no sooner than this (after a refusal worth retrying). */
  retryAt = 0;
  /** Given up at this time (0: never). */
  giveUpAt = 0;
  readonly waiters = new Waiters();
  readonly reply_to: string | null;
  readonly thread_id: string | null;
  readonly mentions: readonly string[];
  readonly mention_all: boolean;
  readonly custom: Custom | null;
  readonly previews: boolean;

  constructor(
    private readonly outbox: Outbox,
    readonly client_msg_id: string,
    readonly conversation_id: string,
    readonly content: SentContent,
    readonly created_at: string,
    extras: SendExtras = {},
  ) {
    this.reply_to = extras.reply_to ?? null;
    this.thread_id = extras.thread_id ?? null;
    this.mentions = extras.mentions ?? [];
    this.mention_all = extras.mention_all ?? false;
    this.custom = extras.custom ?? null;
    this.previews = extras.previews !== false;
  }

  /** What it carries besides its content, as sent (absent fields left out). */
  get extras(): SendExtras {
    return {
      ...(this.reply_to ? { reply_to: this.reply_to } : {}),
      ...(this.thread_id ? { thread_id: this.thread_id } : {}),
      ...(this.mentions.length ? { mentions: [...this.mentions] } : {}),
      ...(this.mention_all ? { mention_all: true } : {}),
      ...(this.custom ? { custom: this.custom } : {}),
      ...(this.previews ? {} : { previews: false }),
    };
  }

  get frame(): SendFrame {
    return {
      type: "send_message",
      client_msg_id: this.client_msg_id,
      conversation_id: this.conversation_id,
      content: this.content,
      ...this.extras,
    };
  }

  retry(): Promise<Sent> {
    return this.outbox.retry(this);
  }

  discard(): boolean {
    return this.outbox.discard(this);
  }
}

/** The sends not yet stored, in the order they were made. */
export class Outbox {
  private readonly items = new Map<string, Outgoing>();

  constructor(
    private readonly host: OutboxHost,
    private readonly options: OutboxOptions,
  ) {}

  get(clientMsgId: string): Outgoing | undefined {
    return this.items.get(clientMsgId);
  }

  /** Pending and failed sends, in the order they were made. */
  all(): Outgoing[] {
    return [...this.items.values()];
  }

  get pendingCount(): number {
    let n = 0;
    for (const o of this.items.values()) if (o.status === "pending") n += 1;
    return n;
  }

  send(conversationId: string, content: SentContent, clientMsgId: string, extras: SendExtras = {}): Promise<Sent> {
    const known = this.items.get(clientMsgId);
    if (known) return known.status === "failed" ? this.retry(known) : known.waiters.add();
    const room = this.host.hasRoom();
    const o = new Outgoing(this, clientMsgId, conversationId, content, new Date().toISOString(), extras);
    this.items.set(clientMsgId, o);
    const done = o.waiters.add();
    if (room) this.makePending(o);
    else this.fail(o, new CommandError("send_message", conversationId, "queue_full", "too many commands wait for a connection"));
    return done;
  }

  retry(o: Outgoing): Promise<Sent> {
    if (o.status === "sent") return Promise.resolve(o.sent!);
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

  discard(o: Outgoing): boolean {
    if (o.status !== "failed" || this.items.get(o.client_msg_id) !== o) return false;
    this.items.delete(o.client_msg_id);
    this.host.changed(o, true);
    return true;
  }

  /** The server stored a send: returns it, now `sent` and out of the
   * outbox (also when it had failed: a late ack of a send given up is
   * still the truth); undefined for an ack of nothing here. */
  acked(frame: AckFrame): Outgoing | undefined {
    const o = this.items.get(frame.client_msg_id);
    // A `scheduled` ack (v1.2) names no stored message: this outbox sends
    // now (`SwitchboardClient.schedule` keeps messages for later).
    if (!o || frame.message_id == null || frame.seq == null) return undefined;
    this.items.delete(o.client_msg_id);
    o.status = "sent";
    o.error = undefined;
    o.sent = {
      client_msg_id: frame.client_msg_id,
      conversation_id: frame.conversation_id,
      message_id: frame.message_id,
      seq: frame.seq,
    };
    this.host.changed(o, true);
    o.waiters.resolve(o.sent);
    return o;
  }

  /** An `error` frame naming a send here: true when it answered one. */
  refused(frame: ErrorFrame): boolean {
    const o = frame.client_msg_id ? this.items.get(frame.client_msg_id) : undefined;
    if (!o) return false;
    if (o.status !== "pending") return true;
    o.answers += 1;
    // Slow mode (v1.2) refuses that client_msg_id for good.
    const next = isSlowMode(frame) ? ({ final: true } as const) : onRefusal(frame.code, o.answers);
    if (next.final) this.fail(o, new SendError({ ...frame, conversation_id: frame.conversation_id ?? o.conversation_id }));
    else o.retryAt = Date.now() + next.delayMs;
    return true;
  }

  /** A connection opened: every pending send goes, in order. */
  writeAll(): void {
    for (const o of this.items.values()) {
      if (o.status !== "pending") continue;
      o.retryAt = 0;
      this.write(o);
    }
  }

  /** The connection ended: nothing is written on the next one yet. */
  lost(): void {
    for (const o of this.items.values()) o.writtenAt = 0;
  }

  /** Resends what is overdue or due after a refusal, and gives up what
   * waited too long; says whether anything is still pending. */
  tick(now: number, open: boolean): boolean {
    let pending = false;
    for (const o of this.items.values()) {
      if (o.status !== "pending") continue;
      if (o.giveUpAt && now >= o.giveUpAt) {
        const waited = Math.round((now - Date.parse(o.created_at)) / 1000);
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
        // An ack can be lost while the connection stays up (live
        // delivery is at most once): the server answers a resend from
        // the store.
        this.write(o);
      }
    }
    return pending;
  }

  /** Every pending and failed send, for the store. */
  records(): OutgoingRecord[] {
    return this.all().map((o) => ({
      client_msg_id: o.client_msg_id,
      conversation_id: o.conversation_id,
      content: o.content,
      created_at: o.created_at,
      status: o.status === "failed" ? "failed" : "pending",
      ...(o.error ? { error: { code: o.error.code, message: o.error.message } } : {}),
      ...o.extras,
    }));
  }

  /** Takes back stored sends (before any made since: they came first). */
  restore(records: OutgoingRecord[]): Outgoing[] {
    const restored: Outgoing[] = [];
    const newer = [...this.items.values()];
    this.items.clear();
    for (const r of records) {
      if (newer.some((n) => n.client_msg_id === r.client_msg_id)) continue;
      const o = new Outgoing(this, r.client_msg_id, r.conversation_id, r.content, r.created_at, {
        reply_to: r.reply_to,
        thread_id: r.thread_id,
        mentions: r.mentions,
        mention_all: r.mention_all,
        custom: r.custom,
        previews: r.previews,
      });
      if (r.status === "failed") {
        o.status = "failed";
        const code = (r.error?.code ?? "internal") as CommandError["code"];
        o.error = new CommandError("send_message", r.conversation_id, code, stripCode(r.error?.message ?? "failed", code));
      } else if (this.options.giveUpAfterMs !== undefined) {
        o.giveUpAt = Date.parse(r.created_at) + this.options.giveUpAfterMs;
      }
      this.items.set(o.client_msg_id, o);
      restored.push(o);
    }
    for (const n of newer) this.items.set(n.client_msg_id, n);
    if (restored.some((o) => o.status === "pending")) this.host.busy();
    return restored;
  }

  /** Forgets everything (the stored state was someone else's). */
  clear(): void {
    this.items.clear();
  }

  private makePending(o: Outgoing): void {
    o.status = "pending";
    o.error = undefined;
    o.answers = 0;
    o.retryAt = 0;
    o.giveUpAt = this.options.giveUpAfterMs === undefined ? 0 : Date.now() + this.options.giveUpAfterMs;
    this.host.changed(o, false);
    this.host.busy();
    this.write(o);
  }

  private write(o: Outgoing): void {
    if (this.host.write(o.frame)) o.writtenAt = Date.now();
  }

  private fail(o: Outgoing, error: CommandError): void {
    o.status = "failed";
    o.error = error;
    o.writtenAt = 0;
    this.host.changed(o, false);
    o.waiters.reject(error);
  }
}

/** A stored error's message without the `code: ` its Error put first. */
function stripCode(message: string, code: string): string {
  return message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message;
}
