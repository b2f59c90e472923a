// Optional persistence of the client's state across reloads: a pluggable
// store of records (IndexedDB in browsers, memory for tests and Node),
// what is kept in it and within which bounds, and writing it as the state
// changes.
import type { CommandRecord } from "./commands.js";
import type { ConversationSnapshot } from "./conversation.js";
import type { ListSnapshot } from "./conversations.js";
import type { OutgoingRecord } from "./status.js";

/** Records by key; values are plain JSON-like data (what IndexedDB's
 * structured clone keeps). */
export type StoredRecords = Record<string, unknown>;

/**
 * Where the client keeps its state. Any object with these three methods
 * will do (each may answer at once or with a promise): `MemoryStore`,
 * `IndexedDbStore`, or the app's own (say, over SQLite in React Native).
 * One store holds one user's state on one device.
 */
export interface StateStore {
  /** Every record. */
  load(): StoredRecords | Promise<StoredRecords>;
  /** Writes `puts` and deletes `deletes` (keys), as one change. */
  write(puts: StoredRecords, deletes: string[]): void | Promise<void>;
  /** Deletes every record. */
  clear(): void | Promise<void>;
}

/** A store in memory: for tests and Node. Records are copied in and out
 * (as IndexedDB does), so two clients over one store share nothing but
 * what was written. */
export class MemoryStore implements StateStore {
  readonly records = new Map<string, unknown>();

  load(): StoredRecords {
    return Object.fromEntries([...this.records].map(([k, v]) => [k, structuredClone(v)]));
  }

  write(puts: StoredRecords, deletes: string[]): void {
    for (const k of deletes) this.records.delete(k);
    for (const [k, v] of Object.entries(puts)) this.records.set(k, structuredClone(v));
  }

  clear(): void {
    this.records.clear();
  }
}

/** What `IndexedDbStore` takes for `indexedDB` (the browser's
 * `IDBFactory`), typed loosely so that these declarations compile
 * without the DOM library (a Node app). */
export interface IndexedDbFactory {
  open(name: string, version?: number): unknown;
}

/** A store in the browser's IndexedDB: the database
 * `switchboard:<name>`, one object store of records by key. */
export class IndexedDbStore implements StateStore {
  private db: Promise<IDBDatabase> | undefined;
  private readonly factory: IDBFactory;

  constructor(
    readonly name: string,
    factory: IndexedDbFactory | undefined = (globalThis as { indexedDB?: IndexedDbFactory }).indexedDB,
  ) {
    if (!factory) throw new Error("IndexedDbStore: this environment has no indexedDB (use MemoryStore, or a store of your own)");
    this.factory = factory as IDBFactory;
  }

