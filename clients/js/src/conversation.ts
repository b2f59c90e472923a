import type { ReactionEvent } from "./commands.js";
import type { components } from "./openapi.js";
import { choiceAfter, freshResults, inPollOrder, type PollUpdatedEvent } from "./polls.js";
import type { Message, PinAction, PollContent, Reaction, ReceiptKind, Role, TypingState } from "./protocol.js";
import type { OutgoingMessage } from "./status.js";

/** A pinned message of a conversation (v1.1): which, by whom, when. */
export interface PinInfo {
  message_id: string;
  by: string;
  pinned_at: string;
}

/** The settings of a conversation that affect every member (v1.2):
 * slow mode (seconds between one plain member's messages; 0: off), how
 * many days messages are kept, and how many seconds each lives (null:
 * no limit). */
export interface PolicyInfo {
  slow_mode_secs: number;
  retention_days: number | null;
  disappearing_secs: number | null;
  /** v1.3: only owners and admins post, react or change the members. */
  frozen: boolean;
}

/** A conversation object's (or a `conversation_updated` message's)
 * policy, with what it leaves out as the defaults. */
export function policyOf(p: {
  slow_mode_secs?: number | null;
  retention_days?: number | null;
  disappearing_secs?: number | null;
  frozen?: boolean | null;
}): PolicyInfo {
  return {
    slow_mode_secs: p.slow_mode_secs ?? 0,
    retention_days: p.retention_days ?? null,
    disappearing_secs: p.disappearing_secs ?? null,
    frozen: p.frozen === true,
  };
}

/** A conversation's state as the store keeps it (persist.ts): its
 * newest messages and its cursors (and, since v1.1, its members' roles
 * and its pins, and since v1.2 its policy, when known). */
export interface ConversationSnapshot {
  conversation_id: string;
  contiguous_seq: number;
  highest_seq: number;
  messages: Message[];
  receipts: [string, { delivered: number; read: number }][];
  roles?: [string, Role][];
  pins?: PinInfo[];
  policy?: PolicyInfo;
}

/** Whether a message mentions `user`: by name, or everyone
 * (`mention_all`). */
export function mentionsUser(message: Pick<Message, "mentions" | "mention_all">, user: string | undefined): boolean {
  if (!user) return false;
  return message.mention_all === true || (message.mentions ?? []).includes(user);
}

/** How many repliers a thread summary names (the server's bound). */
const PARTICIPANTS = 10;

/** What a client knows of one conversation: its messages in `seq`
 * order (one per `message_id`), the messages this client is sending,
 * every member's receipts, who is typing now, (v1.1) each message's
 * reactions and thread summary, the members' roles and the pins, and
 * (v1.2) the settings that affect every member (`policy`) and which
 * messages come from a user the reader blocks (`blocked_sender`), and
 * (v1.3) each poll's results with the reader's own choice.
 *
 * Thread replies take their `seq` in the conversation like any other
 * message, so `messages` holds them too (the store's order, without
 * gaps); they are marked by their `thread_id`. `timeline` is the main
 * timeline without them, and `thread(root)` one thread's replies. */
export class ConversationState {
  /** By `message_id`: a message seen twice (a replay, a resend) is one. */
  private readonly byId = new Map<string, Message>();
  private sorted: Message[] | undefined = [];
  private main: Message[] | undefined;
  private threads: Map<string, Message[]> | undefined;
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
  /** Per member, their role (v1.1): from `GET /v1/conversations/{id}`
   * (`client.rest.conversation`, `changeRole`), then kept current by the
   * conversation's membership and `role_changed` messages. Empty until
   * one of those says. */
  readonly roles = new Map<string, Role>();
  /** Per member: the `seq` their role is known as of (older news is
   * ignored: history comes newest first). */
  private readonly roleSeqs = new Map<string, number>();
  /** Per thread root: the newest `last_reply_at` (ms) of a summary the
   * server gave; replies up to it are counted in it. */
  private readonly threadStamps = new Map<string, number>();
  private pinList: PinInfo[] = [];
  /** Per message: the `seq` of the newest pin or unpin applied. */
  private readonly pinSeqs = new Map<string, number>();
  private policyNow: PolicyInfo | undefined;
  /** The `seq` the policy is known as of. */
  private policySeq = 0;

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

  /** Every message, thread replies included, in `seq` order. */
  get messages(): readonly Message[] {
    if (!this.sorted) this.sorted = [...this.byId.values()].sort((a, b) => a.seq - b.seq);
    return this.sorted;
  }

