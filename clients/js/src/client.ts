import { BlockSet } from "./blocks.js";
import { Commands, type ReactionEvent } from "./commands.js";
import { Connection, type Status, type WebSocketLike } from "./connection.js";
import { ConversationState, policyOf, withBlockedFlag } from "./conversation.js";
import { ConversationList } from "./conversations.js";
import { Emitter } from "./emitter.js";
import type { ClientEvents, ClientOptions } from "./options.js";
import { IndexedDbStore, Persistence, readRecords, type Meta, type StateStore, type StoredRecords } from "./persist.js";
import { freshResults, pollContent, type NewPoll, type PollUpdatedEvent } from "./polls.js";
import { onlyPreviewsChanged } from "./previews.js";
import type { BlockAction, Message, ReactAction, SentContent, ServerFrame, TypingState } from "./protocol.js";
import { Rest, type PostMessage, type PostedMessage } from "./rest.js";
import { ProfileCache } from "./profiles.js";
import { Outbox, type Custom, type Outgoing, type OutgoingMessage, type SendExtras, type Sent } from "./status.js";
import { Tokens, identityOf } from "./token.js";

export type { ClientEvents, ClientOptions } from "./options.js";

/** What a send may carry besides its content (v1.1). */
export interface SendOptions {
  /** The idempotency key (default: a fresh one); pass your own to
   * resend after a restart of the app. */
  clientMsgId?: string;
  /** A message of the conversation this one replies to (quoted in the
   * main timeline). */
  replyTo?: string;
  /** The root of the thread this message goes into. */
  threadId?: string;
  /** Members this message mentions (user ids; a non-member is refused
   * with `invalid_request`). */
  mentions?: string[];
  /** Mention every member (owners and admins only: `forbidden`
   * otherwise). */
  mentionAll?: boolean;
  /** The message's own fields (v1.3): a JSON object of at most 4096
   * bytes (`too_large` past it), carried as `custom` and changed only by
   * an edit. */
  custom?: Custom;
  /** `false`: the server makes no link previews for this message (v1.3;
   * by default a text's first links get cards after its ack). */
  previews?: boolean;
}

/**
 * One device's session with Switchboard.
 *
 * - Connects, and reconnects with backoff whenever the connection drops.
 * - Every message sent has a status (`pending`, `sent`, `failed`; see
 *   `OutgoingMessage`): unacked sends are written again, with the same
 *   `client_msg_id`, on each connection, and on an open one when the ack
 *   is overdue; the server's idempotency makes a resend of a stored
 *   message return the original.
 * - Edits, deletes, reactions, votes and marks return promises, and wait
 *   (bounded, `maxQueued`) while there is no connection.
 * - Pulls the backlog on every (re)connect (this device's undelivered
 *   messages, and each known conversation since its last contiguous
 *   `seq`) and whenever a `seq` gap shows.
 * - Keeps per-conversation state: messages in `seq` order, de-duplicated
 *   by `message_id`, with their reactions, thread summaries and (v1.3)
 *   poll results with the reader's own choice and link previews; receipts;
 *   typing with expiry; roles and pins; the policy (slow mode, retention,
 *   disappearing messages). And presence, the users this user blocks
 *   (`blocked`), and the live conversation list (`conversationList`),
 *   with unread mentions and the caller's notification settings.
 * - Optionally keeps all of it across reloads (`persist`).
 */
