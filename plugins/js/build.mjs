// Builds a JavaScript plugin into a component:
//   node build.mjs <source.js> <world> <out.wasm>
// `world` is the hook's world in wit/: moderator, edit-policy-plugin or
// fan-out-plugin. The component embeds the StarlingMonkey engine with the
// source evaluated ahead of time (a Wizer snapshot).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { componentize } from '@bytecodealliance/componentize-js';

const [source, worldName, out] = process.argv.slice(2);
if (!source || !worldName || !out) {
  console.error('usage: node build.mjs <source.js> <world> <out.wasm>');
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const { component } = await componentize(await readFile(resolve(source), 'utf8'), {
  witPath: resolve(here, 'wit'),
  worldName,
});
await mkdir(dirname(resolve(out)), { recursive: true });
await writeFile(resolve(out), component);
console.log(`${out}: ${component.length} bytes`);
