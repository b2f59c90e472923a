#!/usr/bin/env bash
# The TypeScript SDK and the browser client (clients/js, gateway/web):
# installs the toolchain from npm (the versions package-lock.json pins)
# and Debian's chromium when missing, generates the SDK's wire types from
# protocol/schema/, builds it, checks that the bundle the gateway serves
# is this build's, and runs the SDK's tests and the browser tests against
# a real `switchboard dev` (the binary `cargo build --bin switchboard`
# made).
set -euo pipefail
cd "$(dirname "$0")/../clients/js"
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/../../.venv/bin/nats-server}"
npm ci --no-audit --no-fund --loglevel=error
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

npm test

if [ -z "${CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser tests"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
npm run test:browser
