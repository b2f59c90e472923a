/** Outbound webhooks (v1.2), for the backend that receives them: checks
 * `Switchboard-Signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256 of
 * "<t>.<body>">`) over the raw body with WebCrypto (Node 18+, browsers,
 * workers). */

export interface VerifyOptions {
  /** How old `t` may be, in seconds (default 300): older is a replay. */
  toleranceSecs?: number;
  /** The current time in ms (default `Date.now()`), for tests. */
  now?: number;
}

/** The event a webhook POST carries. */
export interface WebhookEvent {
  id: string;
  type:
    | "message.created"
    | "message.updated"
    | "reaction"
    | "member.added"
    | "member.removed"
    | "report.created"
    | "member.role_changed"
    | "member.banned"
    | "member.unbanned"
    | "message.pinned"
    | "message.unpinned"
    | "conversation.updated"
    | "moderation.audit";
  tenant: string;
  /** Absent for a tenant-wide `moderation.audit` event (v1.3). */
  conversation_id?: string;
  created_at: string;
  data: Record<string, unknown>;
}

const hex = (bytes: ArrayBuffer): string => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");

/** Resolves with the event when `signature` (the `Switchboard-Signature`
 * header) is the endpoint `secret`'s over the raw `body` and recent;
 * rejects otherwise. Verify the bytes as they arrived, before any JSON
 * parsing. */
export async function verifyWebhook(
  secret: string,
  signature: string,
  body: string | Uint8Array,
  options: VerifyOptions = {},
): Promise<WebhookEvent> {
  const parts = Object.fromEntries(
    signature.split(",").map((p) => {
      const at = p.indexOf("=");
      return [p.slice(0, at).trim(), p.slice(at + 1).trim()];
    }),
  );
  const t = Number(parts.t);
  if (!Number.isInteger(t) || !parts.v1) throw new Error("Switchboard-Signature is not t=<unix>,v1=<hex>");
  const age = (options.now ?? Date.now()) / 1000 - t;
  if (Math.abs(age) > (options.toleranceSecs ?? 300)) throw new Error(`the signature's time is ${Math.round(age)} s off`);
  const raw = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const signed = new Uint8Array(String(t).length + 1 + raw.length);
  signed.set(new TextEncoder().encode(`${t}.`));
  signed.set(raw, String(t).length + 1);
  const key = await globalThis.crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const expected = hex(await globalThis.crypto.subtle.sign("HMAC", key, signed));
  // Constant time in the signature's length.
  let diff = expected.length ^ parts.v1.length;
  for (let i = 0; i < expected.length; i += 1) diff |= expected.charCodeAt(i) ^ (parts.v1.charCodeAt(i) || 0);
  if (diff !== 0) throw new Error("the signature does not match");
  return JSON.parse(new TextDecoder().decode(raw)) as WebhookEvent;
}
