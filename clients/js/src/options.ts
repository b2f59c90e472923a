// The client's options and events.
import type { CommandEvent, ReactionEvent } from "./commands.js";
import type { Status, WebSocketLike } from "./connection.js";
import type { ErrorFrame } from "./errors.js";
import type { PersistLimits, StateStore } from "./persist.js";
import type { PollUpdatedEvent } from "./polls.js";
import type { BlockAction, Message, NotificationLevel, PinAction, Profile } from "./protocol.js";
import type { OutgoingMessage } from "./status.js";
import type { TokenSource } from "./token.js";

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
  /** How the WebSocket carries the token: `"protocol"` (default), as the
   * subprotocol `switchboard.token.<JWT>` beside `switchboard.v1`, out of
   * the URL that proxies and access logs keep; or `"query"`, as
   * `?token=`, for a gateway older than the subprotocol. */
  tokenIn?: "protocol" | "query";
  /** Send `ack_delivered` for what arrives (default true). */
  ackDelivered?: boolean;
  /** Refresh the token this long before it expires (default 60 s). */
  refreshBeforeMs?: number;
  /** Write a send, edit or delete again when its answer has not come
   * this long after it was written on an open connection (default 10 s):
   * an answer can be lost without the connection dropping (live delivery
   * is at most once), and the server answers a repeat from the store. */
  resendAfterMs?: number;
  /** Give a send, edit, delete or reaction up (status `failed`, a `CommandError`
   * with code `timeout`) when it is not answered this long after it was
   * made. Default: never (a send waits out any outage). */
  giveUpAfterMs?: number;
  /** At most this many sends, edits, deletes and reactions wait for their answer
   * at once (default 1000); past it, new ones fail at once with code
   * `queue_full`. Marks are not counted: only the highest per
   * conversation waits. */
  maxQueued?: number;
  /** Keep the state across reloads: `"indexeddb"` (browsers), or a
   * `StateStore` (`MemoryStore`, or your own). Default: nothing kept. */
  persist?: StateStore | "indexeddb";
  /** With `persist: "indexeddb"`: the database is
   * `switchboard:<storageName>`, one per user and device. Defaults to the
   * gateway's host, user and device of a fixed token; required with a
   * token function. */
  storageName?: string;
  /** What is kept: see `PersistLimits`. */
  persistLimits?: PersistLimits;
}

export interface ClientEvents extends Record<string, unknown> {
  status: Status;
  /** A message new to this client (never one already seen). */
  message: Message;
  /** A message edited or deleted, or (v1.3) given its link previews:
   * then `edited_at` is as it was (the message was not edited). */
  updated: Message;
  receipt: { conversation_id: string; user_id: string; kind: "delivered" | "read"; seq: number };
  /** Who is typing in a conversation changed (a start, a stop, or one
   * running out). */
  typing: { conversation_id: string; users: string[] };
  presence: { user_id: string; status: "online" | "offline"; last_seen: string | null };
  /** An error frame that answers no send (an edit, delete or mark the
   * server refused for good comes here too, besides its promise). */
  error: ErrorFrame;
  /** Something in a conversation changed: re-render it. */
  change: string;
  /** One of this client's messages changed status (`pending` when made
   * or retried, `sent`, `failed`), or a failed one was discarded. */
  outgoing: OutgoingMessage;
  /** An edit, delete, reaction or vote was answered (done or failed);
   * also one restored from the store, whose promise nobody holds. */
  command: CommandEvent;
  /** A member's reaction changed (v1.1), after the conversation's state
   * applied it; `counts` are absolute. */
  reaction: ReactionEvent;
  /** A poll's results changed (v1.3: a vote, or its closing), after
   * the conversation's state applied them; `counts` are absolute. */
  poll_updated: PollUpdatedEvent;
  /** A message was pinned or unpinned (v1.1), after the conversation's
   * state applied it (`conversation(id).pins`). */
  pins_changed: { conversation_id: string; message_id: string; action: PinAction; by: string };
  /** The user's own settings of a conversation changed on another
   * device (v1.1), after the conversation list applied them. */
  settings_changed: { conversation_id: string; notifications: NotificationLevel; muted_until: string | null };
  /** The user blocked or unblocked someone (v1.2), here or on another
   * device, after `client.blocked` and the `blocked_sender` of the
   * messages held here followed it: once per change of the set, whether
   * a `blocks_changed` event, a `rest.block`/`unblock` answer or the
   * list read as a connection opens told it. */
  blocks_changed: { user_id: string; action: BlockAction };
  /** A user's profile changed (v1.3), after `client.profiles` took it:
   * a `profile_updated` event, a REST answer, or a profile read again as
   * a connection opened after being away. */
  profile_updated: Profile;
  /** The server ended the session for good (close code `4004`: the user
   * is being erased): the client closed and will not reconnect; sign
   * out. */
  ended: { code: number; reason: string };
}
