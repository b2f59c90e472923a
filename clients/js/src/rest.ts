import type { Message } from "./protocol.js";
import type { Tokens } from "./token.js";

/** An error answer of the REST API: `{ "code", "message" }` with its
 * HTTP status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "ApiError";
  }
}

export type ConversationKind = "direct" | "group" | "channel";

export interface ConversationSummary {
  conversation_id: string;
  kind: ConversationKind;
  title: string | null;
  members: string[];
  created_at: string;
  last_seq: number;
  last_message: Message | null;
  preview?: string | null;
  unread_count: number;
}

export interface MemberView {
  user_id: string;
  delivered_seq: number;
  read_seq: number;
}

/** One page of `GET /v1/conversations`. */
export interface ConversationPage {
  conversations: ConversationSummary[];
  /** Pass as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

export interface ConversationDetail extends Omit<ConversationSummary, "members"> {
  members: MemberView[];
}

export interface HistoryPage {
  messages: Message[];
  next_before_seq: number | null;
}

export interface MessageVersions {
  message_id: string;
  versions: { version: number; content: Message["content"]; at: string; editor: string }[];
}

export interface UploadGrant {
  blob_ref: string;
  upload_url: string;
  expires_at: string;
}

/** The REST half of the API (PROTOCOL.md, "Control plane"): every call
 * carries the session's token, and one refused as unauthorized is tried
 * once more with a fresh token when the token source can give one. */
export class Rest {
  constructor(
    private readonly base: string,
    private readonly tokens: Tokens,
    private readonly fetchImpl: typeof fetch = globalThis.fetch.bind(globalThis),
  ) {}

  createConversation(kind: ConversationKind, members: string[], title?: string): Promise<ConversationSummary> {
    return this.json("POST", "/v1/conversations", { kind, members, ...(title ? { title } : {}) });
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
    return this.json("GET", `/v1/conversations/${enc(id)}`);
  }

  addMembers(id: string, members: string[]): Promise<unknown> {
    return this.json("POST", `/v1/conversations/${enc(id)}/members`, { members });
  }

  removeMember(id: string, user: string): Promise<unknown> {
    return this.json("DELETE", `/v1/conversations/${enc(id)}/members/${enc(user)}`);
  }

  /** One page of history, newest first; pass `next_before_seq` back as
   * `before_seq` for the page before it. */
  history(id: string, page: { before_seq?: number; after_seq?: number; limit?: number } = {}): Promise<HistoryPage> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(page)) if (v !== undefined) query.set(k, String(v));
    const q = query.size ? `?${query}` : "";
    return this.json("GET", `/v1/conversations/${enc(id)}/messages${q}`);
  }

  versions(id: string, messageId: string): Promise<MessageVersions> {
    return this.json("GET", `/v1/conversations/${enc(id)}/messages/${enc(messageId)}/versions`);
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
    const put = await this.fetchImpl(url, {
      method: "PUT",
      headers: { "content-type": mime },
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

  ownKeys(device: string): Promise<unknown> {
    return this.json("GET", `/v1/devices/${enc(device)}/keys`);
  }

  publishKeys(device: string, keys: unknown): Promise<unknown> {
    return this.json("PUT", `/v1/devices/${enc(device)}/keys`, keys);
  }

  devices(user: string): Promise<unknown> {
    return this.json("GET", `/v1/users/${enc(user)}/devices`);
  }

  claimPrekey(user: string, device: string): Promise<unknown> {
    return this.json("POST", `/v1/users/${enc(user)}/devices/${enc(device)}/claim`);
  }

  registerPush(device: string, registration: { provider: "fcm" | "apns" | "webhook"; token: string }): Promise<unknown> {
    return this.json("PUT", `/v1/devices/${enc(device)}/push`, registration);
  }

  pushRegistration(device: string): Promise<unknown> {
    return this.json("GET", `/v1/devices/${enc(device)}/push`);
  }

  unregisterPush(device: string): Promise<unknown> {
    return this.json("DELETE", `/v1/devices/${enc(device)}/push`);
  }

  presence(user: string): Promise<{ user_id: string; status: "online" | "offline"; last_seen: string | null }> {
    return this.json("GET", `/v1/users/${enc(user)}/presence`);
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.send(method, path, body);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
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

async function apiError(response: Response): Promise<ApiError> {
  try {
    const body = (await response.json()) as { code?: string; message?: string };
    return new ApiError(response.status, body.code ?? "unknown", body.message ?? response.statusText);
  } catch {
    return new ApiError(response.status, "unknown", response.statusText);
  }
}
