import type { components, paths } from "./openapi.js";
import type { Tokens } from "./token.js";

/** An error answer of the REST API: `{ "code", "message" }` with its
 * HTTP status; since v1.2 a `rate_limited` one may say when to try again
 * (`retryAfterMs`: the body's `retry_after_ms`, else its `Retry-After`
 * header). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "ApiError";
  }
}

/** The REST API's schemas, generated from gateway/openapi.json. */
export type Schemas = components["schemas"];

type Method = "get" | "post" | "put" | "delete" | "patch";
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type Success<R> = R extends { 200: infer A } ? A : R extends { 201: infer A } ? A : never;
type JsonOf<A> = A extends { content: { "application/json": infer B } } ? B : never;
/** The JSON body a route answers with on success, as the OpenAPI
 * document says: the REST methods below return these, so a change of
 * the server's types shows up here when src/openapi.ts is regenerated. */
export type Answer<P extends keyof paths, M extends Method> = JsonOf<Success<Operation<P, M>["responses"]>>;

export type ConversationKind = Schemas["ConversationKind"];
/** A conversation in the caller's list. The schema's `members` is either
 * form; the list names them by user id. */
export type ConversationSummary = Omit<Schemas["ConversationView"], "members"> & { members: string[] };
/** One page of `GET /v1/conversations`. `next_cursor` is the `cursor` of
 * the next page; null on the last page. */
export type ConversationPage = Omit<Answer<"/v1/conversations", "get">, "conversations"> & {
  conversations: ConversationSummary[];
};
export type MemberView = Schemas["MemberView"];
/** One conversation with its members' marks. */
export type ConversationDetail = Omit<Schemas["ConversationView"], "members"> & { members: MemberView[] };
export type HistoryPage = Answer<"/v1/conversations/{id}/messages", "get">;
export type MessageVersions = Answer<"/v1/conversations/{id}/messages/{message_id}/versions", "get">;
/** An upload grant: send the bytes to `upload_url` with `method` and
 * `headers` as they are. */
export type UploadGrant = Answer<"/v1/media", "post">;
export type DeviceKeys = Answer<"/v1/devices/{device}/keys", "get">;
export type DeviceKeysUpload = Schemas["DeviceKeysUpload"];
export type UserDevices = Answer<"/v1/users/{user}/devices", "get">;
export type ClaimedKeys = Answer<"/v1/users/{user}/devices/{device}/claim", "post">;
export type PushRegistration = Schemas["PushRegistration"];
export type PresenceInfo = Answer<"/v1/users/{user}/presence", "get">;
/** A member's role in a group or channel (v1.1). */
export type MemberRole = Schemas["Role"];
/** The caller's own settings of a conversation (v1.1): which messages
 * push (`notifications`), and no push at all until `muted_until`. */
export type MemberSettings = Answer<"/v1/conversations/{id}/settings", "get">;
/** `GET /v1/conversations/{id}/pins`: newest pin first, each with the
 * message as it is now (null once deleted). */
export type PinList = Answer<"/v1/conversations/{id}/pins", "get">;
export type Pin = Schemas["Pin"];
/** `GET /v1/conversations/{id}/threads`: the threads the caller took
 * part in, most recent reply first, each with its root, `reply_count`
 * and the caller's `unread_count`. */
export type ThreadList = Answer<"/v1/conversations/{id}/threads", "get">;
export type ThreadView = Schemas["ThreadView"];
/** One page of the tenant's public channels (v1.3): `GET /v1/channels`. */
export type ChannelDirectory = Answer<"/v1/channels", "get">;
/** A public channel as the directory lists it. */
export type ChannelEntry = Schemas["ChannelEntry"];
/** An invite code of a conversation (v1.3). */
export type Invite = Schemas["Invite"];
/** `GET /v1/conversations/{id}/invites`: newest first. */
export type InviteList = Answer<"/v1/conversations/{id}/invites", "get">;
/** What an invite leads to: `GET /v1/invites/{code}`. */
export type InvitePreview = Answer<"/v1/invites/{code}", "get">;
/** A user the caller blocks (v1.2), and since when. */
export type Block = Schemas["Block"];
/** `GET /v1/blocks`: the caller's blocks, newest first. */
export type BlockList = Answer<"/v1/blocks", "get">;
/** A user's profile (v1.3): `GET /v1/users/{user}`. */
export type UserProfile = Answer<"/v1/users/{user}", "get">;
/** `PATCH /v1/me/profile`: each field given changes, `null` clears. */
export type ProfilePatch = Schemas["ProfilePatch"];
/** A user kept out of a conversation (v1.2): by whom, since when, and
 * until when (null: until lifted). */
