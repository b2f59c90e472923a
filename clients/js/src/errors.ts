import type { ClientFrame, ErrorCode, ServerFrame } from "./protocol.js";

/** An `error` frame of the server. */
export type ErrorFrame = Extract<ServerFrame, { type: "error" }>;

/** Why the SDK itself gave a command up, without a refusal from the
 * server: `timeout` (not answered within `giveUpAfterMs`), `queue_full`
 * (more than `maxQueued` sends, edits and deletes were waiting). */
export type LocalErrorCode = "timeout" | "queue_full";

/** The request types the SDK's commands are made of. */
export type CommandType = Exclude<ClientFrame["type"], "ping" | "refresh" | "pull_backlog">;

/** A command (a send, an edit, a delete, a reaction, a mark) that could not be carried
 * out: refused by the server (`frame` is its `error` frame, `code` its
 * code) or given up by the SDK (`frame` is undefined, `code` a
 * `LocalErrorCode`). */
export class CommandError extends Error {
  readonly frame: ErrorFrame | undefined;
  /** With a slow mode's `rate_limited` (v1.2): how long (ms, from the
   * refusal) until this user may send there again; undefined otherwise. */
  readonly retryAfterMs: number | undefined;

  constructor(
    readonly request: CommandType,
    readonly conversationId: string,
    readonly code: ErrorCode | LocalErrorCode,
    message: string,
    frame?: ErrorFrame,
  ) {
    super(`${code}: ${message}`);
    this.name = "CommandError";
    this.frame = frame;
    this.retryAfterMs = frame?.retry_after_ms ?? undefined;
  }

  /** The error of a refusal by the server. */
  static refused(request: CommandType, conversationId: string, frame: ErrorFrame): CommandError {
    return new CommandError(request, conversationId, frame.code, frame.message, frame);
  }
}

/** A send the server refused (its `error` frame's code and message). A
 * send the SDK gave up on rejects with a plain `CommandError`. Under
 * slow mode (v1.2) it is `rate_limited` with `retryAfterMs`: that
 * `client_msg_id` stays refused, so the send goes again as a new one
 * after the wait (`client.resendAsNew`). */
export class SendError extends CommandError {
  declare readonly frame: ErrorFrame;

  constructor(frame: ErrorFrame) {
    super("send_message", frame.conversation_id ?? "", frame.code, frame.message, frame);
    this.name = "SendError";
  }

  /** Whether a slow mode refused it (v1.2): `rate_limited` saying when
   * to send again. */
  get slowMode(): boolean {
    return isSlowMode(this.frame);
  }
}

/** Whether an `error` frame is a slow mode's refusal of a send (v1.2):
 * `rate_limited` with `retry_after_ms`. Its `client_msg_id` stays
 * refused (a resend with it gets the same answer), so such a send is
 * given up, not written again; other `rate_limited` answers (the
 * gateway's own rates) are retried as before. */
export function isSlowMode(frame: Pick<ErrorFrame, "code" | "retry_after_ms"> | undefined): boolean {
  return frame?.code === "rate_limited" && typeof frame.retry_after_ms === "number";
}

/** Errors a resend cannot fix: the command is given up at once. */
const FINAL_CODES: ReadonlySet<string> = new Set([
  "invalid_frame",
  "invalid_request",
  "too_large",
  "unauthorized",
  "forbidden",
  "not_a_member",
  "not_found",
  "conflict",
  "rejected_by_policy",
  "quota_exceeded",
]);

/** How many `internal` answers a command gets before it is given up
 * (`rate_limited` and `unavailable` never give a command up). */
const INTERNAL_ANSWERS = 3;

/** What to do about a refusal that is the `answers`-th one of a command:
 * give up, or write it again after the returned delay (1 s, doubled
 * with each answer, at most 30 s). */
export function onRefusal(code: ErrorCode, answers: number): { final: true } | { final: false; delayMs: number } {
  if (FINAL_CODES.has(code) || (code === "internal" && answers >= INTERNAL_ANSWERS)) return { final: true };
  return { final: false, delayMs: Math.min(30_000, 1_000 * 2 ** Math.max(0, answers - 1)) };
}
