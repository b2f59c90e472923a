// The commands besides sends: edits, deletes, reactions and votes, whose
// promise settles with the server's answer, and read and delivered marks
// (of a conversation, or of one thread in it), which have no answer. All
// of them wait while there is no connection and go when one opens: none
// is dropped.
//
// Edits and deletes of one conversation go one at a time. The server
// answers one with `message_updated` (the message as it now is) or with
// an `error` that names the request's type and conversation but not its
// message (docs/protocol.md): with one in flight per conversation, that
// error can only be its answer.
//
// Reactions to one message go one at a time too. The server answers one
// with a `reaction` event from the reactor (a repeat is answered to the
// reactor's devices alone, and they get theirs uncoalesced), or with an
// `error` that names the message but not the emoji.
//
// So do votes in one poll (v1.3). The server answers one with a
// `poll_updated` to the voter (a repeat too), or with an `error` naming
// the message. The event names no voter: the vote in flight takes the
// first one of its poll that can be its answer (`answersVote`).
import { CommandError, onRefusal, type ErrorFrame } from "./errors.js";
import { answersVote, type PollUpdatedEvent } from "./polls.js";
import type { ClientFrame, Message, ReactAction, SentContent, ServerFrame } from "./protocol.js";
import type { Custom } from "./status.js";

export type UpdateType = "edit_message" | "delete_message";
export type MarkKind = "read" | "delivered";

/** A `reaction` event (v1.1): `user_id` added or removed `emoji` on a
 * message; `counts` are the message's counts after it, per emoji (an
 * emoji no longer there is absent). In a large channel the server
 * coalesces them: one per message and window, the latest reaction with
 * the counts after every one. */
export type ReactionEvent = Omit<Extract<ServerFrame, { type: "reaction" }>, "type">;

/** An edit, delete, reaction or vote answered, for the `command` event:
 * done (the message as it now is; for a reaction, the `reaction` event
 * that answered it; for a vote, the `poll_updated`) or failed. */
export interface CommandEvent {
  type: UpdateType | "react" | "vote";
  conversation_id: string;
  message_id: string;
  outcome: "done" | "failed";
  message?: Message;
  reaction?: ReactionEvent;
  poll?: PollUpdatedEvent;
  error?: CommandError;
}

/** A stored edit, delete, reaction or mark not yet carried out
 * (persist.ts). A mark with `thread_id` is a thread's read mark. */
export type CommandRecord =
  | { type: UpdateType; conversation_id: string; message_id: string; content?: SentContent; custom?: Custom; created_at: number }
  | { type: "react"; conversation_id: string; message_id: string; emoji: string; action: ReactAction; created_at: number }
  | { type: "vote"; conversation_id: string; message_id: string; option_ids: string[]; created_at: number }
  | { type: "ack_read" | "ack_delivered"; conversation_id: string; seq: number; thread_id?: string };

interface Update {
  type: UpdateType | "react" | "vote";
  conversationId: string;
  messageId: string;
  content: SentContent | undefined;
  /** An edit's new `custom` fields (v1.3); undefined keeps them. */
  custom?: Custom;
  /** A reaction's emoji and action. */
  emoji?: string;
  action?: ReactAction;
  /** A vote's choice (v1.3). */
  optionIds?: string[];
  createdAt: number;
  writtenAt: number;
  answers: number;
  retryAt: number;
  waiters: { resolve: (answer: never) => void; reject: (e: CommandError) => void }[];
}

interface Mark {
  seq: number;
  waiters: (() => void)[];
}

export interface CommandsHost {
  write(frame: ClientFrame): boolean;
  hasRoom(): boolean;
  /** The queue changed (for the store). */
  changed(): void;
  settled(event: CommandEvent): void;
  busy(): void;
}

export interface CommandsOptions {
  resendAfterMs: number;
  giveUpAfterMs: number | undefined;
}

/** Marks written this recently before a connection ended are written
 * again on the next one: the server keeps a connection's marks for a
 * receipt window (1 s by default) before it stores them. */
const MARK_WINDOW_MS = 2_000;

const key = (kind: MarkKind, conversationId: string, threadId?: string) =>
  `${kind}\u0000${conversationId}\u0000${threadId ?? ""}`;

/** A mark's key taken apart. */
function parts(k: string): [MarkKind, string, string | undefined] {
  const [kind, conversationId, threadId] = k.split("\u0000") as [MarkKind, string, string];
  return [kind, conversationId, threadId || undefined];
}

