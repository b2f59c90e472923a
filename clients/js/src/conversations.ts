// The caller's conversation list, kept current: pages come from REST
// (`GET /v1/conversations`, by cursor), and from then on the session's
// events move it (new messages, edits, deletions, reads, membership,
// mentions, the caller's notification settings) with no REST call per
// event.
import { mentionsUser, policyOf } from "./conversation.js";
import { Emitter } from "./emitter.js";
import type { Content, Message, NotificationLevel } from "./protocol.js";
import type { ConversationDetail, ConversationPage, ConversationSummary } from "./rest.js";

/** What the list needs of the REST API. */
export interface ListSource {
  conversationPage(page: { limit?: number; cursor?: string }): Promise<ConversationPage>;
  conversation(id: string): Promise<ConversationDetail>;
}

export interface ConversationListEvents extends Record<string, unknown> {
  /** The list changed (an item, the order, or a page came): re-render. */
  change: readonly ConversationSummary[];
  /** A page or a conversation could not be read. */
  error: Error;
}

/** The list as the store keeps it (persist.ts). */
export interface ListSnapshot {
  items: ConversationSummary[];
  more: boolean;
}

/** A member's own settings of a conversation (v1.1). */
export interface ConversationSettings {
  notifications: NotificationLevel;
  muted_until: string | null;
}

/** How a message reads in one line, as the server's `preview` does: text
 * cut at 100 characters, media by kind and caption, a custom message
 * (v1.3) by its `fallback_text` (or `[type]`), a poll (v1.3) as
 * `[poll] question`, membership, role,
 * pin, ban and settings changes in words; null for none, a deleted
 * message, or ciphertext. */