export type Ban = Schemas["Ban"];
/** `GET /v1/conversations/{id}/bans`: the bans in force, newest first. */
export type BanList = Answer<"/v1/conversations/{id}/bans", "get">;
/** The body of `PATCH /v1/conversations/{id}` (v1.2): each field given
 * changes, each left out stays; null turns retention or disappearing
 * messages off, 0 slow mode; `custom` (v1.3) sets the keys it names, a
 * null one removed. */
export type ConversationPatch = Schemas["ConversationPatch"];
/** Why a message is reported (v1.2): `spam`, `abuse`, `illegal` or
 * `other`. */
export type ReportReason = Schemas["ReportReason"];
/** `open` until a tenant admin resolves it, then `resolved`. */
export type ReportStatus = Schemas["ReportStatus"];
/** What resolving a report does: `dismiss`, `delete_message` or
 * `ban_sender`. */
export type ReportAction = Schemas["ReportAction"];
/** A report as tenant admins see it (v1.2): who reported which message
 * of whom, why, the message as it was when reported (null for
 * ciphertext), and once resolved when, by whom and with what action. */
export type Report = Schemas["Report"];
/** The answer to `POST .../messages/{message_id}/reports`: the report's
 * id. */
export type ReportCreated = Answer<"/v1/conversations/{id}/messages/{message_id}/reports", "post">;
/** The body of `POST /v1/conversations/{id}/messages` (v1.2):
 * `send_message`'s fields but the conversation. */
export type PostMessage = Schemas["PostMessage"];
/** The answer to a send over REST: the `ack`'s fields; with `send_at`,
 * `status: "scheduled"` and a `scheduled_id` instead of `message_id` and
 * `seq`. */
export type PostedMessage = Answer<"/v1/conversations/{id}/messages", "post">;
/** A tenant's webhook endpoint (v1.2): its secret as a fingerprint
 * once stored. */
export type WebhookEndpoint = Schemas["WebhookEndpoint"];
/** A page of search results (v1.2): best match first, each the message
 * as it is now with `highlights` (HTML: matched words in `<b>`, the rest
 * escaped); `next_cursor` asks for the next page. */
export type SearchResults = Answer<"/v1/search", "get">;
/** A message waiting for its `send_at` (v1.2). */
export type ScheduledMessage = Schemas["ScheduledMessage"];
/** An admin job (v1.2): an erasure's `state` (`running`, `done`,
 * `failed`) and progress; a finished one names nobody. */
export type Job = Schemas["Job"];
/** One page of `GET /v1/admin/reports`, newest first; `next_cursor` is
 * the `cursor` of the next page, null on the last. */
export type ReportList = Answer<"/v1/admin/reports", "get">;
/** Moderation without code (v1.3): the tenant's word list, its bans,
 * a conversation's mutes, and the audit log of their changes. */
export type Blocklist = Schemas["Blocklist"];
export type TenantBan = Schemas["TenantBan"];
/** A tenant's push templates per kind (v1.3). */
export type PushTemplates = Schemas["PushTemplates"];
/** Whether a tenant's messages get link previews (v1.3; on unless its
 * admins turned them off). */
export type PreviewSettings = Schemas["PreviewSettings"];
export type TenantBanList = Answer<"/v1/admin/bans", "get">;
export type Mute = Schemas["Mute"];
export type AuditEntry = Schemas["AuditEntry"];
export type AuditList = Answer<"/v1/admin/audit", "get">;
/** One conversation of the caller in their export (v1.2), with every
 * message they sent there, newest first. */
export interface ExportedConversation {
  conversation_id: string;
  kind: ConversationKind;
  title: string | null;
  joined_at: string;
  role: MemberRole;
  settings: MemberSettings;
  read_seq: number;
  messages: Schemas["Message"][];
}
/** `GET /v1/me/export` (v1.2): the caller's own data. The OpenAPI
 * document types this answer only as JSON; its shape, as the route
 * describes it: the profile, the caller's blocks, and each conversation
 * they are a member of (not those they left). */
export interface MyDataExport {
  profile: { user_id: string; tenant: string; exported_at: string };
  blocks: Block[];
  conversations: ExportedConversation[];
}

/** Told what REST answers say of the caller's conversations (the
 * client's conversation list follows them). */
export interface RestObserver {
  conversation(detail: ConversationDetail): void;
  removed(conversationId: string, user: string): void;
  /** The caller's settings of a conversation, as read or set (v1.1). */
  settings?(conversationId: string, settings: MemberSettings): void;
  /** A conversation's pins as listed (v1.1). */
  pins?(conversationId: string, pins: PinList): void;
  /** The caller pinned or unpinned a message (v1.1). */
  pinned?(conversationId: string, messageId: string, action: "pin" | "unpin"): void;
  /** The caller's blocks as listed (v1.2); `askedAt` (ms): when they were
   * asked for, so that a change seen since is known to be newer. */
  blocks?(list: BlockList, askedAt: number): void;
  /** The caller blocked or unblocked a user (v1.2). */
  blocked?(user: string, action: "block" | "unblock", at: string): void;
  /** Profiles as the server answered them (v1.3). */
  profiles?(profiles: UserProfile[]): void;
  /** The caller's vote in a poll was stored (v1.3). */
  voted?(conversationId: string, messageId: string, optionIds: string[]): void;
}