/** Edits and deletes queue per conversation, reactions per message,
 * votes per poll. */
const laneOf = (u: { type: Update["type"]; conversationId: string; messageId: string }) =>
  u.type === "react"
    ? `${u.conversationId}\u0000${u.messageId}`
    : u.type === "vote"
      ? `${u.conversationId}\u0000${u.messageId}\u0000vote`
      : u.conversationId;

export class Commands {
  /** Per conversation (edits and deletes), message (reactions) or poll
   * (votes), in order; the first is in flight once written. */
  private readonly lanes = new Map<string, Update[]>();
  /** Per kind and conversation (or thread), the highest mark not yet
   * written. */
  private readonly marks = new Map<string, Mark>();
  /** Per kind and conversation (or thread), the highest mark written, and when. */
  private readonly written = new Map<string, { seq: number; at: number; retryAt: number }>();

  constructor(
    private readonly host: CommandsHost,
    private readonly options: CommandsOptions,
  ) {}

  /** Edits, deletes, reactions and votes waiting or in flight. */
  get size(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.length;
    return n;
  }

  update(type: UpdateType, conversationId: string, messageId: string, content?: SentContent, custom?: Custom): Promise<Message> {
    if (!this.host.hasRoom()) {
      return Promise.reject(new CommandError(type, conversationId, "queue_full", "too many commands wait for a connection"));
    }
    return new Promise<Message>((resolve, reject) => {
      this.enqueue({
        type,
        conversationId,
        messageId,
        content,
        ...(custom ? { custom } : {}),
        createdAt: Date.now(),
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [{ resolve, reject }],
      });
    });
  }

  /** Adds or removes a reaction: resolves with the `reaction` event that
   * answers it (a repeat is answered too: reactions are idempotent). */
  react(conversationId: string, messageId: string, emoji: string, action: ReactAction): Promise<ReactionEvent> {
    if (!this.host.hasRoom()) {
      return Promise.reject(new CommandError("react", conversationId, "queue_full", "too many commands wait for a connection"));
    }
    return new Promise<ReactionEvent>((resolve, reject) => {
      this.enqueue({
        type: "react",
        conversationId,
        messageId,
        content: undefined,
        emoji,
        action,
        createdAt: Date.now(),
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [{ resolve, reject }],
      });
    });
  }

  /** Replaces the user's vote in a poll (v1.3; empty retracts it):
   * resolves with the `poll_updated` that answers it (a repeat is
   * answered too: votes are idempotent). */
  vote(conversationId: string, messageId: string, optionIds: string[]): Promise<PollUpdatedEvent> {
    if (!this.host.hasRoom()) {
      return Promise.reject(new CommandError("vote", conversationId, "queue_full", "too many commands wait for a connection"));
    }
    return new Promise<PollUpdatedEvent>((resolve, reject) => {
      this.enqueue({
        type: "vote",
        conversationId,
        messageId,
        content: undefined,
        optionIds,
        createdAt: Date.now(),
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [{ resolve, reject }],
      });
    });
  }

  /** Moves a mark (with `threadId`, the read mark of that thread):
   * resolves once it is written (or one at least as high was); while
   * there is no connection only the highest waits. */
  mark(kind: MarkKind, conversationId: string, seq: number, threadId?: string): Promise<void> {
    const k = key(kind, conversationId, threadId);
    const done = this.written.get(k);
    if (done && done.seq >= seq) return Promise.resolve();
    return new Promise((resolve) => {
      const waiting = this.marks.get(k);
      if (waiting && waiting.seq >= seq) {
        waiting.waiters.push(resolve);
        return;
      }
      this.marks.set(k, { seq, waiters: [...(waiting?.waiters ?? []), resolve] });
      this.host.changed();
      this.writeMark(k);
    });
  }

  /** A `message_updated`: the answer of the edit or delete in flight for
   * that message, if one is. */
  updated(message: Message): void {
    const lane = this.lanes.get(message.conversation_id);
    const head = lane?.[0];
    if (!head || head.messageId !== message.message_id || head.writtenAt === 0) return;
    // A deletion is no answer to an edit: the edit's own answer (its
    // update, or `conflict`) is still on its way.
    if (head.type === "edit_message" && message.deleted_at) return;
    if (head.type === "delete_message" && !message.deleted_at) return;
    this.settle(head, message);
  }

