// One device's WebSocket to the gateway, kept open: connects, notices a
// dead connection (liveness.ts), reconnects with back-off and jitter,
// follows the browser's offline and online events, and refreshes the
// token of an open session. What the frames mean is the client's
// business (client.ts).
import { Liveness } from "./liveness.js";
import type { ClientFrame, ServerFrame } from "./protocol.js";
import type { Tokens } from "./token.js";

/** What the SDK uses of a WebSocket: the browser's and the `ws`
 * package's both fit. The handlers take `never` so that either's own
 * event types are accepted (the SDK reads only `data` of a message). */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: drops the connection without a closing handshake. */
  terminate?: () => void;
  onopen: ((event: never) => void) | null;
  onmessage: ((event: never) => void) | null;
  onclose: ((event: never) => void) | null;
  onerror: ((event: never) => void) | null;
}

/** A `WebSocket` constructor: the browser's, or `ws` under Node 20. */
export type WebSocketLike = new (url: string, protocols?: string | string[]) => SocketLike;

export type Status = "connecting" | "open" | "reconnecting" | "closed";

/** Close codes after which reconnecting is pointless: `4004`, the user
 * is being erased. */
export const FINAL_CLOSE_CODES: ReadonlySet<number> = new Set([4004]);

export interface ConnectionOptions {
  url: string;
  WebSocket: WebSocketLike;
  reconnect?: { minDelayMs?: number; maxDelayMs?: number };
  pingIntervalMs?: number;
  pongTimeoutMs?: number;
  connectTimeoutMs?: number;
  refreshBeforeMs?: number;
  tokenIn?: "protocol" | "query";
}

export interface ConnectionHandlers {
  /** Runs before each attempt, once the token is at hand: the attempt
   * waits for it, and is not made when it answers false. */
  prepare(): Promise<boolean>;
  status(status: Status): void;
  /** A connection opened. */
  opened(): void;
  /** The open connection ended (or was taken for dead). */
  lost(): void;
  frame(frame: ServerFrame): void;
  /** The server closed the session for good ([`FINAL_CLOSE_CODES`]):
   * the connection is closed and makes no new attempt. */
  ended(code: number, reason: string): void;
}

export class Connection {
  private socket: SocketLike | undefined;
  private readonly liveness: Liveness;
  private readonly onOffline = () => this.dropped(this.socket);
  private readonly onOnline = () => this.cameOnline();
  private attempt = 0;
  private stopped = true;
  private wasOpen = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  private current: Status = "closed";

  constructor(
    private readonly options: ConnectionOptions,
    private readonly tokens: Tokens,
    private readonly handlers: ConnectionHandlers,
  ) {
    this.liveness = new Liveness({
      intervalMs: options.pingIntervalMs ?? 10_000,
      timeoutMs: options.pongTimeoutMs ?? 5_000,
      ping: () => this.write({ type: "ping" }),
      dead: () => this.dropped(this.socket),
    });
  }

  get status(): Status {
    return this.current;
  }

  get isOpen(): boolean {
    return this.socket?.readyState === 1 && this.current === "open";
  }

  connect(): void {
    this.stopped = false;
    browserWindow()?.addEventListener("offline", this.onOffline);
    browserWindow()?.addEventListener("online", this.onOnline);
    void this.open();
  }

  close(): void {
    this.stopped = true;
    browserWindow()?.removeEventListener("offline", this.onOffline);
    browserWindow()?.removeEventListener("online", this.onOnline);
    this.liveness.stop();
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    clearTimeout(this.refreshTimer);
    const socket = this.socket;
    this.socket = undefined;
    socket?.close(1000);
    if (this.wasOpen) {
      this.wasOpen = false;
      this.handlers.lost();
    }
    this.setStatus("closed");
  }

  /** Writes a frame if the connection is open; says whether it did. */
  write(frame: ClientFrame): boolean {
    if (!this.isOpen) return false;
    this.socket!.send(JSON.stringify(frame));
    return true;
  }