/** The REST half of the API (docs/protocol.md): every call
 * carries the session's token, and one refused as unauthorized is tried
 * once more with a fresh token when the token source can give one. */
export class Rest {
  /** Set by the client: see `RestObserver`. */
  observer: RestObserver | undefined;

  constructor(
    private readonly base: string,
    private readonly tokens: Tokens,
    private readonly fetchImpl: typeof fetch = globalThis.fetch.bind(globalThis),
  ) {}

  createConversation(kind: ConversationKind, members: string[], title?: string): Promise<ConversationDetail> {
    return this.told(this.json("POST", "/v1/conversations", { kind, members, ...(title ? { title } : {}) }));
  }

  /** The caller's newest conversations, most recent activity first,
   * each with its preview and unread count: the first page, of the
   * server's default size (`conversationPage` reads on). */
  async conversations(): Promise<ConversationSummary[]> {
    return (await this.conversationPage()).conversations;
  }

  /** One page of the caller's conversations, most recent activity first;
   * pass `next_cursor` back as `cursor` for the next one. A conversation
   * whose activity changes while you page moves to the front: it is
   * never listed twice, and the pages after the move do not hold it (the
   * first page, and its live `message` events, do). A server from before
   * paging answers the whole list as one last page. */
  async conversationPage(page: { limit?: number; cursor?: string } = {}): Promise<ConversationPage> {
    const query = new URLSearchParams();
    if (page.limit !== undefined) query.set("limit", String(page.limit));
    if (page.cursor !== undefined) query.set("cursor", page.cursor);
    const q = query.size ? `?${query}` : "";
    const body = await this.json<ConversationSummary[] | { conversations: ConversationSummary[]; next_cursor?: string | null }>(
      "GET",
      `/v1/conversations${q}`,
    );
    if (Array.isArray(body)) return { conversations: body, next_cursor: null };
    return { conversations: body.conversations, next_cursor: body.next_cursor ?? null };
  }

  conversation(id: string): Promise<ConversationDetail> {
    return this.told(this.json("GET", `/v1/conversations/${enc(id)}`));
  }

  /** Adds members; answers the conversation as it is now. */
  addMembers(id: string, members: string[]): Promise<ConversationDetail> {
    return this.told(this.json("POST", `/v1/conversations/${enc(id)}/members`, { members }));
  }

  async removeMember(id: string, user: string): Promise<void> {
    await this.empty("DELETE", `/v1/conversations/${enc(id)}/members/${enc(user)}`);
    this.observer?.removed(id, user);
  }

