// The TypeScript declarations of the plugin worlds' JavaScript bindings,
// generated from the WIT (wit/plugin.wit) by jco, as ComponentizeJS maps
// WIT types to JavaScript values:
//   node types.mjs           writes types/<world>/ for every hook's world
//   node types.mjs --check   exits 1 when the files in types/ are not
//                            exactly what the WIT and the locked jco give
// Editors and `npm run typecheck` (jsconfig.json) read them.
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { generateGuestTypes } from '@bytecodealliance/jco-transpile';

const WORLDS = ['moderator', 'edit-policy-plugin', 'fan-out-plugin'];
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'types');
const check = process.argv.includes('--check');

// jco reads the WIT through its WASI shim, which (since preview2-shim
// 0.26) preopens no directory by default: preopen the WIT's own folder in
// the very shim instance jco-transpile uses.
const wit = resolve(here, 'wit');
const transpile = createRequire(fileURLToPath(import.meta.resolve('@bytecodealliance/jco-transpile')));
const { _setPreopens } = await import(
  pathToFileURL(transpile.resolve('@bytecodealliance/preview2-shim/filesystem')).href
);
_setPreopens({ [wit]: wit });

const wanted = new Map();
for (const world of WORLDS) {
  const files = await generateGuestTypes(join(wit, 'plugin.wit'), { worldName: world, outDir: `${world}/` });
  for (const [path, bytes] of Object.entries(files)) {
    wanted.set(path, Buffer.from(bytes).toString('utf8'));
  }
}

async function present(dir) {
  const found = new Map();
  let entries = [];
  try {
    entries = await readdir(dir, { recursive: true, withFileTypes: true });
  } catch {
    return found;
  }
  for (const e of entries) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath ?? e.path, e.name);
    found.set(relative(dir, path), await readFile(path, 'utf8'));
  }
  return found;
}

if (check) {
  const found = await present(out);
  const drift = [...new Set([...wanted.keys(), ...found.keys()])]
    .filter((path) => wanted.get(path) !== found.get(path))
    .sort();
  if (drift.length > 0) {
    console.error(`types/ does not match the WIT (${drift.join(', ')}): run \`npm run types\``);
    process.exit(1);
  }
  console.log(`types/ matches the WIT (${wanted.size} files)`);
} else {
  await rm(out, { recursive: true, force: true });
  for (const [path, text] of wanted) {
    await mkdir(dirname(join(out, path)), { recursive: true });
    await writeFile(join(out, path), text);
  }
  console.log(`types/: ${wanted.size} files`);
}
