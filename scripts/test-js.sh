#!/usr/bin/env bash
# The TypeScript SDK (clients/js): installs its toolchain from npm (the
# versions package-lock.json pins), generates its wire types from
# protocol/schema/, builds it, and runs its tests against a real
# `switchboard dev` (the binary `cargo build --bin switchboard` made).
set -euo pipefail
cd "$(dirname "$0")/../clients/js"
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/../../.venv/bin/nats-server}"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
npm test
