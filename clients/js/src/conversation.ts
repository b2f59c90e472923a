import type { Message, ReceiptKind, TypingState } from "./protocol.js";

/** What a client knows of one conversation: its messages in `seq`
 * order (one per `message_id`), every member's receipts, and who is
 * typing now. */
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

  constructor(readonly conversationId: string) {}

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

  /** Replaces a message with its edited or deleted self (or adds it). */
  update(message: Message): void {
    const known = this.byId.get(message.message_id);
    if (!known) {
      this.add(message);
      return;
    }
    // Never go back: an older version arriving late is ignored.
    const stamp = (m: Message) => Date.parse(m.deleted_at ?? m.edited_at ?? m.created_at);
    if (known.deleted_at && !message.deleted_at) return;
    if (stamp(message) < stamp(known)) return;
    this.byId.set(message.message_id, message);
    this.sorted = undefined;
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

  private advance(): void {
    while (this.seqs.has(this.contiguousSeq + 1)) this.contiguousSeq += 1;
  }
}