  /** One page of history, newest first; pass `next_before_seq` back as
   * `before_seq` for the page before it. With `thread_id` (v1.1), one
   * thread's (see `threadHistory`). Thread replies take their `seq` in
   * the conversation, so the conversation's history holds them too. */
  history(id: string, page: { before_seq?: number; after_seq?: number; limit?: number; thread_id?: string } = {}): Promise<HistoryPage> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(page)) if (v !== undefined) query.set(k, String(v));
    const q = query.size ? `?${query}` : "";
    return this.json("GET", `/v1/conversations/${enc(id)}/messages${q}`);
  }

  versions(id: string, messageId: string): Promise<MessageVersions> {
    return this.json("GET", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/versions`);
  }

  /** One page of a thread (v1.1): its replies and its root, newest first,
   * in the history format (`next_before_seq` pages back). */
  threadHistory(id: string, rootId: string, page: { before_seq?: number; after_seq?: number; limit?: number } = {}): Promise<HistoryPage> {
    const query = new URLSearchParams({ thread_id: rootId });
    for (const [k, v] of Object.entries(page)) if (v !== undefined) query.set(k, String(v));
    return this.json("GET", `/v1/conversations/${enc(id)}/messages?${query}`);
  }

  /** The threads of a conversation the caller started or replied in
   * (v1.1), most recent reply first, with their unread counts (replies
   * after the caller's thread read mark: `client.markThreadRead`). */
  threads(id: string): Promise<ThreadList> {
    return this.json("GET", `/v1/conversations/${enc(id)}/threads`);
  }

  /** Changes a member's role (v1.1; owners and admins, and only an owner
   * makes owners or changes an owner's role: `403 forbidden` otherwise,
   * `409 conflict` for the last owner or a direct conversation). Answers
   * the conversation after the change. */
  changeRole(id: string, user: string, role: MemberRole): Promise<ConversationDetail> {
    return this.told(this.json("PATCH", `/v1/conversations/${enc(id)}/members/${enc(user)}`, { role }));
  }

  /** The caller's own settings of a conversation (v1.1). */
  async settings(id: string): Promise<MemberSettings> {
    const settings = await this.json<MemberSettings>("GET", `/v1/conversations/${enc(id)}/settings`);
    this.observer?.settings?.(id, settings);
    return settings;
  }

  /** Sets the caller's own settings of a conversation (v1.1): the whole
   * object (an absent `muted_until` unmutes). The caller's other devices
   * get `settings_changed`. Answers the settings now. */
  async setSettings(id: string, settings: { notifications?: MemberSettings["notifications"]; muted_until?: string | null }): Promise<MemberSettings> {
    const now = await this.json<MemberSettings>("PUT", `/v1/conversations/${enc(id)}/settings`, settings);
    this.observer?.settings?.(id, now);
    return now;
  }

  /** The pinned messages (v1.1), newest pin first (at most 50). */
  async pins(id: string): Promise<PinList> {
    const list = await this.json<PinList>("GET", `/v1/conversations/${enc(id)}/pins`);
    this.observer?.pins?.(id, list);
    return list;
  }

  /** Pins a message (v1.1; owners and admins, either member of a direct
   * conversation: `403 forbidden` otherwise; at most 50, `409` past it).
   * Every member gets `pins_changed` and a `message_pinned` message. */
  async pin(id: string, messageId: string): Promise<void> {
    await this.empty("POST", `/v1/conversations/${enc(id)}/pins`, { message_id: messageId });
    this.observer?.pinned?.(id, messageId, "pin");
  }

  /** Unpins a message (v1.1; who may pin may unpin). */
  async unpin(id: string, messageId: string): Promise<void> {
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
  async vote(id: string, messageId: string, optionIds: readonly string[]): Promise<void> {
    const option_ids = [...optionIds];
    await this.empty("POST", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/votes`, { option_ids });
    this.observer?.voted?.(id, messageId, option_ids);
  }

  /** Closes a poll (v1.3): its author, an owner or admin of the
   * conversation, or a tenant admin (`403 forbidden` for anyone else);
   * closing a closed poll changes nothing. Every member gets
   * `poll_updated` with `closed: true`. */
  closePoll(id: string, messageId: string): Promise<void> {
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
  updateConversation(id: string, patch: ConversationPatch): Promise<ConversationDetail> {
    return this.told(this.json("PATCH", `/v1/conversations/${enc(id)}`, patch));
  }

  /** The users the caller blocks (v1.2), newest first. The client's
   * `blocked` set takes them (it reads them itself as each connection
   * opens). */
  async blocks(): Promise<BlockList> {
    const askedAt = Date.now();
    const list = await this.json<BlockList>("GET", "/v1/blocks");
    this.observer?.blocks?.(list, askedAt);
    return list;
  }

  /** A user's profile (v1.3): any user of the caller's tenant; one who
   * never set one has every field empty and `updated_at: null`. */
  async user(user: string): Promise<UserProfile> {
    const profile = await this.json<UserProfile>("GET", `/v1/users/${enc(user)}`);
    this.observer?.profiles?.([profile]);
    return profile;
  }

  /** Several users' profiles (v1.3), in the order named (at most 100; a
   * repeated id once). */
  async users(ids: readonly string[]): Promise<UserProfile[]> {
    const q = new URLSearchParams({ ids: ids.join(",") });
    const { users } = await this.json<Answer<"/v1/users", "get">>("GET", `/v1/users?${q}`);
    this.observer?.profiles?.(users);
    return users;
  }

  /** Changes the caller's own profile (v1.3): `display_name`, `avatar`
   * (a `blob_ref` of an image the caller uploaded), `status`; `null`
   * clears a field. Everyone who shares a conversation with the caller
   * gets `profile_updated`. */
  async updateProfile(patch: ProfilePatch): Promise<UserProfile> {
    const profile = await this.json<UserProfile>("PATCH", "/v1/me/profile", patch);
    this.observer?.profiles?.([profile]);
    return profile;
  }

  /** Sets a user's `custom` profile fields (v1.3; tenant admins): each
   * key given is set, a key given `null` removed. */
  async setCustomProfile(user: string, custom: Record<string, unknown>): Promise<UserProfile> {
    const profile = await this.json<UserProfile>("PATCH", `/v1/admin/users/${enc(user)}/profile`, { custom });
    this.observer?.profiles?.([profile]);
    return profile;
  }

  /** Blocks a user (v1.2; idempotent: blocking again answers the block
   * as it is). From then on neither writes in their direct conversation,
   * nor opens one (`forbidden`); in groups their messages still come,
   * flagged `blocked_sender` for the caller. The caller's devices get
   * `blocks_changed`. At most 1000 (`409` past it); not oneself (`403
   * forbidden`). */
  async block(user: string): Promise<Block> {
    const block = await this.json<Block>("PUT", `/v1/blocks/${enc(user)}`);
    this.observer?.blocked?.(user, "block", block.blocked_at);
    return block;
  }

  /** Unblocks a user (v1.2; idempotent). */
  async unblock(user: string): Promise<void> {
    await this.empty("DELETE", `/v1/blocks/${enc(user)}`);
    this.observer?.blocked?.(user, "unblock", new Date().toISOString());
  }

  /** A page of the tenant's public groups and channels (v1.3), oldest
   * first: `q` keeps those whose title or topic contains it, ignoring
   * case. With `q` a page may hold fewer than `limit` (even none) and
   * still have a `next_cursor`: follow it until it is null. */
  channels(page: { q?: string; cursor?: string; limit?: number } = {}): Promise<ChannelDirectory> {
    const query = new URLSearchParams();
    if (page.q) query.set("q", page.q);
    if (page.cursor) query.set("cursor", page.cursor);
    if (page.limit !== undefined) query.set("limit", String(page.limit));
    const qs = query.toString();
    return this.json("GET", `/v1/channels${qs ? `?${qs}` : ""}`);
  }

  /** Joins a public group or channel (v1.3; a private one is `403
   * forbidden`, as is a ban). The members get `members_added` with the
   * caller as actor; the caller reads the history from there on unless
   * the channel opens it to newcomers. Answers the conversation, which
   * the client's list takes. */
  join(id: string): Promise<ConversationDetail> {
    return this.told(this.json("POST", `/v1/conversations/${enc(id)}/join`));
  }

  /** Makes an invite (v1.3; owners and admins): at most `max_uses`
   * joins, until `expires_at` (at most 365 days ahead); without either
   * it works until revoked. */
  createInvite(id: string, opts: { max_uses?: number; expires_at?: string | Date } = {}): Promise<Invite> {
    const expires = opts.expires_at instanceof Date ? opts.expires_at.toISOString() : opts.expires_at;
    const body = { ...(opts.max_uses !== undefined ? { max_uses: opts.max_uses } : {}), ...(expires ? { expires_at: expires } : {}) };
    return this.json("POST", `/v1/conversations/${enc(id)}/invites`, body);
  }

  /** A conversation's invites (v1.3; owners and admins), newest first. */
  invites(id: string): Promise<InviteList> {
    return this.json("GET", `/v1/conversations/${enc(id)}/invites`);
  }

  /** Revokes an invite (v1.3; owners and admins): it lets nobody in from
   * now on. */
  revokeInvite(id: string, code: string): Promise<void> {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/invites/${enc(code)}`);
  }

  /** What an invite leads to (v1.3): `404` once revoked, expired or used
   * up. */
  invite(code: string): Promise<InvitePreview> {
    return this.json("GET", `/v1/invites/${enc(code)}`);
  }

  /** Joins the invite's conversation (v1.3), as `join` does. Answers the
   * conversation, which the client's list takes. */
  acceptInvite(code: string): Promise<ConversationDetail> {
    return this.told(this.json("POST", `/v1/invites/${enc(code)}/accept`));
  }

  /** The bans in force in a conversation (v1.2), newest first (owners
   * and admins only: `403 forbidden` otherwise). */
  bans(id: string): Promise<BanList> {
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
  ban(id: string, user: string, until?: string | Date): Promise<Ban> {
    const end = until instanceof Date ? until.toISOString() : until;
    return this.json("POST", `/v1/conversations/${enc(id)}/bans`, { user_id: user, ...(end ? { until: end } : {}) });
  }

  /** Lifts a ban (v1.2; owners and admins): the user may be added again
   * (they are not added back). The members get a `member_unbanned`
   * message. */
  unban(id: string, user: string): Promise<void> {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/bans/${enc(user)}`);
  }

  /** Reports a message of a conversation to the tenant's admins (v1.2;
   * members: `403 not_a_member` otherwise; a system message is refused
   * `409 conflict`, a message not in it `404`). `note`: at most 1000 characters.
   * The report keeps the message as it is now. At most 10 a minute per
   * user by default (`429 rate_limited`). Answers its id. */
  report(id: string, messageId: string, reason: ReportReason, note?: string): Promise<ReportCreated> {
    return this.json("POST", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/reports`, {
      reason,
      ...(note ? { note } : {}),
    });
  }

  /** One page of the tenant's reports (v1.2; tenant admins, a token
   * with `role: "admin"`: `403 forbidden` otherwise), newest first:
   * `status` `open` (the default) or `resolved`, `limit` per page (50 by
   * default, at most 200); pass `next_cursor` back as `cursor` for the
   * next page. */
  async reports(page: { status?: ReportStatus; limit?: number; cursor?: string } = {}): Promise<ReportList> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(page)) if (v !== undefined) query.set(k, String(v));
    const q = query.size ? `?${query}` : "";
    const list = await this.json<ReportList>("GET", `/v1/admin/reports${q}`);
    return { ...list, next_cursor: list.next_cursor ?? null };
  }

  /** Resolves a report (v1.2; tenant admins, `403` otherwise; `404` for
   * no such report): `dismiss` closes it, `delete_message` deletes the
   * message (the members get `message_updated` with `deleted_at`),
   * `ban_sender` bans its sender from the conversation until lifted
   * (`member_banned`; `403 forbidden` for an owner, and the report stays
   * open). A resolved report stays as it was: resolving it again answers
   * it unchanged. Answers the report. */
  resolveReport(reportId: string, action: ReportAction): Promise<Report> {
    return this.json("POST", `/v1/admin/reports/${enc(reportId)}/resolve`, { action });
  }

  /** The tenant's word list (v1.3; tenant admins). */
  blocklist(): Promise<Blocklist> {
    return this.json("GET", "/v1/admin/blocklist");
  }

  /** Replaces the tenant's word list (v1.3; tenant admins): at most 1000
   * words of letters and digits, `reject` or `mask`; `[]` turns it off.
   * Answers it as stored (lower case, sorted, each word once). */
  setBlocklist(words: string[], mode: Blocklist["mode"] = "reject"): Promise<Blocklist> {
    return this.json("PUT", "/v1/admin/blocklist", { words, mode });
  }

  /** The tenant's push templates (v1.3; tenant admins); `{}` for none. */
  pushTemplates(): Promise<PushTemplates> {
    return this.json("GET", "/v1/admin/push/templates");
  }

  /** Replaces the tenant's push templates (v1.3; tenant admins): per
   * kind (`message`, `mention`, `reply`, `reaction`) a `title` and an
   * optional `body` with `{sender}`, `{conversation}` and `{text}`; `{}`
   * goes back to the default wording. Answers them as stored. */
  setPushTemplates(templates: PushTemplates): Promise<PushTemplates> {
    return this.json("PUT", "/v1/admin/push/templates", templates);
  }

  /** Whether the tenant's text messages get link previews (v1.3; tenant
   * admins): `{ enabled }`, true unless turned off. */
  previewSettings(): Promise<PreviewSettings> {
    return this.json("GET", "/v1/admin/previews");
  }

  /** Turns the tenant's link previews on or off (v1.3; tenant admins):
   * off, no message sent from then on is unfurled (cards already made
   * stay). Answers the setting now. */
  setPreviewSettings(enabled: boolean): Promise<PreviewSettings> {
    return this.json("PUT", "/v1/admin/previews", { enabled });
  }

  /** Bans `user` from the whole tenant (v1.3; tenant admins): their
   * tokens are refused (`ApiError` code `banned`) and their connections
   * closed (code 4005) until `until` (RFC 3339) or until lifted. */
  banUser(user: string, opts: { until?: string; reason?: string } = {}): Promise<TenantBan> {
    return this.json("PUT", `/v1/admin/bans/${enc(user)}`, opts);
  }

  /** Lifts `user`'s tenant ban (v1.3; idempotent). */
  unbanUser(user: string): Promise<void> {
    return this.empty("DELETE", `/v1/admin/bans/${enc(user)}`);
  }

  /** A page of the tenant's bans in force, newest first (v1.3); pass
   * `next_cursor` back as `cursor`. */
  tenantBans(page: { limit?: number; cursor?: string } = {}): Promise<TenantBanList> {
    return this.json("GET", `/v1/admin/bans${pageQuery(page)}`);
  }

  /** Shadow-bans `user` (v1.3; tenant admins): their new messages are
   * acked and reach their own devices only, never anyone else's; they
   * are not told. Until `until` (RFC 3339) or until lifted. */
  shadowBanUser(user: string, opts: { until?: string; reason?: string } = {}): Promise<TenantBan> {
    return this.json("PUT", `/v1/admin/shadow_bans/${enc(user)}`, opts);
  }

  /** Lifts `user`'s shadow ban (v1.3; idempotent): their later messages
   * reach everyone again. */
  unshadowBanUser(user: string): Promise<void> {
    return this.empty("DELETE", `/v1/admin/shadow_bans/${enc(user)}`);
  }

  /** A page of the tenant's shadow bans in force, newest first (v1.3). */
  shadowBans(page: { limit?: number; cursor?: string } = {}): Promise<TenantBanList> {
    return this.json("GET", `/v1/admin/shadow_bans${pageQuery(page)}`);
  }

  /** Mutes a member of `id` (v1.3; owners and admins): they stay, but
   * their posts, replies, reactions and edits are refused (`forbidden`)
   * until `until` or until lifted. */
  mute(id: string, user: string, until?: string): Promise<Mute> {
    return this.json("POST", `/v1/conversations/${enc(id)}/mutes`, { user_id: user, ...(until ? { until } : {}) });
  }

  /** Lifts a member's mute (v1.3; idempotent). */
  unmute(id: string, user: string): Promise<void> {
    return this.empty("DELETE", `/v1/conversations/${enc(id)}/mutes/${enc(user)}`);
  }

  /** The mutes in force in `id`, newest first (v1.3; owners and admins). */
  async mutes(id: string): Promise<Mute[]> {
    return (await this.json<{ mutes: Mute[] }>("GET", `/v1/conversations/${enc(id)}/mutes`)).mutes;
  }

  /** Freezes (`true`) or thaws `id` (v1.3; owners and admins): while
   * frozen only they post, react or change its members. */
  freeze(id: string, frozen = true): Promise<ConversationDetail> {
    return this.updateConversation(id, { frozen });
  }

  /** A page of the tenant's moderation audit log, newest first (v1.3;
   * tenant admins); pass `next_cursor` back as `cursor`. */
  auditLog(page: { limit?: number; cursor?: string } = {}): Promise<AuditList> {
    return this.json("GET", `/v1/admin/audit${pageQuery(page)}`);
  }

  /** Erases a user of the tenant (v1.2; tenant admins, `403`
   * otherwise; `404` for a user the tenant has no trace of): their
   * messages become tombstones under a pseudonym, live and archived,
   * and their reactions, memberships, devices, keys, push tokens,
   * settings, blocks and uploads go. Answers the job (`202`); asking
   * again while it runs answers the same job. Follow it with `job`, or
   * `eraseUserAndWait`. */
  eraseUser(user: string): Promise<Job> {
    return this.json("DELETE", `/v1/admin/users/${enc(user)}`);
  }

  /** Sends as the caller over REST (v1.2, `POST .../messages`), for a
   * backend or a bot (a token with `"bot": true`) that holds no socket.
   * The same checks, moderation and writer as `send_message`; answers
   * once the message is committed. Idempotent by `client_msg_id`: a
   * retry (after a timeout, a `503`) answers the message first stored. */
  postMessage(id: string, body: PostMessage): Promise<PostedMessage> {
    return this.json("POST", `/v1/conversations/${enc(id)}/messages`, body);
  }

  /** Full-text search (v1.2, `GET /v1/search`) over the messages of the
   * caller's conversations (or `conversationId`'s alone), best match
   * first: all the words, `"a phrase"` in quotes. A message is findable
   * within 2 s of its ack. Page with `cursor` (a `next_cursor`). */
  search(q: string, opts: { conversationId?: string; limit?: number; cursor?: string } = {}): Promise<SearchResults> {
    const query = new URLSearchParams({ q });
    if (opts.conversationId) query.set("conversation_id", opts.conversationId);
    if (opts.limit !== undefined) query.set("limit", String(opts.limit));
    if (opts.cursor) query.set("cursor", opts.cursor);
    return this.json("GET", `/v1/search?${query}`);
  }

  /** The caller's messages waiting for their `send_at`, soonest first
   * (v1.2, `GET /v1/scheduled`). */
  async scheduled(): Promise<ScheduledMessage[]> {
    const list = await this.json<{ scheduled: ScheduledMessage[] }>("GET", "/v1/scheduled");
    return list.scheduled;
  }

  /** Cancels a waiting message (v1.2): `404` `ApiError` once it was sent
   * or cancelled. */
  async cancelScheduled(scheduledId: string): Promise<void> {
    await this.empty("DELETE", `/v1/scheduled/${enc(scheduledId)}`);
  }

  /** The tenant's outbound webhooks (v1.2; tenant admins), secrets as
   * fingerprints. */
  async webhooks(): Promise<WebhookEndpoint[]> {
    return (await this.json<{ webhooks: WebhookEndpoint[] }>("GET", "/v1/admin/webhooks")).webhooks;
  }

  /** Replaces the tenant's outbound webhooks (v1.2; tenant admins; at
   * most 10, an empty list turns them off); answers them as stored. */
  async setWebhooks(webhooks: WebhookEndpoint[]): Promise<WebhookEndpoint[]> {
    return (await this.json<{ webhooks: WebhookEndpoint[] }>("PUT", "/v1/admin/webhooks", { webhooks })).webhooks;
  }

  /** `postMessage` of a text, with a fresh `client_msg_id` unless one is
   * given: pass your own (from your event's id, say) to retry safely. */
  postText(id: string, text: string, clientMsgId?: string): Promise<PostedMessage> {
    const generated = globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
    return this.postMessage(id, { client_msg_id: clientMsgId ?? generated, content: { kind: "text", text } });
  }

  /** An admin job as it is now (v1.2; tenant admins; `404` for an
   * unknown job or another tenant's). */
  job(jobId: string): Promise<Job> {
    return this.json("GET", `/v1/admin/jobs/${enc(jobId)}`);
  }

  /** Erases a user and waits until the job is `done` (rejects if it
   * `failed`, or is still running after `timeoutMs`, 5 minutes by
   * default), asking every `everyMs` (1 s). */
  async eraseUserAndWait(user: string, opts: { everyMs?: number; timeoutMs?: number } = {}): Promise<Job> {
    const every = opts.everyMs ?? 1000;
    const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
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
  async exportMyData(): Promise<MyDataExport> {
    const response = await this.send("GET", "/v1/me/export");
    try {
      return JSON.parse(await response.text()) as MyDataExport;
    } catch (cause) {
      throw new Error("the export ended before its end: try again", { cause });
    }
  }

  /** Uploads media through a grant: asks for one, then PUTs the bytes
   * straight to its `upload_url`. Returns the content to send. */
  async upload(
    bytes: Blob | Uint8Array,
    mime: string,
    kind: "image" | "file" | "voice" = mime.startsWith("image/") ? "image" : "file",
    caption?: string,
  ): Promise<{ kind: "image" | "file" | "voice"; blob_ref: string; mime: string; size: number; caption?: string }> {
    const size = bytes instanceof Blob ? bytes.size : bytes.byteLength;
    const grant = await this.json<UploadGrant>("POST", "/v1/media", { mime, size });
    const url = new URL(grant.upload_url, this.base).toString();
    // The grant names the method and headers (an S3 URL signs more than
    // the content type): sent as they are.
    const put = await this.fetchImpl(url, {
      method: grant.method,
      headers: { "content-type": mime, ...grant.headers },
      body: bytes as BodyInit,
    });
    if (!put.ok) throw await apiError(put);
    return { kind, blob_ref: grant.blob_ref, mime, size, ...(caption ? { caption } : {}) };
  }

  /** The bytes of a media message's blob (for members of a conversation
   * that references it). */
  async download(blobRef: string): Promise<Blob> {
    const response = await this.send("GET", `/v1/media/${enc(blobRef)}`);
    return response.blob();
  }

  ownKeys(device: string): Promise<DeviceKeys> {
    return this.json("GET", `/v1/devices/${enc(device)}/keys`);
  }

  publishKeys(device: string, keys: DeviceKeysUpload): Promise<DeviceKeys> {
    return this.json("PUT", `/v1/devices/${enc(device)}/keys`, keys);
  }

  devices(user: string): Promise<UserDevices> {
    return this.json("GET", `/v1/users/${enc(user)}/devices`);
  }

  claimPrekey(user: string, device: string): Promise<ClaimedKeys> {
    return this.json("POST", `/v1/users/${enc(user)}/devices/${enc(device)}/claim`);
  }

  registerPush(device: string, registration: PushRegistration): Promise<PushRegistration> {
    return this.json("PUT", `/v1/devices/${enc(device)}/push`, registration);
  }

  pushRegistration(device: string): Promise<PushRegistration> {
    return this.json("GET", `/v1/devices/${enc(device)}/push`);
  }

  unregisterPush(device: string): Promise<void> {
    return this.empty("DELETE", `/v1/devices/${enc(device)}/push`);
  }

  presence(user: string): Promise<PresenceInfo> {
    return this.json("GET", `/v1/users/${enc(user)}/presence`);
  }

  private async told(answer: Promise<ConversationDetail>): Promise<ConversationDetail> {
    const detail = await answer;
    this.observer?.conversation(detail);
    return detail;
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.send(method, path, body);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  private async empty(method: string, path: string, body?: unknown): Promise<void> {
    await this.send(method, path, body);
  }

  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    const attempt = async (token: string) =>
      this.fetchImpl(new URL(path, this.base).toString(), {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    let response = await attempt(await this.tokens.get());
    if (response.status === 401 && this.tokens.refreshable) {
      response = await attempt(await this.tokens.refresh());
    }
    if (!response.ok) throw await apiError(response);
    return response;
  }
}

function enc(part: string): string {
  return encodeURIComponent(part);
}

/** `?limit=&cursor=` of the fields given. */
function pageQuery(page: { limit?: number; cursor?: string }): string {
  const query = new URLSearchParams();
  if (page.limit !== undefined) query.set("limit", String(page.limit));
  if (page.cursor) query.set("cursor", page.cursor);
  return query.size ? `?${query}` : "";
}

async function apiError(response: Response): Promise<ApiError> {
  // `Retry-After` in seconds, should the body not say it in ms.
  const header = response.headers.get("retry-after")?.trim();
  const after = header && /^\d+$/.test(header) ? Number(header) * 1000 : undefined;
  try {
    const body = (await response.json()) as { code?: string; message?: string; retry_after_ms?: number | null };
    return new ApiError(response.status, body.code ?? "unknown", body.message ?? response.statusText, body.retry_after_ms ?? after);
  } catch {
    return new ApiError(response.status, "unknown", response.statusText, after);
  }
}
