import type { Message, ReceiptKind, TypingState } from "./protocol.js";
import type { OutgoingMessage } from "./status.js";

/** A conversation's state as the store keeps it (persist.ts): its
 * newest messages and its cursors. */
export interface ConversationSnapshot {
  conversation_id: string;
  contiguous_seq: number;
  highest_seq: number;
  messages: Message[];
  receipts: [string, { delivered: number; read: number }][];
}

/** What a client knows of one conversation: its messages in `seq`
 * order (one per `message_id`), the messages this client is sending,
 * every member's receipts, and who is typing now. */
export class ConversationState {
  /** By `message_id`: a message seen twice (a replay, a resend) is one. */
  private readonly byId = new Map<string, Message>();
  private sorted: Message[] | undefined = [];
  private readonly seqs = new Set<number>();
  /** The highest `seq` up to which every message has been seen. A
   * conversation first met by a live message starts from there: what
   * came before is history (`Rest.history`), not a gap. */
  contiguousSeq = 0;
  /** The highest `seq` seen at all. */
  highestSeq = 0;
  /** Per member: the highest `seq` delivered to and read by them. */
  readonly receipts = new Map<string, { delivered: number; read: number }>();
  /** Per member typing now: when their `start` runs out (ms). */
  readonly typing = new Map<string, number>();

  private readonly out = new Map<string, OutgoingMessage>();

  constructor(readonly conversationId: string) {}

  /** What this client sent here that is not stored yet, in the order it
   * was made: `pending` and `failed` messages (see `OutgoingMessage`).
   * Once stored, a message is in `messages` instead. */
  get outgoing(): readonly OutgoingMessage[] {
    return [...this.out.values()];
  }

  /** Tracks one of this client's messages (the client calls this). */
  track(message: OutgoingMessage, present: boolean): void {
    if (present) this.out.set(message.client_msg_id, message);
    else this.out.delete(message.client_msg_id);
  }

  /** Every message, in `seq` order. */
  get messages(): readonly Message[] {
    if (!this.sorted) this.sorted = [...this.byId.values()].sort((a, b) => a.seq - b.seq);
    return this.sorted;
  }

  get(messageId: string): Message | undefined {
    return this.byId.get(messageId);
  }

  /** Adds a new message; false when it is one already known (by id). */
  add(message: Message): boolean {
    if (this.byId.has(message.message_id)) return false;
    if (this.byId.size === 0 && this.contiguousSeq === 0) this.contiguousSeq = message.seq - 1;
    this.byId.set(message.message_id, message);
    this.seqs.add(message.seq);
    this.sorted = undefined;
    this.highestSeq = Math.max(this.highestSeq, message.seq);
    this.advance();
    // Sending marks what came before as read: a member's message says
    // they read up to it, whether or not a receipt follows.
    this.receipt(message.sender_id, "read", message.seq);
    return true;
  }

  /** Replaces a message with its edited or deleted self (or adds it);
   * says whether anything changed. */
  update(message: Message): boolean {
    const known = this.byId.get(message.message_id);
    if (!known) return this.add(message);
    // Never go back: an older version arriving late is ignored.
    const stamp = (m: Message) => Date.parse(m.deleted_at ?? m.edited_at ?? m.created_at);
    if (known.deleted_at && !message.deleted_at) return false;
    if (stamp(message) < stamp(known)) return false;
    if (sameVersion(known, message)) return false;
    this.byId.set(message.message_id, message);
    this.sorted = undefined;
    return true;
  }

  /** Whether a `seq` is missing below the highest seen. */
  get hasGap(): boolean {
    return this.contiguousSeq < this.highestSeq;
  }

  /** Moves a member's mark forward (marks never go back). */
  receipt(userId: string, kind: ReceiptKind, seq: number): void {
    const marks = this.receipts.get(userId) ?? { delivered: 0, read: 0 };
    marks[kind] = Math.max(marks[kind], seq);
    // What was read was delivered.
    if (kind === "read") marks.delivered = Math.max(marks.delivered, seq);
    this.receipts.set(userId, marks);
  }

  /** Records a typing frame; returns when it runs out, if it started. */
  setTyping(userId: string, state: TypingState, expiresInMs: number, now = Date.now()): number | undefined {
    if (state === "stop") {
      this.typing.delete(userId);
      return undefined;
    }
    const until = now + expiresInMs;
    this.typing.set(userId, until);
    return until;
  }

  /** Users typing at `now`. */
  typingUsers(now = Date.now()): string[] {
    return [...this.typing].filter(([, until]) => until > now).map(([user]) => user);
  }

  /** Says that everything up to `seq` is known (a replay ended there,
   * or the app loaded that history). */
  caughtUpTo(seq: number): void {
    this.contiguousSeq = Math.max(this.contiguousSeq, seq);
    this.highestSeq = Math.max(this.highestSeq, seq);
    this.advance();
  }

  /** The newest `limit` messages and the cursors, for the store. */
  snapshot(limit: number): ConversationSnapshot {
    const messages = this.messages;
    return {
      conversation_id: this.conversationId,
      contiguous_seq: this.contiguousSeq,
      highest_seq: this.highestSeq,
      messages: messages.slice(Math.max(0, messages.length - limit)),
      receipts: [...this.receipts].map(([user, marks]) => [user, { ...marks }]),
    };
  }

  /** Takes back a stored state (merged with what is known already). */
  restore(snapshot: ConversationSnapshot): void {
    for (const m of snapshot.messages) this.update(m);
    this.caughtUpTo(snapshot.contiguous_seq);
    this.highestSeq = Math.max(this.highestSeq, snapshot.highest_seq);
    for (const [user, marks] of snapshot.receipts) {
      this.receipt(user, "delivered", marks.delivered);
      this.receipt(user, "read", marks.read);
    }
  }

  private advance(): void {
    while (this.seqs.has(this.contiguousSeq + 1)) this.contiguousSeq += 1;
  }
}

function sameVersion(a: Message, b: Message): boolean {
  return (
    (a.edited_at ?? null) === (b.edited_at ?? null) &&
    (a.deleted_at ?? null) === (b.deleted_at ?? null) &&
    JSON.stringify(a.content ?? null) === JSON.stringify(b.content ?? null)
  );
}
