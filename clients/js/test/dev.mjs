// A real `switchboard dev` for the SDK's tests: started on a free port
// with its own data directory (and, if given, its own configuration
// file), killed and restarted, or frozen and thawed, on demand.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { crc32, deflateSync } from "node:zlib";

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

/** The configuration the tests' server runs with: link previews (v1.3)
 * may reach the pages the tests serve on 127.0.0.1 (a private address,
 * refused by default). */
export const TEST_CONFIG = `[previews]
allow_private = ["127.0.0.1/32"]
`;

export class Dev {
  /** `config`: the TOML of its configuration file (`--config`), by
   * default `TEST_CONFIG`. */
  static async start({ config = TEST_CONFIG } = {}) {
    const dev = new Dev(await freePort(), mkdtempSync(join(tmpdir(), "sb-sdk-")), config);
    await dev.run();
    return dev;
  }

  constructor(port, dir, config = "") {
    this.port = port;
    this.dir = dir;
    this.url = `http://127.0.0.1:${port}`;
    this.log = "";
    this.config = undefined;
    if (config) {
      // In the data directory: removed with it by `stop`.
      this.config = join(dir, "switchboard.toml");
      writeFileSync(this.config, config);
    }
  }

  async run() {
    const nats = process.env.SWITCHBOARD_NATS_SERVER ?? join(repo, ".venv/bin/nats-server");
    const args = ["dev", "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dir, "--nats-port", "0"];
    if (this.config) args.push("--config", this.config);
    this.child = spawn(
      binary,
      args,
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

/** A `size`×`size` PNG of one colour (`[r, g, b]`), or of
 * `colour(x, y)` for each pixel. */
export function png(size, colour) {
  const at = typeof colour === "function" ? colour : () => colour;
  const rows = [];
  for (let y = 0; y < size; y++) {
    const row = Buffer.alloc(1 + size * 3);
    for (let x = 0; x < size; x++) row.set(at(x, y), 1 + x * 3);
    rows.push(row);
  }
  const chunk = (type, data) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(rows))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

const escapeHtml = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** A web page for link previews (v1.3) on 127.0.0.1 (which `TEST_CONFIG`
 * lets the server reach): `/article` with Open Graph tags (`title`,
 * `description`, `siteName`, and `og:image` pointing at `/thumb.png`,
 * which serves `image`). `url` is the page's address; `hits` counts the
 * requests per path. */
export async function linkPage({ title, description, siteName, image }) {
  const hits = {};
  const server = createHttpServer((request, response) => {
    const path = new URL(request.url, "http://localhost").pathname;
    hits[path] = (hits[path] ?? 0) + 1;
    if (path === "/thumb.png") {
      response.writeHead(200, { "content-type": "image/png", "content-length": image.length });
      response.end(image);
      return;
    }
    if (path !== "/article") {
      response.writeHead(404).end();
      return;
    }
    const origin = `http://127.0.0.1:${server.address().port}`;
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(`<!doctype html>
<html><head>
<meta charset="utf-8">
<title>${escapeHtml(title)} (page title)</title>
<meta property="og:site_name" content="${escapeHtml(siteName)}">
<meta property="og:title" content="${escapeHtml(title)}">
<meta property="og:description" content="${escapeHtml(description)}">
<meta property="og:image" content="${origin}/thumb.png">
</head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(description)}</p></body></html>`);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/article`,
    hits,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        // The server's fetcher may keep a connection open.
        server.closeAllConnections();
      }),
  };
}
