#!/usr/bin/env bash
# The TypeScript SDK and the browser client (clients/js, gateway/web):
# installs the toolchain from npm (the versions package-lock.json pins)
# and Debian's chromium when missing, checks that the SDK's committed
# generated types are what protocol/schema/ and gateway/openapi.json
# generate, builds it, checks that the bundle the gateway serves is this
# build's, compiles the README's examples against the build, packs the
# package and installs the tarball into a scratch project (import and
# require), and runs the SDK's tests and the browser tests against a real
# `switchboard dev` (the binary `cargo build --bin switchboard` made).
set -euo pipefail
cd "$(dirname "$0")/../clients/js"
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/../../.venv/bin/nats-server}"
npm ci --no-audit --no-fund --loglevel=error
# src/protocol.ts and src/openapi.ts are committed (the package builds
# from its own folder): they must be what the documents generate now.
node scripts/generate-types.mjs --check
npm run --silent build

# The browser client's copy of the SDK (gateway/web/switchboard.js) must
# be what this source bundles to: `npm run bundle` rewrites it.
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
npx --no-install esbuild src/index.ts --bundle --format=esm --target=es2020 --legal-comments=none \
  --banner:js='// The Switchboard SDK (clients/js), bundled for the browser client by `npm run bundle`. Do not edit.' \
  --outfile="$fresh/switchboard.js" --log-level=warning
if ! cmp -s "$fresh/switchboard.js" ../../gateway/web/switchboard.js; then
  echo "gateway/web/switchboard.js is not this SDK's bundle: run (cd clients/js && npm run bundle)" >&2
  exit 1
fi

npm run --silent test:types

# The package as an app gets it: `npm pack` (its prepack builds), the
# tarball installed into a scratch project, imported from ESM and
# required from CommonJS.
npm pack --silent --pack-destination "$fresh" >/dev/null
app="$fresh/app"
mkdir "$app"
echo '{ "name": "sb-pack-check", "private": true }' >"$app/package.json"
(cd "$app" && npm install --no-audit --no-fund --loglevel=error "$fresh"/switchboard-client-*.tgz)
(cd "$app" && node --input-type=module -e '
  import { SwitchboardClient, Rest, SendError } from "@switchboard/client";
  if (typeof SwitchboardClient !== "function" || typeof Rest !== "function" || typeof SendError !== "function") process.exit(1);')
(cd "$app" && node -e '
  const { SwitchboardClient, ConversationState } = require("@switchboard/client");
  if (typeof SwitchboardClient !== "function" || typeof ConversationState !== "function") process.exit(1);')
for f in dist/index.d.ts dist/cjs/index.d.ts dist/cjs/package.json README.md; do
  [ -e "$app/node_modules/@switchboard/client/$f" ] || { echo "the packed package lacks $f" >&2; exit 1; }
done

npm test

# The browser tests draw reactions: without a colour emoji font the
# screenshots in docs/screenshots show empty boxes.
missing=()
if [ -z "${CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ]; then missing+=(chromium); fi
if ! dpkg -s fonts-noto-color-emoji >/dev/null 2>&1; then missing+=(fonts-noto-color-emoji); fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing Debian's ${missing[*]} for the browser tests"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
npm run test:browser