export class SwitchboardClient extends Emitter<ClientEvents> {
  readonly rest: Rest;
  readonly conversations = new Map<string, ConversationState>();
  /** The caller's conversations with unread counts, kept current. */
  readonly conversationList: ConversationList;
  readonly presence = new Map<string, { status: "online" | "offline"; last_seen: string | null }>();
  /** The users this user blocks (v1.2): read as each connection opens
   * (`GET /v1/blocks`), then kept by `blocks_changed` events and this
   * client's `rest.block` and `rest.unblock`. */
  readonly blocked = new BlockSet();
  /** Profiles (v1.3) of the users the app asked for (`profiles.load`),
   * kept by `profile_updated` events and read again as each connection
   * after the first opens. */
  readonly profiles: ProfileCache;
  /** Resolves once the stored state (`persist`) is loaded; at once
   * without a store, or with one that answers at once. */
  readonly ready: Promise<void>;
  private readonly tokens: Tokens;
  private readonly connection: Connection;
  private readonly outbox: Outbox;
  private readonly commands: Commands;
  private readonly persistence: Persistence | undefined;
  private restoredAs: Meta | undefined;
  private pulling = new Set<string>();
  private openedBefore = false;
  private running = false;
  private ticker: ReturnType<typeof setInterval> | undefined;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  private unackedDelivered = new Map<string, number>();
  private typingTimers = new Map<string, ReturnType<typeof setTimeout>>();
  private counter = 0;