  /** A `reaction` event: the answer of the reaction in flight on that
   * message, if it is the reactor's (`me`) with that emoji and action. */
  reacted(event: ReactionEvent, me: string | undefined): void {
    const head = this.lanes.get(`${event.conversation_id}\u0000${event.message_id}`)?.[0];
    if (!head || head.writtenAt === 0 || event.user_id !== me) return;
    if (head.emoji !== event.emoji || head.action !== event.action) return;
    this.settle(head, event);
  }

  /** The choice of the vote in flight on that poll that a `poll_updated`
   * answers (`me`: this client's user), if one does. */
  voteAnswered(event: PollUpdatedEvent, me: string | undefined): readonly string[] | undefined {
    const head = this.lanes.get(`${event.conversation_id}\u0000${event.message_id}\u0000vote`)?.[0];
    if (!head || head.writtenAt === 0 || !answersVote(event, head.optionIds!, me)) return undefined;
    return head.optionIds;
  }

  /** A `poll_updated` event: the answer of the vote in flight on that
   * poll, if it can be (`voteAnswered`). */
  polled(event: PollUpdatedEvent, me: string | undefined): void {
    if (!this.voteAnswered(event, me)) return;
    this.settle(this.lanes.get(`${event.conversation_id}\u0000${event.message_id}\u0000vote`)![0], event);
  }

