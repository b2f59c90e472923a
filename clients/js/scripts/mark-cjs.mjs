// dist/cjs holds the CommonJS build (tsc -p tsconfig.cjs.json); the package
// is "type": "module", so this folder says otherwise for Node and for
// TypeScript, which then read its .js and .d.ts files as CommonJS.
import { writeFile } from "node:fs/promises";

await writeFile(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