  private setStatus(status: Status): void {
    if (this.current === status) return;
    this.current = status;
    this.handlers.status(status);
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    this.setStatus(this.attempt === 0 ? "connecting" : "reconnecting");
    let token: string;
    try {
      token = this.attempt > 0 && this.tokens.refreshable ? await this.tokens.refresh() : await this.tokens.get();
      if (!(await this.handlers.prepare())) throw new Error("not now");
    } catch {
      this.retry();
      return;
    }
    if (this.stopped || this.socket) return;
    const url = new URL("/v1/ws", this.options.url);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    // The token goes as a subprotocol, out of the URL that proxies and
    // access logs keep; the gateway answers with `switchboard.v1`.
    let socket: SocketLike;
    if (this.options.tokenIn === "query") {
      url.searchParams.set("token", token);
      socket = new this.options.WebSocket(url.toString());
    } else {
      socket = new this.options.WebSocket(url.toString(), ["switchboard.v1", `switchboard.token.${token}`]);
    }
    this.socket = socket;
    this.liveness.expect(this.options.connectTimeoutMs ?? 10_000);
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.liveness.heard();
      this.attempt = 0;
      this.wasOpen = true;
      this.setStatus("open");
      this.scheduleRefresh();
      this.handlers.opened();
    };
    socket.onmessage = (event: { data: unknown }) => {
      if (this.socket !== socket) return;
      this.liveness.heard();
      if (typeof event.data !== "string") return;
      let frame: ServerFrame;
      try {
        frame = JSON.parse(event.data) as ServerFrame;
      } catch {
        return;
      }
      this.handlers.frame(frame);
    };
    socket.onclose = (event: { code?: number; reason?: string }) => {
      if (this.socket === socket && event.code !== undefined && FINAL_CLOSE_CODES.has(event.code)) {
        this.close();
        this.handlers.ended(event.code, event.reason ?? "");
        return;
      }
      this.dropped(socket);
    };
    socket.onerror = () => {
      // onclose follows and reconnects.
    };
  }

  /** The connection ended, or is taken for dead (no answer to a ping,
   * not open in time, the browser went offline): it is let go at once,
   * without waiting for a closing handshake a dead peer never answers,
   * and a new one is made. */
  private dropped(socket: SocketLike | undefined): void {
    if (!socket || this.socket !== socket) return;
    this.socket = undefined;
    this.liveness.stop();
    clearTimeout(this.refreshTimer);
    socket.onopen = socket.onmessage = socket.onclose = null;
    // Not null: `ws` throws an error event no listener takes (closing a
    // socket that is still connecting emits one).
    socket.onerror = () => {};
    try {
      if (socket.terminate) socket.terminate();
      else socket.close();
    } catch {
      // Already closed or never opened.
    }
    if (this.wasOpen) {
      this.wasOpen = false;
      this.handlers.lost();
    }
    this.retry();
  }

  private retry(): void {
    if (this.stopped) return;
    this.setStatus("reconnecting");
    const min = this.options.reconnect?.minDelayMs ?? 250;
    const max = this.options.reconnect?.maxDelayMs ?? 10_000;
    const bound = Math.min(max, min * 2 ** this.attempt);
    this.attempt += 1;
    // Full jitter (anywhere from 0 to the bound), so clients a restart
    // dropped together come back apart.
    const wait = Math.random() * bound;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.open();
    }, wait);
  }

  /** The network is back: a reconnect waiting out its back-off goes now. */
  private cameOnline(): void {
    if (this.stopped || this.reconnectTimer === undefined) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    void this.open();
  }

  /** Renews the session's token shortly before it expires. */
  private scheduleRefresh(): void {
    clearTimeout(this.refreshTimer);
    const expires = this.tokens.expiresAt();
    if (expires === undefined || !this.tokens.refreshable) return;
    const before = this.options.refreshBeforeMs ?? 60_000;
    const wait = Math.max(1_000, expires - Date.now() - before);
    this.refreshTimer = setTimeout(async () => {
      try {
        const token = await this.tokens.refresh();
        this.write({ type: "refresh", token });
      } catch {
        // The connection ends at expiry and reconnects with a new token.
      }
      this.scheduleRefresh();
    }, wait);
  }
}

/** The browser's window, for its `online` and `offline` events; none
 * under Node or in a worker without them. */
function browserWindow(): Pick<Window, "addEventListener" | "removeEventListener"> | undefined {
  const w = (globalThis as { window?: Window }).window;
  return typeof w?.addEventListener === "function" ? w : undefined;
}
