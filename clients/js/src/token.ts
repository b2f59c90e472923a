/** A token, or a function that fetches a fresh one (called on every
 * connect and before the current one expires). */
export type TokenSource = string | (() => Promise<string>);

/** Holds the current token and knows when it expires. */
export class Tokens {
  private current: string | undefined;

  constructor(private readonly source: TokenSource) {
    if (typeof source === "string") this.current = source;
  }

  /** Whether a fresh token can be fetched. */
  get refreshable(): boolean {
    return typeof this.source === "function";
  }

  /** The current token, fetched first if there is none yet. */
  async get(): Promise<string> {
    if (this.current === undefined) return this.refresh();
    return this.current;
  }

  /** A fresh token from the source (the same one for a fixed token). */
  async refresh(): Promise<string> {
    if (typeof this.source === "string") return this.source;
    this.current = await this.source();
    return this.current;
  }

  /** Who the current token speaks for. */
  identity(): { user: string; device: string } | undefined {
    return this.current === undefined ? undefined : identityOf(this.current);
  }

  /** When the current token expires (ms since the epoch), if it says. */
  expiresAt(): number | undefined {
    return this.current === undefined ? undefined : expiryOf(this.current);
  }
}

/** The `exp` claim of a JWT, in ms; `undefined` if it has none or the
 * token is not a JWT. The signature is the server's business. */
export function expiryOf(token: string): number | undefined {
  const exp = claimsOf(token).exp;
  return typeof exp === "number" ? exp * 1000 : undefined;
}

/** Who a token speaks for: its `sub` and `device` (default `default`). */
export function identityOf(token: string): { user: string; device: string } | undefined {
  const claims = claimsOf(token);
  if (typeof claims.sub !== "string") return undefined;
  return { user: claims.sub, device: typeof claims.device === "string" ? claims.device : "default" };
}

function claimsOf(token: string): Record<string, unknown> {
  const payload = token.split(".")[1];
  if (!payload) return {};
  try {
    const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
    const json = JSON.parse(atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4)));
    return json && typeof json === "object" ? json : {};
  } catch {
    return {};
  }
}