  /** The main timeline: every message but thread replies, in `seq`
   * order (a thread's root is here, with its `thread` summary). */
  get timeline(): readonly Message[] {
    this.main ??= this.messages.filter((m) => !m.thread_id);
    return this.main;
  }

  /** The replies of one thread known here, in `seq` order (the root is
   * `get(rootId)`; `rest.threadHistory` reads the rest). */
  thread(rootId: string): readonly Message[] {
    if (!this.threads) {
      this.threads = new Map();
      for (const m of this.messages) {
        if (!m.thread_id) continue;
        const replies = this.threads.get(m.thread_id);
        if (replies) replies.push(m);
        else this.threads.set(m.thread_id, [m]);
      }
    }
    return this.threads.get(rootId) ?? [];
  }

  get(messageId: string): Message | undefined {
    return this.byId.get(messageId);
  }

  /** Adds a new message; false when it is one already known (by id).
   * `sentHere`: the message is this client's own, made from its `ack`. */
  add(message: Message, sentHere = false): boolean {
    if (this.byId.has(message.message_id)) return false;
    if (this.byId.size === 0 && this.contiguousSeq === 0) this.contiguousSeq = message.seq - 1;
    this.byId.set(message.message_id, message);
    this.seqs.add(message.seq);
    this.changed();
    this.highestSeq = Math.max(this.highestSeq, message.seq);
    this.advance();
    // Sending marks what came before as read: a member's message says
    // they read up to it, whether or not a receipt follows.
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
  update(stored: Message | components["schemas"]["Message"], from: "store" | "event" = "store"): boolean {
    // The same JSON: the REST document's generated type and the frames'
    // are written apart.
    const message = stored as Message;
    const known = this.byId.get(message.message_id);
    if (!known) return this.add(message);
    // Never go back: an older version arriving late is ignored. The same
    // version is taken (link previews come on it, v1.3), also over one
    // made from this client's ack, whose `created_at` is this device's.
    const stamp = (m: Message) => Date.parse(m.deleted_at ?? m.edited_at ?? m.created_at);
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
  reacted(event: ReactionEvent, me: string | undefined): boolean {
    const m = this.byId.get(event.message_id);
    if (!m || m.deleted_at) return false;
    const known = m.reactions ?? [];
    const next: Reaction[] = [];
    for (const r of known) {
      const count = event.counts[r.emoji] ?? 0;
      if (count > 0) next.push({ emoji: r.emoji, count, me: r.me ?? false });
    }
    for (const [emoji, count] of Object.entries(event.counts)) {
      if (count > 0 && !known.some((r) => r.emoji === emoji)) next.push({ emoji, count, me: false });
    }
    if (me !== undefined && event.user_id === me) {
      const mine = next.find((r) => r.emoji === event.emoji);
      if (mine) mine.me = event.action === "add";
    }
    if (JSON.stringify(next) === JSON.stringify(known)) return false;
    this.byId.set(m.message_id, { ...m, reactions: next });
    this.changed();
    return true;
  }

  /** Whether this client's user reacted to a message with `emoji`. */
  reactedWith(messageId: string, emoji: string): boolean {
    return this.byId.get(messageId)?.reactions?.some((r) => r.emoji === emoji && r.me) ?? false;
  }

  /** Applies a `poll_updated` event to its poll (v1.3, if known here):
   * `counts`, `closed` and `voters` as the event says. `me` (the
   * reader's own choice; the event has none) is `mine` when the event
   * answers this user's vote (`user`), else what the poll's voters show
   * of `user`, else what was known. Says whether anything changed. */
  pollUpdated(event: PollUpdatedEvent, user: string | undefined, mine?: readonly string[]): boolean {
    const m = this.byId.get(event.message_id);
    const poll = pollOf(m);
    if (!m || !poll || m.deleted_at) return false;
    const known = m.poll_results ?? freshResults(poll);
    const me = mine ? inPollOrder(poll, mine) : choiceAfter(poll, event, user, known.me ?? []);
    const next = {
      counts: { ...event.counts },
      closed: event.closed,
      ...(event.voters ? { voters: event.voters } : {}),
      me,
    };
    if (JSON.stringify(next) === JSON.stringify(m.poll_results ?? null)) return false;
    this.byId.set(m.message_id, { ...m, poll_results: next });
    this.changed();
    return true;
  }

  /** Sets this user's own choice in a poll (v1.3): the client does this
   * for a vote sent over REST (`rest.vote`), whose results come as
   * `poll_updated`. Says whether it changed. */
  setVote(messageId: string, optionIds: readonly string[]): boolean {
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
  votedFor(messageId: string): readonly string[] {
    return this.byId.get(messageId)?.poll_results?.me ?? [];
  }

  /** The pinned messages, newest pin first. */
  get pins(): readonly PinInfo[] {
    return this.pinList;
  }

  isPinned(messageId: string): boolean {
    return this.pinList.some((p) => p.message_id === messageId);
  }

  /** Takes the pins as `GET /v1/conversations/{id}/pins` lists them (the
   * client does this for `rest.pins`). */
  setPins(pins: readonly PinInfo[]): void {
    for (const p of this.pinList) this.pinSeqs.set(p.message_id, Math.max(this.pinSeqs.get(p.message_id) ?? 0, this.highestSeq));
    this.pinList = pins.map((p) => ({ message_id: p.message_id, by: p.by, pinned_at: p.pinned_at }));
    for (const p of this.pinList) this.pinSeqs.set(p.message_id, Math.max(this.pinSeqs.get(p.message_id) ?? 0, this.highestSeq));
  }

  /** A pin or unpin (a `pins_changed` event, a `message_pinned` or
   * `message_unpinned` message with its `seq`); says whether the pins
   * changed. One older than what is known of that message is ignored. */
  pinChanged(messageId: string, action: PinAction, by: string, at = new Date().toISOString(), seq = this.highestSeq): boolean {
    if (seq < (this.pinSeqs.get(messageId) ?? 0)) return false;
    this.pinSeqs.set(messageId, seq);
    const pinned = this.isPinned(messageId);
    if (action === "pin") {
      if (pinned) return false;
      this.pinList = [{ message_id: messageId, by, pinned_at: at }, ...this.pinList].sort(
        (a, b) => Date.parse(b.pinned_at) - Date.parse(a.pinned_at),
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
  get policy(): PolicyInfo | undefined {
    return this.policyNow;
  }

  /** Takes the policy as the conversation object carries it, as of
   * `asOfSeq` (its `last_seq`): a `conversation_updated` message after it
   * is newer. Says whether it changed. */
  setPolicy(policy: PolicyInfo, asOfSeq: number): boolean {
    if (asOfSeq < this.policySeq) return false;
    this.policySeq = asOfSeq;
    const next = policyOf(policy);
    if (this.policyNow && samePolicy(this.policyNow, next)) return false;
    this.policyNow = next;
    return true;
  }

  /** Sets or clears `blocked_sender` on the messages of `sender` (the
   * reader blocked or unblocked them, v1.2); says whether any changed. */
  flagSender(sender: string, blocked: boolean): boolean {
    return this.reflag((user) => (user === sender ? blocked : undefined));
  }

  /** Sets `blocked_sender` on every message as `blocked(sender)` says
   * (undefined: left as it is); says whether any changed. */
  reflag(blocked: (sender: string) => boolean | undefined): boolean {
    let changed = false;
    for (const m of this.byId.values()) {
      const flag = blocked(m.sender_id);
      if (flag === undefined || (m.blocked_sender === true) === flag) continue;
      this.byId.set(m.message_id, withBlockedFlag(m, flag));
      changed = true;
    }
    if (changed) this.changed();
    return changed;
  }

  /** A member's role, when known. */
  roleOf(userId: string): Role | undefined {
    return this.roles.get(userId);
  }

  /** Takes the members' roles as `GET /v1/conversations/{id}` lists them
   * (`asOfSeq`: its `last_seq`); the client does this for the REST
   * answers it sees. */
  setMembers(members: readonly { user_id: string; role?: Role }[], asOfSeq: number): void {
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
      roles: [...this.roles],
      pins: this.pinList.map((p) => ({ ...p })),
      ...(this.policyNow ? { policy: { ...this.policyNow } } : {}),
    };
  }

  /** Takes back a stored state (merged with what is known already). */
  restore(snapshot: ConversationSnapshot): void {
    // Roles and pins as stored, then the messages (whose membership and
    // pin messages are no newer than those).
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

  private changed(): void {
    this.sorted = undefined;
    this.main = undefined;
    this.threads = undefined;
  }

  private advance(): void {
    while (this.seqs.has(this.contiguousSeq + 1)) this.contiguousSeq += 1;
  }

  private stampThread(root: Message): void {
    const at = Date.parse(root.thread!.last_reply_at);
    if (at > (this.threadStamps.get(root.message_id) ?? -Infinity)) this.threadStamps.set(root.message_id, at);
  }

  /** A new reply counts in its root's `thread` summary, unless a summary
   * the server gave is as new as it (the root was read after the reply
   * was stored, so it counts it already). This client's own reply, made
   * from its ack with this device's clock, always counts. */
  private countReply(reply: Message, sentHere: boolean): void {
    const root = this.byId.get(reply.thread_id!);
    if (!root) return;
    const t = root.thread ?? undefined;
    const at = Date.parse(reply.created_at);
    if (!sentHere && at <= (this.threadStamps.get(root.message_id) ?? -Infinity)) return;
    this.byId.set(root.message_id, {
      ...root,
      thread: {
        reply_count: (t?.reply_count ?? 0) + 1,
        last_reply_at: t && Date.parse(t.last_reply_at) > at ? t.last_reply_at : reply.created_at,
        participants: [reply.sender_id, ...(t?.participants ?? []).filter((u) => u !== reply.sender_id)].slice(0, PARTICIPANTS),
      },
    });
  }

  /** What a system message says of roles, membership, pins, bans and
   * the policy. */
  private systemEvent(m: Message): void {
    const c = m.content;
    if (c?.kind !== "system") return;
    const users = c.user_ids ?? [];
    const setRole = (user: string, role: Role | undefined) => {
      if ((this.roleSeqs.get(user) ?? 0) >= m.seq) return;
      this.roleSeqs.set(user, m.seq);
      if (role) this.roles.set(user, role);
      else this.roles.delete(user);
    };
    switch (c.event) {
      case "members_added":
        // Only once roles are known at all: a member of a conversation
        // whose roles were never read could be its owner.
        if (this.roles.size) for (const u of users) if (!this.roles.has(u)) setRole(u, "member");
        return;
      case "members_removed":
      // A ban takes the user out (v1.2): its message is the only one.
      case "member_banned":
        for (const u of users) setRole(u, undefined);
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
}

function samePolicy(a: PolicyInfo, b: PolicyInfo): boolean {
  return (
    a.slow_mode_secs === b.slow_mode_secs &&
    a.retention_days === b.retention_days &&
    a.disappearing_secs === b.disappearing_secs &&
    a.frozen === b.frozen
  );
}

/** A message with `blocked_sender` set, or left out (as the server
 * leaves it out when false). */
export function withBlockedFlag(m: Message, blocked: boolean): Message {
  const { blocked_sender: _flag, ...rest } = m;
  return blocked ? { ...rest, blocked_sender: true } : rest;
}

/** The poll a message is (v1.3), if it is one. */
function pollOf(m: Message | undefined): PollContent | undefined {
  return m?.content?.kind === "poll" ? m.content : undefined;
}

/** A message as known here, updated by `message` (reactions, thread,
 * a poll's results). */
function merge(known: Message, message: Message, from: "store" | "event"): Message {
  // A deleted message keeps no reactions (and no poll results).
  if (message.deleted_at) return { ...message, reactions: [] };
  let reactions = message.reactions ?? known.reactions;
  if (from === "event" && message.reactions) {
    // The same for every member: who "me" is, it cannot know.
    reactions = message.reactions.map((r) => {
      const mine = known.reactions?.find((k) => k.emoji === r.emoji);
      return mine ? { ...r, me: mine.me ?? false } : r;
    });
  }
  // The newer of the two summaries (a reply may have come after the
  // server read this copy).
  let thread = message.thread ?? known.thread;
  if (message.thread && known.thread && Date.parse(known.thread.last_reply_at) > Date.parse(message.thread.last_reply_at)) {
    thread = known.thread;
  }
  // A poll's results: the store's copy has the reader's `me`; an event's
  // is everyone's, so the `me` known here stays.
  let poll_results = message.poll_results ?? known.poll_results;
  if (from === "event" && message.poll_results) {
    poll_results = { ...message.poll_results, me: known.poll_results?.me ?? [] };
  }
  return {
    ...message,
    ...(reactions !== undefined ? { reactions } : {}),
    ...(thread ? { thread } : {}),
    ...(poll_results ? { poll_results } : {}),
  };
}

function sameVersion(a: Message, b: Message): boolean {
  return (
    (a.blocked_sender === true) === (b.blocked_sender === true) &&
    (a.edited_at ?? null) === (b.edited_at ?? null) &&
    (a.deleted_at ?? null) === (b.deleted_at ?? null) &&
    JSON.stringify(a.content ?? null) === JSON.stringify(b.content ?? null) &&
    JSON.stringify(a.reactions ?? []) === JSON.stringify(b.reactions ?? []) &&
    JSON.stringify(a.poll_results ?? null) === JSON.stringify(b.poll_results ?? null) &&
    JSON.stringify(a.previews ?? []) === JSON.stringify(b.previews ?? []) &&
    JSON.stringify(a.thread ?? null) === JSON.stringify(b.thread ?? null)
  );
}
