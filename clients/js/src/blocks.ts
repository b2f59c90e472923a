// The users the caller blocks (v1.2), as this client knows them: read
// (`GET /v1/blocks`) as each connection opens, then kept by the
// `blocks_changed` events the server sends to all the caller's devices
// and by the caller's own `rest.block` and `rest.unblock`.
import type { BlockAction } from "./protocol.js";

/** A user the caller blocks, and since when (RFC 3339). */
export interface BlockInfo {
  user_id: string;
  blocked_at: string;
}

export class BlockSet {
  /** By user: since when. */
  private readonly byUser = new Map<string, string>();
  /** By user: when (ms, this device's clock) a change of theirs was seen
   * here; a list asked for before it is older for that user. */
  private readonly seenAt = new Map<string, number>();
  private read = false;

  /** Whether the list was read from the server at least once (before,
   * only the changes seen here are known). */
  get loaded(): boolean {
    return this.read;
  }

  has(user: string): boolean {
    return this.byUser.has(user);
  }

  get size(): number {
    return this.byUser.size;
  }

  /** The blocks, newest first. */
  list(): BlockInfo[] {
    return [...this.byUser]
      .map(([user_id, blocked_at]) => ({ user_id, blocked_at }))
      .sort((a, b) => Date.parse(b.blocked_at) - Date.parse(a.blocked_at) || (a.user_id < b.user_id ? -1 : 1));
  }

  /** Takes the list as the server answered it (asked for at `askedAt`);
   * a user whose block changed here since keeps what that change said.
   * Returns the users whose state changed. */
  replace(blocks: readonly BlockInfo[], askedAt: number): string[] {
    const listed = new Map(blocks.map((b) => [b.user_id, b.blocked_at]));
    const changed: string[] = [];
    const newer = (user: string) => (this.seenAt.get(user) ?? -Infinity) >= askedAt;
    for (const user of [...this.byUser.keys()]) {
      if (listed.has(user) || newer(user)) continue;
      this.byUser.delete(user);
      changed.push(user);
    }
    for (const [user, at] of listed) {
      if (newer(user)) continue;
      if (!this.byUser.has(user)) changed.push(user);
      this.byUser.set(user, at);
    }
    this.read = true;
    return changed;
  }

  /** A block or unblock (an event, or the caller's own REST call); says
   * whether the set changed. */
  change(user: string, action: BlockAction, at = new Date().toISOString()): boolean {
    this.seenAt.set(user, Date.now());
    if (action === "block") {
      if (this.byUser.has(user)) return false;
      this.byUser.set(user, at);
      return true;
    }
    return this.byUser.delete(user);
  }

  /** Forgets everything (another user's session). */
  clear(): void {
    this.byUser.clear();
    this.seenAt.clear();
    this.read = false;
  }
}
