// The README's TypeScript examples compile against the built package, as
// an app that installed it would compile them: each ```ts block becomes a
// module of a scratch project whose node_modules holds this package (by
// its `exports`, ESM and CommonJS) beside `ws` and the type packages.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(fileURLToPath(new URL("..", import.meta.url)));

test("the README's TypeScript examples compile against the build, Node 20 with ws included", () => {
  const readme = readFileSync(join(pkg, "README.md"), "utf8");
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.length >= 2, "the README has its examples");
  assert.ok(
    blocks.some((b) => b.includes('from "ws"') && /new SwitchboardClient\(\{[^}]*WebSocket/.test(b)),
    "one of them is the Node 20 pattern with ws",
  );

  const dir = mkdtempSync(join(tmpdir(), "sb-readme-"));
  try {
    mkdirSync(join(dir, "node_modules", "@switchboard"), { recursive: true });
    symlinkSync(pkg, join(dir, "node_modules", "@switchboard", "client"), "dir");
    symlinkSync(join(pkg, "node_modules", "ws"), join(dir, "node_modules", "ws"), "dir");
    symlinkSync(join(pkg, "node_modules", "@types"), join(dir, "node_modules", "@types"), "dir");
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    const files = blocks.map((block, i) => {
      const name = `example${i + 1}.ts`;
      writeFileSync(join(dir, name), block);
      return name;
    });
    // And a CommonJS app: `require` resolves to the CommonJS build's types.
    writeFileSync(
      join(dir, "commonjs.cts"),
      'import { SwitchboardClient, type UploadGrant } from "@switchboard/client";\n' +
        "import WebSocket = require(\"ws\");\n" +
        'const client = new SwitchboardClient({ url: "http://127.0.0.1:8080", token: "t", WebSocket });\n' +
        "export const methodOf = (grant: UploadGrant): \"PUT\" => grant.method;\n" +
        "client.close();\n",
    );
    files.push("commonjs.cts");
    // As a browser app (the DOM library) and as a Node 20 one (Node's
    // globals only) would compile them.
    for (const lib of [["ES2022", "DOM"], ["ES2022"]]) {
      writeFileSync(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            lib,
            types: ["node"],
            strict: true,
            noEmit: true,
            moduleDetection: "force",
            esModuleInterop: true,
          },
          files,
        }),
      );
      try {
        execFileSync(process.execPath, [join(pkg, "node_modules", "typescript", "bin", "tsc"), "-p", dir], {
          encoding: "utf8",
          stdio: "pipe",
        });
      } catch (error) {
        assert.fail(`tsc (lib ${lib}) failed on the README's examples:\n${error.stdout}${error.stderr}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