  constructor(private readonly options: ClientOptions) {
    super();
    this.tokens = new Tokens(options.token);
    const fetchImpl = options.fetch ?? globalThis.fetch?.bind(globalThis);
    this.rest = new Rest(options.url, this.tokens, fetchImpl);
    this.profiles = new ProfileCache(
      (ids) => this.rest.users(ids),
      (profile) => this.emit("profile_updated", profile),
    );
    const ws = options.WebSocket ?? (globalThis.WebSocket as WebSocketLike | undefined);
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
      },
    });
    const timing = { resendAfterMs: options.resendAfterMs ?? 10_000, giveUpAfterMs: options.giveUpAfterMs };
    const hasRoom = () => this.queued < (options.maxQueued ?? 1000);
    this.outbox = new Outbox(
      {
        write: (frame) => this.connection.write(frame),
        hasRoom,
        changed: (o, removed) => this.outgoingChanged(o, removed),
        busy: () => this.busy(),
      },
      timing,
    );
    this.commands = new Commands(
      {
        write: (frame) => this.connection.write(frame),
        hasRoom,
        changed: () => this.persistence?.outboxChanged(),
        settled: (event) => this.emit("command", event),
        busy: () => this.busy(),
      },
      timing,
    );
    this.conversationList = new ConversationList(this.rest, () => this.tokens.identity()?.user);
    this.rest.observer = {
      conversation: (detail) => {
        this.conversationList.conversation(detail);
        // Roles for a conversation held here (a state made for this
        // alone would pull the whole conversation on the next connect).
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
        // Every message held follows the whole list (one kept from before
        // a restart may carry an old flag).
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
      },
    };
    const store = this.storeOf(options);
    if (store) {
      this.persistence = new Persistence(store, {
        identity: () => this.tokens.identity(),
        conversation: (id) => this.conversations.get(id)?.snapshot(this.persistence!.messagesPerConversation),
        list: (limit) => (this.conversationList.loaded ? this.conversationList.snapshot(limit) : undefined),
        outbox: () => ({ sends: this.outbox.records(), commands: this.commands.records() }),
      }, options.persistLimits);
      this.conversationList.on("change", () => this.persistence?.listChanged());
      this.ready = this.load(store);
    } else {
      this.ready = Promise.resolve();
    }
  }

  get status(): Status {
    return this.connection.status;
  }

  /** Opens the session (and keeps it open until `close`). */
  connect(): void {
    this.running = true;
    this.connection.connect();
    this.busy();
  }

  /** Closes the session; what waits (sends, edits, deletes, marks) stays
   * waiting, and goes when `connect` is called again. */
  close(): void {
    this.running = false;
    this.connection.close();
    clearInterval(this.ticker);
    this.ticker = undefined;
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    // Acks being coalesced wait with the other marks.
    for (const [conversation, seq] of this.unackedDelivered) void this.markDelivered(conversation, seq);
    this.unackedDelivered.clear();
    for (const timer of this.typingTimers.values()) clearTimeout(timer);
    this.typingTimers.clear();
    void this.persistence?.flush();
  }

  /** Writes the state to the store now (`persist`); resolves once it is
   * written. */
  flush(): Promise<void> {
    return this.persistence?.flush() ?? Promise.resolve();
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
   * however many reconnects that takes; rejects when it fails (see
   * `OutgoingMessage`: it stays in the conversation's `outgoing` as
   * `failed`, to `retry()` or `discard()`). The third argument is the
   * `clientMsgId` (default: a fresh id; pass your own to resend after a
   * restart of the app), or `SendOptions`: a reply, a thread, mentions. */
  send(conversationId: string, content: SentContent, options: string | SendOptions = {}): Promise<Sent> {
    const o: SendOptions = typeof options === "string" ? { clientMsgId: options } : options;
    const extras: SendExtras = {
      ...(o.replyTo ? { reply_to: o.replyTo } : {}),
      ...(o.threadId ? { thread_id: o.threadId } : {}),
      ...(o.mentions?.length ? { mentions: [...new Set(o.mentions)] } : {}),
      ...(o.mentionAll ? { mention_all: true } : {}),
      ...(o.custom ? { custom: o.custom } : {}),
      ...(o.previews === false ? { previews: false } : {}),
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
  schedule(
    conversationId: string,
    content: SentContent,
    sendAt: Date | string,
    options: string | SendOptions = {},
  ): Promise<PostedMessage> {
    const o: SendOptions = typeof options === "string" ? { clientMsgId: options } : options;
    return this.rest.postMessage(conversationId, {
      client_msg_id: o.clientMsgId ?? this.newClientMsgId(),
      // The frames' SentContent and the REST schema's are the same JSON.
      content: content as PostMessage["content"],
      send_at: typeof sendAt === "string" ? sendAt : sendAt.toISOString(),
      ...(o.replyTo ? { reply_to: o.replyTo } : {}),
      ...(o.threadId ? { thread_id: o.threadId } : {}),
      ...(o.mentions?.length ? { mentions: [...new Set(o.mentions)] } : {}),
      ...(o.mentionAll ? { mention_all: true } : {}),
      ...(o.custom ? { custom: o.custom } : {}),
      ...(o.previews === false ? { previews: false } : {}),
    });
  }

  /** Sends a text message (with `SendOptions`: a reply, into a thread,
   * with mentions). */
  sendText(conversationId: string, text: string, options: SendOptions = {}): Promise<Sent> {
    return this.send(conversationId, { kind: "text", text }, options);
  }

  /** Sends a poll (v1.3): `send` with the `poll` content that
   * `pollContent(poll)` makes (options given as texts get the ids `o1`,
   * `o2`, ...), with its status, resends and `SendError`s (bounds broken:
   * `invalid_request`). Members vote with `vote`; the message carries
   * `poll_results`. */
  sendPoll(conversationId: string, poll: NewPoll, options: SendOptions = {}): Promise<Sent> {
    // The server takes a poll wherever content goes; the schema's
    // `SentContent` (the generated type) does not list the kind yet.
    return this.send(conversationId, pollContent(poll) as unknown as SentContent, options);
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
  vote(conversationId: string, messageId: string, optionIds: readonly string[]): Promise<PollUpdatedEvent> {
    return this.commands.vote(conversationId, messageId, [...new Set(optionIds)]);
  }

  /** Votes for `optionId`, or takes it back if this user chose it (as
   * the conversation's state knows it): in a `multiple` poll it joins or
   * leaves the user's choice, in another it replaces it. */
  toggleVote(conversationId: string, messageId: string, optionId: string): Promise<PollUpdatedEvent> {
    const state = this.conversation(conversationId);
    const mine = state.votedFor(messageId);
    const content = state.get(messageId)?.content;
    const multiple = content?.kind === "poll" && content.multiple === true;
    const next = mine.includes(optionId)
      ? mine.filter((id) => id !== optionId)
      : multiple
        ? [...mine, optionId]
        : [optionId];
    return this.vote(conversationId, messageId, next);
  }

  /** Ends the voting of a poll (v1.3) over REST: its author, an owner or
   * admin of the conversation, or a tenant admin (`ApiError` 403 for
   * anyone else); closing a closed poll changes nothing. Every member
   * gets `poll_updated` with `closed: true`. */
  closePoll(conversationId: string, messageId: string): Promise<void> {
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
  react(conversationId: string, messageId: string, emoji: string, action: ReactAction = "add"): Promise<ReactionEvent> {
    return this.commands.react(conversationId, messageId, emoji, action);
  }

  /** Adds the reaction if this user has not reacted with that emoji
   * (as the conversation's state knows it), else removes it. */
  toggleReaction(conversationId: string, messageId: string, emoji: string): Promise<ReactionEvent> {
    const mine = this.conversation(conversationId).reactedWith(messageId, emoji);
    return this.react(conversationId, messageId, emoji, mine ? "remove" : "add");
  }

  /** Sends a failed message again as a new one (v1.2): its content,
   * reply, thread, mentions, `custom` and (v1.3) `previews: false` with
   * a fresh `client_msg_id`, the failed one discarded. For a send a slow
   * mode refused (`SendError` with `retryAfterMs`), whose `client_msg_id`
   * stays refused, once the wait is over; `retry()` is the resend with
   * the same id. Rejects at once for a message that is not failed. */
  resendAsNew(message: OutgoingMessage | string): Promise<Sent> {
    const o = typeof message === "string" ? this.outbox.get(message) : message;
    if (!o || o.status !== "failed" || !o.discard()) {
      return Promise.reject(new Error("only a failed message is sent again as a new one"));
    }
    return this.send(o.conversation_id, o.content, {
      ...(o.reply_to ? { replyTo: o.reply_to } : {}),
      ...(o.thread_id ? { threadId: o.thread_id } : {}),
      ...(o.mentions.length ? { mentions: [...o.mentions] } : {}),
      ...(o.mention_all ? { mentionAll: true } : {}),
      ...(o.custom ? { custom: o.custom } : {}),
      ...(o.previews ? {} : { previews: false }),
    });
  }

  /** Whether this user blocks `user` (v1.2), as `blocked` knows it. */
  isBlocked(user: string): boolean {
    return this.blocked.has(user);
  }

  /** Whether a message comes from a user this user blocks (v1.2): by the
   * `blocked` set once it is read (it follows unblocks at once), else by
   * the message's own `blocked_sender`. A UI folds such messages. */
  isBlockedSender(message: Pick<Message, "sender_id" | "blocked_sender">): boolean {
    if (message.sender_id === this.tokens.identity()?.user) return false;
    return this.blocked.has(message.sender_id) || (!this.blocked.loaded && message.blocked_sender === true);
  }

  /** One of this client's messages not stored yet (pending or failed). */
  outgoing(clientMsgId: string): OutgoingMessage | undefined {
    return this.outbox.get(clientMsgId);
  }

  /** How many sends wait for their ack. */
  get pendingSends(): number {
    return this.outbox.pendingCount;
  }

  /** How many sends, edits, deletes and reactions wait for their answer
   * (the number `maxQueued` bounds). */
  get queued(): number {
    return this.outbox.pendingCount + this.commands.size;
  }

  /** The sends to a conversation that wait for their ack, in order. */
  pendingIn(conversationId: string): { client_msg_id: string; content: SentContent }[] {
    return this.outbox
      .all()
      .filter((o) => o.conversation_id === conversationId && o.status === "pending")
      .map((o) => ({ client_msg_id: o.client_msg_id, content: o.content }));
  }

  /** Who this session speaks for (from its token), once connected. */
  get me(): { user: string; device: string } | undefined {
    return this.tokens.identity();
  }

  /** Edits a message: resolves with it as the server now has it (its
   * `message_updated`), rejects with a `CommandError` (`forbidden`,
   * `conflict`, ...). Waits while there is no connection. `custom`
   * (v1.3) replaces the message's own fields (`{}` removes them);
   * without it they stay. */
  edit(conversationId: string, messageId: string, content: SentContent, options: { custom?: Custom } = {}): Promise<Message> {
    return this.commands.update("edit_message", conversationId, messageId, content, options.custom);
  }

  /** Deletes a message: as `edit`, resolving with the deleted message. */
  delete(conversationId: string, messageId: string): Promise<Message> {
    return this.commands.update("delete_message", conversationId, messageId);
  }

  /** Marks everything up to `seq` (default: the newest message known)
   * read. The conversation's own mark and unread count change at once;
   * resolves once the mark is written (the server answers marks with
   * nothing); while there is no connection, only the highest waits. */
  markRead(conversationId: string, seq?: number): Promise<void> {
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
  markThreadRead(conversationId: string, rootId: string, seq?: number): Promise<void> {
    const state = this.conversation(conversationId);
    const replies = state.thread(rootId);
    const upTo = seq ?? replies[replies.length - 1]?.seq ?? state.get(rootId)?.seq ?? 0;
    if (upTo <= 0) return Promise.resolve();
    return this.commands.mark("read", conversationId, upTo, rootId);
  }

  /** Says this device has everything up to `seq` (default: what arrived
   * without a gap). The client does this by itself unless `ackDelivered`
   * is false. Resolves as `markRead` does. */
  markDelivered(conversationId: string, seq = this.conversation(conversationId).contiguousSeq): Promise<void> {
    if (seq <= 0) return Promise.resolve();
    return this.commands.mark("delivered", conversationId, seq);
  }

  /** Tells the members connected now that this user is typing. Typing is
   * ephemeral: fire-and-forget, and dropped while there is no connection
   * (a late "typing" would be wrong). */
  typing(conversationId: string, state: TypingState): void {
    this.connection.write({ type: "typing", conversation_id: conversationId, state });
  }

  private newClientMsgId(): string {
    const random = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    this.counter += 1;
    return `${random}-${this.counter}`;
  }

  private changed(conversationId: string): void {
    this.emit("change", conversationId);
    this.persistence?.conversationChanged(conversationId);
  }

  /** The blocked set changed for `user`: the messages held here follow,
   * then the app is told. */
  private blockChanged(user: string, action: BlockAction): void {
    for (const state of this.conversations.values()) {
      if (state.flagSender(user, action === "block")) this.changed(state.conversationId);
    }
    // Unread counts leave out a blocked user's messages, those before the
    // block too: which of them the list's counts hold only the server
    // knows (a failure is the list's `error` event).
    if (this.conversationList.fetched) this.conversationList.refresh().catch(() => {});
    this.emit("blocks_changed", { user_id: user, action });
  }

  /** Reads the blocks (as each connection opens: changes made while away
   * came as events to nobody here). A failure leaves what is known. */
  private loadBlocks(): void {
    this.rest.blocks().catch(() => {});
  }

  private outgoingChanged(o: Outgoing, removed: boolean): void {
    this.conversation(o.conversation_id).track(o, !removed);
    this.persistence?.outboxChanged();
    this.emit("outgoing", o);
    this.changed(o.conversation_id);
  }

  /** Runs the timer that resends overdue commands and gives up old ones,
   * while anything waits. */
  private busy(): void {
    if (this.ticker !== undefined || !this.running) return;
    const every = Math.min(1_000, Math.max(50, (this.options.resendAfterMs ?? 10_000) / 4));
    this.ticker = setInterval(() => {
      const now = Date.now();
      const open = this.connection.isOpen;
      const sends = this.outbox.tick(now, open);
      const commands = this.commands.tick(now, open);
      if (!sends && !commands) {
        clearInterval(this.ticker);
        this.ticker = undefined;
      }
    }, every);
    // Under Node, the timer alone does not keep the process alive.
    (this.ticker as { unref?: () => void }).unref?.();
  }

  private storeOf(options: ClientOptions): StateStore | undefined {
    if (options.persist !== "indexeddb") return options.persist;
    let name = options.storageName;
    if (name === undefined && typeof options.token === "string") {
      const who = identityOf(options.token);
      if (who) name = `${new URL(options.url).host}/${who.user}/${who.device}`;
    }
    if (name === undefined) throw new Error('persist: "indexeddb" needs storageName when the token is a function');
    return new IndexedDbStore(name);
  }

  /** Loads the stored state: at once when the store answers at once. */
  private load(store: StateStore): Promise<void> {
    let records: StoredRecords | Promise<StoredRecords>;
    try {
      records = store.load();
    } catch {
      return Promise.resolve();
    }
    if (records instanceof Promise || typeof (records as { then?: unknown }).then === "function") {
      return Promise.resolve(records).then(
        (r) => this.restore(r),
        () => {},
      );
    }
    this.restore(records as StoredRecords);
    return Promise.resolve();
  }

  private restore(records: StoredRecords): void {
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
  private async prepare(): Promise<boolean> {
    await this.ready;
    const me = this.tokens.identity();
    const was = this.restoredAs;
    if (me && was && (me.user !== was.user || me.device !== was.device)) {
      this.restoredAs = undefined;
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

  private opened(): void {
    this.catchUp();
    this.outbox.writeAll();
    this.commands.writeAll();
    this.busy();
    this.loadBlocks();
    // Profile changes while away came to nobody here.
    if (this.openedBefore) this.profiles.refresh();
    // What changed while away (on other devices too): the loaded pages
    // again. On the first connection only for a restored list that is
    // not being read already.
    const list = this.conversationList;
    if (list.loaded && (this.openedBefore || !list.fetched)) {
      list.refresh().catch(() => {});
    }
    this.openedBefore = true;
    void this.persistence?.flush();
  }

  /** What the connection may have missed: this device's undelivered
   * messages, and each known conversation since its last contiguous
   * `seq` (a conversation that fans out on read keeps no inbox). */
  private catchUp(): void {
    this.pulling.clear();
    this.connection.write({ type: "pull_backlog" });
    for (const state of this.conversations.values()) this.pull(state);
  }

  private pull(state: ConversationState): void {
    if (this.pulling.has(state.conversationId)) return;
    this.pulling.add(state.conversationId);
    this.connection.write({ type: "pull_backlog", conversation_id: state.conversationId, since_seq: state.contiguousSeq });
  }

  private handle(frame: ServerFrame): void {
    switch (frame.type) {
      case "ack": {
        // The sending device gets the ack instead of the message: the
        // message joins the conversation's state from what was sent, or
        // from what was stored when a moderation plugin rewrote it (the
        // ack then carries the stored content).
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
              created_at: new Date().toISOString(),
              edited_at: null,
              deleted_at: null,
              reply_to: o.reply_to,
              thread_id: o.thread_id,
              reactions: [],
              mentions: [...o.mentions],
              mention_all: o.mention_all,
              ...(o.custom && Object.keys(o.custom).length ? { custom: o.custom } : {}),
              // A poll (v1.3) starts with nobody's vote.
              ...(content.kind === "poll" ? { poll_results: freshResults(content) } : {}),
            },
            true,
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
        // Link previews (v1.3) come this way too, the message neither
        // edited nor deleted: no edit's or delete's answer.
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
          seq: frame.seq,
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
        // Only for a conversation held here (its message is, or not).
        const state = this.conversations.get(frame.conversation_id);
        if (state?.reacted(event, me)) this.changed(state.conversationId);
        this.commands.reacted(event, me);
        this.emit("reaction", event);
        return;
      }
      case "poll_updated": {
        const { type: _type, ...event } = frame;
        const me = this.tokens.identity()?.user;
        // The answer to this user's vote says what they chose (the event
        // names no voter); the state has it before the vote settles.
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
        // A refusal for good of an edit, delete, reaction or mark is also
        // told as before (the `error` event); one that will be retried
        // is not.
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
  private flagged(message: Message): Message {
    if (!this.blocked.loaded) return message;
    const blocked = this.isBlockedSender(message);
    return (message.blocked_sender === true) === blocked ? message : withBlockedFlag(message, blocked);
  }

  private received(message: Message, sentHere = false): void {
    const state = this.conversation(message.conversation_id);
    if (!state.add(message, sentHere)) {
      // A replay of a known message: it may have been edited or deleted
      // since.
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
      for (const [conversation, seq] of this.unackedDelivered) void this.markDelivered(conversation, seq);
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
