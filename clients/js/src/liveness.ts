// Whether a WebSocket connection still lives, seen from the client.
//
// The protocol's only application-level heartbeat is the client's `ping`,
// which the server answers with `pong` (docs/protocol.md); WebSocket ping
// frames are invisible to browser JavaScript. So the client watches what
// arrives: after `intervalMs` of silence it pings, and when nothing at all
// (the `pong` or any other frame) arrives within `timeoutMs` after that,
// the connection is dead: a frozen server or a dropped network path
// leaves a socket that reports itself open for minutes.

type Timer = ReturnType<typeof setTimeout>;

export interface LivenessOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Writes a `ping`. */
  ping: () => void;
  /** The deadline passed with nothing heard. */
  dead: () => void;
}

export class Liveness {
  private idle: Timer | undefined;
  private deadline: Timer | undefined;

  constructor(private readonly options: LivenessOptions) {}

  /** Gives a connection being opened `ms` to open. */
  expect(ms: number): void {
    this.stop();
    this.deadline = unref(setTimeout(() => this.expire(), ms));
  }

  /** Something arrived: the connection lives, and the next ping waits for
   * a full interval of silence again. */
  heard(): void {
    this.stop();
    this.idle = unref(setTimeout(() => this.probe(), this.options.intervalMs));
  }

  stop(): void {
    clearTimeout(this.idle);
    clearTimeout(this.deadline);
    this.idle = undefined;
    this.deadline = undefined;
  }

  private probe(): void {
    this.idle = undefined;
    this.options.ping();
    this.deadline = unref(setTimeout(() => this.expire(), this.options.timeoutMs));
  }

  private expire(): void {
    this.stop();
    this.options.dead();
  }
}

/** Under Node, these timers alone do not keep the process alive (the
 * socket they watch does). */
function unref(timer: Timer): Timer {
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
