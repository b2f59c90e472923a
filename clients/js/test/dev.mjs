// A real `switchboard dev` for the SDK's tests: started on a free port
// with its own data directory, killed and restarted, or frozen and
// thawed, on demand.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(fileURLToPath(new URL("../../..", import.meta.url)));

/** The switchboard binary: SWITCHBOARD_BIN, else the cargo build's. */
export const binary =
  process.env.SWITCHBOARD_BIN ??
  join(process.env.CARGO_TARGET_DIR ?? join(repo, "target"), "debug", "switchboard");

/** A token for the dev `demo` tenant. */
export function token(user, device = "web", ttl = 3600) {
  return execFileSync(binary, ["token", "--user", user, "--device", device, "--ttl", String(ttl)], {
    encoding: "utf8",
  }).trim();
}

/** A bot user's token (`"bot": true`) of the `demo` tenant. */
export function botToken(user) {
  return execFileSync(binary, ["token", "--user", user, "--bot", "--ttl", "3600"], { encoding: "utf8" }).trim();
}

/** A token of the `demo` tenant's admin role. */
export function adminToken(user = "admin") {
  return execFileSync(binary, ["token", "--user", user, "--admin", "--ttl", "3600"], { encoding: "utf8" }).trim();
}

async function freePort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => ok(port));
    });
    server.on("error", fail);
  });
}

export class Dev {
  static async start() {
    const dev = new Dev(await freePort(), mkdtempSync(join(tmpdir(), "sb-sdk-")));
    await dev.run();
    return dev;
  }

  constructor(port, dir) {
    this.port = port;
    this.dir = dir;
    this.url = `http://127.0.0.1:${port}`;
    this.log = "";
  }

  async run() {
    const nats = process.env.SWITCHBOARD_NATS_SERVER ?? join(repo, ".venv/bin/nats-server");
    this.child = spawn(
      binary,
      ["dev", "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dir, "--nats-port", "0"],
      { env: { ...process.env, SWITCHBOARD_NATS_SERVER: nats, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    const keep = (chunk) => {
      this.log = (this.log + chunk).slice(-20_000);
    };
    this.child.stdout.on("data", keep);
    this.child.stderr.on("data", keep);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`switchboard dev exited:\n${this.log}`);
      try {
        const r = await fetch(`${this.url}/readyz`);
        if (r.ok) return;
      } catch {}
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`switchboard dev did not get ready:\n${this.log}`);
  }

  /** The switchboard process's id (the gateway runs in it). */
  get pid() {
    return this.child.pid;
  }

  /** SIGSTOP: the process holds its sockets open and answers nothing, as
   * a hung server or a dead network path does. */
  freeze() {
    process.kill(this.child.pid, "SIGSTOP");
    this.frozen = true;
  }

  /** SIGCONT: it runs on from where it stopped. */
  thaw() {
    process.kill(this.child.pid, "SIGCONT");
    this.frozen = false;
  }

  /** SIGKILL: no drain, no goodbye. */
  async kill() {
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.kill("SIGKILL");
    await exited;
  }

  async stop() {
    if (this.frozen) this.thaw();
    if (this.child && this.child.exitCode === null) {
      // Stopped as an operator would, so that it stops its nats-server
      // too (a killed one leaves it writing into the folder); killed if
      // it takes more than 5 s.
      const exited = new Promise((r) => this.child.once("exit", r));
      this.child.kill("SIGTERM");
      const late = setTimeout(() => this.child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(late);
    }
    // Its nats-server may write its last files while it goes: retried.
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 50, retryDelay: 100 });
  }
}

/** Resolves with the first event `event` of `client` that `pick` turns
 * into something other than undefined; fails after `ms`. */
export function waitFor(client, event, pick = (v) => v, ms = 15_000) {
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => {
      off();
      fail(new Error(`no ${event} within ${ms} ms`));
    }, ms);
    const off = client.on(event, (value) => {
      const got = pick(value);
      if (got !== undefined && got !== false) {
        clearTimeout(timer);
        off();
        ok(got);
      }
    });
  });
}

/** Waits until `condition()` holds; fails after `ms`. */
export async function until(condition, ms = 15_000, what = "the condition") {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