export function previewOf(content: Content | null | undefined): string | null {
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

function oneLine(text: string): string {
  const chars = [...text];
  // Control characters (line breaks among them) become spaces.
  // eslint-disable-next-line no-control-regex
  const line = chars.slice(0, 100).join("").replace(/[\u0000-\u001f\u007f-\u009f]/g, " ");
  return chars.length > 100 ? `${line}…` : line;
}

const activity = (c: ConversationSummary) => Date.parse(c.last_message?.created_at ?? c.created_at);

/** `unread_count` and `mention_count` are capped there by the server. */
const MAX_COUNTED = 999;

/**
 * A count the server made and the list keeps up to date from events:
 * `base` as the server counted up to `upTo` (the item's `last_seq`
 * then), and the `seqs` that counted since.
 */
class Tally {
  private seqs: number[] = [];
  constructor(
    private base: number,
    private upTo: number,
  ) {}

  get count(): number {
    return Math.min(MAX_COUNTED, this.base + this.seqs.length);
  }

  /** The server's count `base` up to `upTo`, and what `before` (this
   * count as it was) holds after that. */
  resume(base: number, upTo: number, before: Tally | undefined): void {
    this.base = base;
    this.upTo = upTo;
    this.seqs = before ? before.seqs.filter((s) => s > upTo) : [];
  }

  /** A message after `upTo` that counts. */
  add(seq: number): void {
    if (seq > this.upTo && !this.seqs.includes(seq)) this.seqs.push(seq);
  }

  /** Message `seq`, after the read mark `mark`, counts no more (deleted):
   * one less, whether it was among `seqs` or the server's `base`. */
  remove(seq: number, mark: number): void {
    if (seq <= mark) return;
    const at = this.seqs.indexOf(seq);
    if (at >= 0) this.seqs.splice(at, 1);
    else if (seq <= this.upTo && this.base > 0) this.base -= 1;
  }

  /** The caller read up to `seq`. Which of the server's count come before
   * it is not known, unless the mark reaches past all of them; those
   * left are at most one per seq after it. */
  read(seq: number): void {
    this.base = seq >= this.upTo ? 0 : Math.min(this.base, this.upTo - seq);
    this.seqs = this.seqs.filter((s) => s > seq);
  }
}

/** Whether `m` counts toward the caller's `unread_count` as the server
 * counts it: the main timeline, neither a system message nor deleted,
 * from someone else the caller does not block. */
function countsAsUnread(m: Message, me: string | undefined): boolean {
  return (
    m.sender_id !== me &&
    !m.thread_id &&
    !m.deleted_at &&
    m.content != null &&
    m.content.kind !== "system" &&
    m.blocked_sender !== true
  );
}

/**
 * The caller's conversations, most recent activity first, each with its
 * last message, preview and unread count, and (v1.1) the caller's unread
 * mentions (`mention_count`), notification level (`notifications`) and
 * whether they muted it now (`muted`) (`client.conversationList`).
 *
 * - `load()` reads the first page, `loadMore()` the next, `refresh()`
 *   the pages loaded again. Nothing is read until the app asks (or a
 *   stored list is restored).
 * - A new message moves its conversation to the top, with its preview;
 *   it counts as unread as the server counts (v1.3): not the caller's
 *   own (sending marks what came before as read), not a system message
 *   or a thread reply, not from a user the caller blocks. A deletion of
 *   an unread message takes one off. The caller's reads (`markRead`, on
 *   this device) take off what the mark passed (all of it when the mark
 *   reaches the end; after a mark partway, at most one per message
 *   after it, until the next read of the list). An edit or deletion of
 *   the last message changes the preview.
 * - A new message from someone else that mentions the caller (or all)
 *   adds to `mention_count`; reading past it takes it off (reading to
 *   the end zeroes it). The caller's settings, changed through
 *   `client.rest.setSettings` or on another device (`settings_changed`),
 *   set `notifications` and `muted`; `muted` turns false by itself when
 *   `muted_until` passes.
 * - A message of a conversation the list does not hold yet reads that
 *   conversation once (`GET /v1/conversations/{id}`); otherwise events
 *   cost no REST call. Each reconnect reads the loaded pages again (what
 *   changed meanwhile, reads on the caller's other devices among it: the
 *   server sends a user no receipt of their own marks).
 */
export class ConversationList extends Emitter<ConversationListEvents> {
  private readonly byId = new Map<string, ConversationSummary>();
  /** The caller's read mark per conversation (`read_seq`). */
  private readonly readSeq = new Map<string, number>();
  /** Per conversation, its unread messages and unread mentions. */
  private readonly unread = new Map<string, Tally>();
  private readonly mentions = new Map<string, Tally>();
  /** Per conversation muted until a time: the timer that unmutes it. */
  private readonly unmute = new Map<string, ReturnType<typeof setTimeout>>();
  private sorted: ConversationSummary[] | undefined;
  private cursor: string | null = null;
  private more = false;
  private pages = 0;
  private restoredOnly = false;
  private fetching: Promise<void> | undefined;
  private paging: Promise<boolean> | undefined;
  /** Reads of the list, one after the other: a refresh that overlapped
   * a next page would drop what that page added. */
  private reads: Promise<unknown> = Promise.resolve();
  /** Conversations being read once (not in the list yet), with the
   * messages that came meanwhile: the answer may predate them. */
  private readonly looking = new Map<string, Message[]>();
  /** Messages that came while the first page was on its way. */
  private early: Message[] = [];
  /** Ids changed by events while a refresh was under way: the newer of
   * the two copies stays. */
  private touched = new Set<string>();

  constructor(
    private readonly source: ListSource,
    private readonly me: () => string | undefined,
  ) {
    super();
  }

  /** The conversations, most recent activity first (then by id). */
  get items(): readonly ConversationSummary[] {
    if (!this.sorted) {
      this.sorted = [...this.byId.values()].sort(
        (a, b) => activity(b) - activity(a) || (a.conversation_id < b.conversation_id ? -1 : a.conversation_id > b.conversation_id ? 1 : 0),
      );
    }
    return this.sorted;
  }

  get(conversationId: string): ConversationSummary | undefined {
    return this.byId.get(conversationId);
  }

  /** Whether a page was read (or a stored list restored). */
  get loaded(): boolean {
    return this.pages > 0 || this.restoredOnly;
  }

  /** Whether a page was read (or is being read) from the server in this
   * session: a restored list alone is not. */
  get fetched(): boolean {
    return this.pages > 0 || this.fetching !== undefined;
  }

  /** Whether pages after those loaded exist (`loadMore`). */
  get hasMore(): boolean {
    return this.more;
  }

  /** Unread messages over the conversations loaded. */
  get unreadTotal(): number {
    let n = 0;
    for (const c of this.byId.values()) n += c.unread_count;
    return n;
  }

  /** Unread mentions of the caller over the conversations loaded. */
  get mentionTotal(): number {
    let n = 0;
    for (const c of this.byId.values()) n += c.mention_count ?? 0;
    return n;
  }

  /** Reads the first page, unless one was read already in this session. */
  load(): Promise<void> {
    if (this.pages > 0) return Promise.resolve();
    return this.refresh();
  }

  /** Reads the list again from its first page, as many pages as are
   * loaded (one at least): a conversation that moved is found where it
   * is now. One refresh at a time; a call during one joins it. */
  refresh(): Promise<void> {
    this.fetching ??= this.inTurn(() => this.fetch()).finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  /** Reads the next page; resolves whether one was read. */
  loadMore(): Promise<boolean> {
    this.paging ??= this.inTurn(() => this.nextPage()).finally(() => {
      this.paging = undefined;
    });
    return this.paging;
  }

  private inTurn<T>(read: () => Promise<T>): Promise<T> {
    const turn = this.reads.then(read);
    this.reads = turn.catch(() => {});
    return turn;
  }

  private async fetch(): Promise<void> {
    const want = Math.max(1, this.pages);
    this.touched = new Set();
    const fresh: ConversationSummary[] = [];
    let cursor: string | null = null;
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
      this.emit("error", e as Error);
      throw e;
    }
    const local = new Map(this.byId);
    const tallies = { unread: new Map(this.unread), mentions: new Map(this.mentions) };
    const marks = new Map(this.readSeq);
    this.byId.clear();
    for (const c of fresh) this.put(c);
    // What events changed meanwhile is newer than the page: the item as
    // they left it, counted from the page's counts and what came after.
    for (const id of this.touched) {
      const mine = local.get(id);
      const theirs = this.byId.get(id);
      if (!mine || (theirs && mine.last_seq < theirs.last_seq)) continue;
      this.put(mine);
      if (!theirs) continue;
      this.unread.get(id)?.resume(theirs.unread_count ?? 0, theirs.last_seq, tallies.unread.get(id));
      this.mentions.get(id)?.resume(theirs.mention_count ?? 0, theirs.last_seq, tallies.mentions.get(id));
      this.readSeq.set(id, Math.max(theirs.read_seq ?? 0, marks.get(id) ?? 0));
      this.readCounts(id, this.readSeq.get(id) ?? 0);
      this.replace(mine);
    }
    this.touched = new Set();
    this.cursor = cursor;
    this.more = cursor !== null;
    this.pages = pages;
    this.restoredOnly = false;
    for (const m of this.early.splice(0)) this.message(m);
    this.changed();
  }

  private async nextPage(): Promise<boolean> {
    // No cursor yet (nothing read, or only a restored list): the first
    // pages first.
    if (this.pages === 0 || (this.cursor === null && this.more)) await this.fetch();
    if (!this.cursor) return false;
    let page: ConversationPage;
    try {
      page = await this.source.conversationPage({ cursor: this.cursor });
    } catch (e) {
      this.emit("error", e as Error);
      throw e;
    }
    // A conversation already here moved up meanwhile: the copy here is newer.
    for (const c of page.conversations) if (!this.byId.has(c.conversation_id)) this.put(c);
    this.cursor = page.next_cursor ?? null;
    this.more = this.cursor !== null;
    this.pages += 1;
    this.changed();
    return true;
  }

  /** A message new to the client (live, replayed, or the caller's own
   * once stored). */
  message(m: Message): void {
    if (!this.loaded) {
      if (this.fetching) this.early.push(m);
      return;
    }
    const c = this.byId.get(m.conversation_id);
    if (!c) {
      // Older than everything loaded, with pages to come: a replay of a
      // conversation further down, which its page brings.
      const oldest = this.items[this.items.length - 1];
      if (this.more && oldest && Date.parse(m.created_at) < activity(oldest)) return;
      this.lookUp(m);
      return;
    }
    const me = this.me();
    const mine = m.sender_id === me;
    let next = c;
    // Newer than what the item counts: one more unread, and a mention of
    // the caller one more mention.
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
  updated(m: Message): void {
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
  read(conversationId: string, seq: number): void {
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
  settings(conversationId: string, settings: ConversationSettings): void {
    clearTimeout(this.unmute.get(conversationId));
    this.unmute.delete(conversationId);
    const c = this.byId.get(conversationId);
    if (!c) return;
    const until = settings.muted_until ? Date.parse(settings.muted_until) : 0;
    const left = until - Date.now();
    const muted = left > 0;
    // Unmuted when the time passes (timers reach about 24 days).
    if (muted && left < 2 ** 31 - 1) {
      const timer = setTimeout(() => {
        this.unmute.delete(conversationId);
        const now = this.byId.get(conversationId);
        if (now?.muted) this.replace({ ...now, muted: false });
      }, left);
      (timer as { unref?: () => void }).unref?.();
      this.unmute.set(conversationId, timer);
    }
    if (c.notifications === settings.notifications && c.muted === muted) return;
    this.replace({ ...c, notifications: settings.notifications, muted });
  }

  /** A conversation the caller created or was told about (REST answers). */
  conversation(detail: ConversationDetail): void {
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
    const summary: ConversationSummary = { ...rest, members, ...(known ? pickNewer(known, detail) : {}) };
    // The counts of an item already here are kept (it may know of
    // messages newer than the answer), less what the read mark passed.
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
  removed(conversationId: string): void {
    if (!this.byId.delete(conversationId)) return;
    this.readSeq.delete(conversationId);
    this.unread.delete(conversationId);
    this.mentions.delete(conversationId);
    clearTimeout(this.unmute.get(conversationId));
    this.unmute.delete(conversationId);
    this.changed();
  }

  /** The newest `limit` items, for the store. */
  snapshot(limit: number): ListSnapshot {
    const items = this.items;
    return { items: items.slice(0, limit), more: this.more || items.length > limit };
  }

  /** Takes back a stored list: shown until the first page is read. */
  restore(snapshot: ListSnapshot): void {
    if (this.pages > 0) return;
    for (const c of snapshot.items) if (!this.byId.has(c.conversation_id)) this.put(c);
    this.more = snapshot.more;
    this.cursor = null;
    this.restoredOnly = true;
    this.changed();
  }

  /** Forgets everything (the stored state was someone else's). */
  clear(): void {
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

  private put(c: ConversationSummary): void {
    this.byId.set(c.conversation_id, c);
    // A server before v1.3 sends no `read_seq`: its count was everything
    // after the mark.
    this.readSeq.set(c.conversation_id, c.read_seq ?? Math.max(0, (c.last_seq ?? 0) - (c.unread_count ?? 0)));
    this.unread.set(c.conversation_id, new Tally(c.unread_count ?? 0, c.last_seq ?? 0));
    this.mentions.set(c.conversation_id, new Tally(c.mention_count ?? 0, c.last_seq ?? 0));
  }

  /** Stores a changed item with its counts from what is tracked. */
  private replace(c: ConversationSummary): void {
    const unread = this.unread.get(c.conversation_id)?.count ?? c.unread_count ?? 0;
    const mentions = this.mentions.get(c.conversation_id)?.count ?? c.mention_count ?? 0;
    this.byId.set(
      c.conversation_id,
      unread === c.unread_count && mentions === c.mention_count ? c : { ...c, unread_count: unread, mention_count: mentions },
    );
    this.touched.add(c.conversation_id);
    this.changed();
  }

  private tallyOf(tallies: Map<string, Tally>, c: ConversationSummary, field: "unread_count" | "mention_count"): Tally {
    let t = tallies.get(c.conversation_id);
    if (!t) {
      t = new Tally(c[field] ?? 0, c.last_seq ?? 0);
      tallies.set(c.conversation_id, t);
    }
    return t;
  }

  /** The caller read up to `seq`: what it passed counts no more. */
  private readCounts(conversationId: string, seq: number): void {
    this.unread.get(conversationId)?.read(seq);
    this.mentions.get(conversationId)?.read(seq);
  }

  /** A membership change applied to the item (a ban takes the user
   * out, v1.2), and a change of the settings that affect everyone;
   * undefined when the caller is no longer a member. `newest`: no later
   * message is known (an older settings change is not applied). */
  private membership(c: ConversationSummary, content: Content | null | undefined, newest: boolean): ConversationSummary | undefined {
    if (content?.kind !== "system") return c;
    const users = content.user_ids ?? [];
    if (content.event === "members_added") {
      return { ...c, members: [...new Set([...c.members, ...users])] };
    }
    if (content.event === "conversation_updated") {
      if (!newest) return c;
      // The settings as they are now, (v1.3) the custom fields when the
      // change was to them, and the channel settings.
      return {
        ...c,
        ...(content.policy ? policyOf(content.policy) : {}),
        ...(content.custom ? { custom: content.custom } : {}),
        ...(content.channel ?? {}),
      };
    }
    if (content.event === "members_removed" || content.event === "member_banned") {
      const me = this.me();
      if (me && users.includes(me)) {
        this.removed(c.conversation_id);
        return undefined;
      }
      return { ...c, members: c.members.filter((u) => !users.includes(u)) };
    }
    return c;
  }

  /** Reads a conversation the list does not hold, once. */
  private lookUp(m: Message): void {
    const id = m.conversation_id;
    const waiting = this.looking.get(id);
    if (waiting) {
      waiting.push(m);
      return;
    }
    this.looking.set(id, [m]);
    this.source
      .conversation(id)
      .then((detail) => {
        this.conversation(detail);
        // Counted only if newer than the answer (`message`).
        const came = this.looking.get(id) ?? [];
        this.looking.delete(id);
        if (this.byId.has(id)) for (const m of came) this.message(m);
      })
      .catch((e) => this.emit("error", e as Error))
      .finally(() => this.looking.delete(id));
  }

  private changed(): void {
    this.sorted = undefined;
    this.emit("change", this.items);
  }
}

/** What a list item knows newer than a REST answer: its last message. */
function pickNewer(known: ConversationSummary, detail: ConversationDetail): Partial<ConversationSummary> {
  if (known.last_seq <= detail.last_seq) return {};
  return { last_seq: known.last_seq, last_message: known.last_message, preview: known.preview };
}

type Listed = NonNullable<ConversationSummary["last_message"]>;

/** A message of the WebSocket as the list's `last_message`: the same
 * JSON, but the REST document's generated type (from the OpenAPI
 * document) and the frames' (from the JSON Schema) are written apart. */
function asListed(m: Message): Listed {
  return m as unknown as Listed;
}
