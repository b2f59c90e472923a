// Profiles (v1.3) as this client knows them: read on demand (`GET
// /v1/users?ids=`, 100 at a time), kept current by the `profile_updated`
// events the server sends for everyone who shares a conversation with
// the user, and read again as each connection after the first opens
// (events are at most once: changes made while away came to nobody here).
import type { Profile } from "./protocol.js";

export type { Profile };

/** The most ids one `GET /v1/users?ids=` reads. */
export const PROFILES_PER_READ = 100;

/** Reads profiles from the server (the client's `rest.users`). */
export type ReadProfiles = (ids: string[]) => Promise<Profile[]>;

/** Whether `next` is at least as new as `held`: the newer `updated_at`
 * wins (RFC 3339 times of the server, compared as instants). */
function newer(next: Profile, held: Profile | undefined): boolean {
  if (!held || !held.updated_at) return true;
  if (!next.updated_at) return false;
  return Date.parse(next.updated_at) >= Date.parse(held.updated_at);
}

export class ProfileCache {
  private readonly byUser = new Map<string, Profile>();
  /** Reads under way, by user: one read per user at a time. */
  private readonly reading = new Map<string, Promise<Profile | undefined>>();

  constructor(
    private readonly readProfiles: ReadProfiles,
    private readonly changed: (profile: Profile) => void,
  ) {}

  /** The profile held for `user`, if any (no read). A status past its
   * `expires_at` is left out, as the server would. */
  get(user: string): Profile | undefined {
    const held = this.byUser.get(user);
    if (!held?.status?.expires_at || Date.parse(held.status.expires_at) > Date.now()) return held;
    return { ...held, status: null };
  }

  /** The name to show for `user`: their display name, else their id. */
  displayName(user: string): string {
    return this.byUser.get(user)?.display_name ?? user;
  }

  get size(): number {
    return this.byUser.size;
  }

  /** The users whose profiles are held. */
  users(): string[] {
    return [...this.byUser.keys()];
  }

  /** The profiles of `users`, read from the server for those not held
   * (or all of them with `refresh`), 100 a request. */
  async load(users: readonly string[], refresh = false): Promise<Profile[]> {
    const wanted = [...new Set(users)];
    const missing = wanted.filter((u) => refresh || (!this.byUser.has(u) && !this.reading.has(u)));
    for (let i = 0; i < missing.length; i += PROFILES_PER_READ) {
      const chunk = missing.slice(i, i + PROFILES_PER_READ);
      const read = this.readProfiles(chunk).then((found) => {
        for (const p of found) this.apply(p);
      });
      for (const u of chunk) {
        const one = read.then(() => this.byUser.get(u));
        this.reading.set(u, one);
        one.finally(() => {
          if (this.reading.get(u) === one) this.reading.delete(u);
        }).catch(() => {});
      }
    }
    await Promise.all(wanted.map((u) => this.reading.get(u)));
    return wanted.map((u) => this.get(u)).filter((p): p is Profile => p !== undefined);
  }

  /** A profile as the server told it (an event, or a REST answer): held
   * when newer than the one held; the app is told of a change. */
  apply(profile: Profile): boolean {
    const held = this.byUser.get(profile.user_id);
    if (!newer(profile, held)) return false;
    this.byUser.set(profile.user_id, profile);
    if (!held || JSON.stringify(held) !== JSON.stringify(profile)) {
      this.changed(profile);
      return true;
    }
    return false;
  }

  /** Reads every held profile again (as a connection opens after being
   * away). A failure leaves what is held. */
  refresh(): void {
    if (this.byUser.size === 0) return;
    this.load(this.users(), true).catch(() => {});
  }
}