  /** An `error` frame: whether it answered a command here, and if so
   * whether that command is `settled` (refused for good) or `retrying`. */
  refused(frame: ErrorFrame): "settled" | "retrying" | undefined {
    const conversationId = frame.conversation_id;
    if (!conversationId) return undefined;
    if (frame.request_type === "ack_read" || frame.request_type === "ack_delivered") {
      const kind: MarkKind = frame.request_type === "ack_read" ? "read" : "delivered";
      // A thread's read mark is answered naming its root.
      const thread = kind === "read" ? (frame.message_id ?? undefined) : undefined;
      const written = this.written.get(key(kind, conversationId, thread));
      // The mark was taken as written: one worth retrying goes again.
      if (!written || onRefusal(frame.code, 1).final) return undefined;
      written.retryAt = Date.now() + 1_000;
      this.host.busy();
      return "retrying";
    }
    const perMessage = frame.request_type === "react" || frame.request_type === "vote";
    const lane = perMessage
      ? frame.message_id
        ? laneOf({ type: frame.request_type as "react" | "vote", conversationId, messageId: frame.message_id })
        : undefined
      : conversationId;
    const head = lane === undefined ? undefined : this.lanes.get(lane)?.[0];
    if (!head || head.type !== frame.request_type) return undefined;
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
  writeAll(): void {
    for (const lane of this.lanes.values()) {
      lane[0].retryAt = 0;
      this.writeUpdate(lane[0]);
    }
    for (const k of [...this.marks.keys()]) this.writeMark(k);
  }

  /** The connection ended: what is in flight goes again on the next one,
   * and so do marks written just before (the server may not have stored
   * them yet). */
  lost(): void {
    for (const lane of this.lanes.values()) lane[0].writtenAt = 0;
    const recent = Date.now() - MARK_WINDOW_MS;
    for (const [k, w] of this.written) {
      if (w.at < recent || this.marks.has(k)) continue;
      this.marks.set(k, { seq: w.seq, waiters: [] });
    }
  }

  /** Writes again what is overdue or due after a refusal, and gives up
   * what waited too long; says whether anything still waits. */
  tick(now: number, open: boolean): boolean {
    let busy = false;
    for (const lane of [...this.lanes.values()]) {
      const head = lane[0];
      const giveUp = this.options.giveUpAfterMs;
      if (giveUp !== undefined && now >= head.createdAt + giveUp) {
        const waited = Math.round((now - head.createdAt) / 1000);
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
        // The answer can be lost with the connection up (live delivery
        // is at most once); an edit, delete, reaction or vote again is a
        // repeat the server answers with things as they stand.
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
  records(): CommandRecord[] {
    const out: CommandRecord[] = [];
    for (const lane of this.lanes.values()) {
      for (const u of lane) {
        if (u.type === "react") {
          out.push({
            type: "react",
            conversation_id: u.conversationId,
            message_id: u.messageId,
            emoji: u.emoji!,
            action: u.action!,
            created_at: u.createdAt,
          });
          continue;
        }
        if (u.type === "vote") {
          out.push({
            type: "vote",
            conversation_id: u.conversationId,
            message_id: u.messageId,
            option_ids: [...u.optionIds!],
            created_at: u.createdAt,
          });
          continue;
        }
        out.push({
          type: u.type,
          conversation_id: u.conversationId,
          message_id: u.messageId,
          ...(u.content ? { content: u.content } : {}),
          ...(u.custom ? { custom: u.custom } : {}),
          created_at: u.createdAt,
        });
      }
    }
    for (const [k, m] of this.marks) {
      const [kind, conversationId, threadId] = parts(k);
      out.push({
        type: kind === "read" ? "ack_read" : "ack_delivered",
        conversation_id: conversationId,
        seq: m.seq,
        ...(threadId ? { thread_id: threadId } : {}),
      });
    }
    return out;
  }

  /** Takes back stored commands; their outcome is told by the `command`
   * event (nobody holds their promise any more). */
  restore(records: CommandRecord[]): void {
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
        content: r.type === "react" || r.type === "vote" ? undefined : r.content,
        ...(r.type !== "react" && r.type !== "vote" && r.custom ? { custom: r.custom } : {}),
        ...(r.type === "react" ? { emoji: r.emoji, action: r.action } : {}),
        ...(r.type === "vote" ? { optionIds: [...r.option_ids] } : {}),
        createdAt: r.created_at,
        writtenAt: 0,
        answers: 0,
        retryAt: 0,
        waiters: [],
      });
    }
  }

  /** Forgets everything (the stored state was someone else's). */
  clear(): void {
    this.lanes.clear();
    this.marks.clear();
    this.written.clear();
  }

  private enqueue(u: Update): void {
    const name = laneOf(u);
    const lane = this.lanes.get(name);
    if (lane) lane.push(u);
    else this.lanes.set(name, [u]);
    this.host.changed();
    this.host.busy();
    if (!lane) this.writeUpdate(u);
  }

  private writeUpdate(u: Update): void {
    const frame: ClientFrame =
      u.type === "edit_message"
        ? {
            type: "edit_message",
            conversation_id: u.conversationId,
            message_id: u.messageId,
            content: u.content!,
            ...(u.custom ? { custom: u.custom } : {}),
          }
        : u.type === "delete_message"
          ? { type: "delete_message", conversation_id: u.conversationId, message_id: u.messageId }
          : u.type === "react"
            ? { type: "react", conversation_id: u.conversationId, message_id: u.messageId, emoji: u.emoji!, action: u.action! }
            : { type: "vote", conversation_id: u.conversationId, message_id: u.messageId, option_ids: [...u.optionIds!] };
    if (this.host.write(frame)) u.writtenAt = Date.now();
  }

  private writeMark(k: string): void {
    const m = this.marks.get(k);
    if (!m) return;
    const [kind, conversationId, threadId] = parts(k);
    const frame: ClientFrame =
      kind === "read"
        ? { type: "ack_read", conversation_id: conversationId, seq: m.seq, ...(threadId ? { thread_id: threadId } : {}) }
        : { type: "ack_delivered", conversation_id: conversationId, seq: m.seq };
    if (!this.host.write(frame)) return;
    this.marks.delete(k);
    const before = this.written.get(k);
    this.written.set(k, { seq: Math.max(m.seq, before?.seq ?? 0), at: Date.now(), retryAt: 0 });
    this.host.changed();
    for (const resolve of m.waiters) resolve();
  }

  private settle(u: Update, outcome: Message | ReactionEvent | PollUpdatedEvent | CommandError): void {
    const name = laneOf(u);
    const lane = this.lanes.get(name);
    if (!lane || lane[0] !== u) return;
    lane.shift();
    if (lane.length === 0) this.lanes.delete(name);
    this.host.changed();
    const failed = outcome instanceof CommandError;
    for (const w of u.waiters) {
      if (failed) w.reject(outcome);
      else w.resolve(outcome as never);
    }
    this.host.settled({
      type: u.type,
      conversation_id: u.conversationId,
      message_id: u.messageId,
      outcome: failed ? "failed" : "done",
      ...(failed
        ? { error: outcome }
        : u.type === "react"
          ? { reaction: outcome as ReactionEvent }
          : u.type === "vote"
            ? { poll: outcome as PollUpdatedEvent }
            : { message: outcome as Message }),
    });
    // The next one of the conversation goes now.
    if (lane.length) this.writeUpdate(lane[0]);
  }
}