  async load(): Promise<StoredRecords> {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const out: StoredRecords = {};
      const request = db.transaction("records", "readonly").objectStore("records").openCursor();
      request.onsuccess = () => {
        const cursor = request.result;
        if (!cursor) {
          resolve(out);
          return;
        }
        out[String(cursor.key)] = cursor.value;
        cursor.continue();
      };
      request.onerror = () => reject(request.error);
    });
  }

  async write(puts: StoredRecords, deletes: string[]): Promise<void> {
    const db = await this.open();
    await this.change(db, (store) => {
      for (const k of deletes) store.delete(k);
      for (const [k, v] of Object.entries(puts)) store.put(v, k);
    });
  }

  async clear(): Promise<void> {
    const db = await this.open();
    await this.change(db, (store) => store.clear());
  }

  private change(db: IDBDatabase, apply: (store: IDBObjectStore) => void): Promise<void> {
    return new Promise((resolve, reject) => {
      const tx = db.transaction("records", "readwrite");
      apply(tx.objectStore("records"));
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  }

  private open(): Promise<IDBDatabase> {
    this.db ??= new Promise((resolve, reject) => {
      const request = this.factory.open(`switchboard:${this.name}`, 1);
      request.onupgradeneeded = () => {
        if (!request.result.objectStoreNames.contains("records")) request.result.createObjectStore("records");
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    return this.db;
  }
}

/** How much is kept: the newest `messagesPerConversation` messages
 * (default 100) of the `conversations` conversations most recently
 * active (default 50), and as many items of the list. Pending sends and
 * queued commands are always kept (they are bounded by `maxQueued`). */
export interface PersistLimits {
  messagesPerConversation?: number;
  conversations?: number;
}

const VERSION = 1;

/** The records of a store: `meta`, `list`, `outbox` and `c:<id>` per
 * conversation. */
export interface Meta {
  version: number;
  user: string;
  device: string;
}
export interface OutboxRecord {
  sends: OutgoingRecord[];
  commands: CommandRecord[];
}

/** What persistence reads from, and restores into, the client. */
export interface PersistHost {
  identity(): { user: string; device: string } | undefined;
  conversation(id: string): ConversationSnapshot | undefined;
  list(limit: number): ListSnapshot | undefined;
  outbox(): OutboxRecord;
}

/** What a store held, as read at start. */
export interface Restored {
  meta: Meta | undefined;
  list: ListSnapshot | undefined;
  outbox: OutboxRecord | undefined;
  conversations: ConversationSnapshot[];
}

/** Reads a store's records into their parts (none of another version). */
export function readRecords(records: StoredRecords): Restored {
  const meta = records.meta as Meta | undefined;
  if (!meta || meta.version !== VERSION) return { meta: undefined, list: undefined, outbox: undefined, conversations: [] };
  const conversations = Object.entries(records)
    .filter(([k]) => k.startsWith("c:"))
    .map(([, v]) => v as ConversationSnapshot);
  return {
    meta,
    list: records.list as ListSnapshot | undefined,
    outbox: records.outbox as OutboxRecord | undefined,
    conversations,
  };
}

/** Writes the client's state to a store as it changes: the outbox at
 * once (a reload right after a send must not lose it), the rest a moment
 * later, coalesced. One write at a time. */
export class Persistence {
  private readonly dirty = new Set<string>();
  /** Stored conversations, by when they last changed. */
  private readonly stored = new Map<string, number>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private writing: Promise<void> = Promise.resolve();
  private readonly messages: number;
  private readonly conversations: number;

  constructor(
    readonly store: StateStore,
    private readonly host: PersistHost,
    limits: PersistLimits = {},
    private readonly delayMs = 250,
  ) {
    this.messages = limits.messagesPerConversation ?? 100;
    this.conversations = limits.conversations ?? 50;
  }

  /** Records what was restored as stored (by when it changed). */
  restored(conversations: ConversationSnapshot[]): void {
    for (const c of conversations) this.stored.set(c.conversation_id, lastActivity(c));
  }

  conversationChanged(id: string): void {
    this.mark(`c:${id}`, false);
  }

  listChanged(): void {
    this.mark("list", false);
  }

  outboxChanged(): void {
    this.mark("outbox", true);
  }

  /** Writes what changed now; resolves once it is in the store. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.writing = this.writing.then(() => this.writeDirty()).catch(() => {});
    return this.writing;
  }

  /** Empties the store (another user's state was in it). */
  clear(): Promise<void> {
    this.dirty.clear();
    this.stored.clear();
    this.writing = this.writing.then(() => this.store.clear()).catch(() => {});
    return this.writing;
  }

  private mark(key: string, soon: boolean): void {
    this.dirty.add(key);
    if (soon) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.flush(), 0);
    } else {
      this.timer ??= setTimeout(() => void this.flush(), this.delayMs);
    }
  }

  private async writeDirty(): Promise<void> {
    const identity = this.host.identity();
    if (!identity || this.dirty.size === 0) return;
    const keys = [...this.dirty];
    this.dirty.clear();
    const puts: StoredRecords = { meta: { version: VERSION, user: identity.user, device: identity.device } satisfies Meta };
    const deletes: string[] = [];
    for (const key of keys) {
      if (key === "outbox") puts.outbox = this.host.outbox();
      else if (key === "list") {
        const list = this.host.list(this.conversations);
        if (list) puts.list = list;
      } else {
        const id = key.slice(2);
        const snapshot = this.host.conversation(id);
        if (!snapshot) continue;
        puts[key] = snapshot;
        this.stored.set(id, lastActivity(snapshot));
      }
    }
    // Past the bound, the conversations least recently active go.
    if (this.stored.size > this.conversations) {
      const keep = new Set(this.host.outbox().sends.map((s) => s.conversation_id));
      const order = [...this.stored].sort((a, b) => a[1] - b[1]);
      for (const [id] of order) {
        if (this.stored.size <= this.conversations) break;
        if (keep.has(id)) continue;
        this.stored.delete(id);
        delete puts[`c:${id}`];
        deletes.push(`c:${id}`);
      }
    }
    try {
      await this.store.write(puts, deletes);
    } catch {
      // Not stored this time (quota, a closed database): written again
      // with the next change.
      for (const key of keys) this.dirty.add(key);
    }
  }

  /** The bound on messages each stored conversation keeps. */
  get messagesPerConversation(): number {
    return this.messages;
  }
}

function lastActivity(c: ConversationSnapshot): number {
  const last = c.messages[c.messages.length - 1];
  return last ? Date.parse(last.created_at) : 0;
}
