#!/usr/bin/env bash
# What a message costs on each store: the load generator's 1:1 chat on
# the embedded store, then on one Cassandra node, then on three (replication
# factor 3, QUORUM), at each rate, one run after the other on this machine.
#
#   scripts/bench-stores.sh            # rates 1000 5000 10000, 20 s each
#   RATES="1000" DURATION=10 STORES="cql1" scripts/bench-stores.sh
#
# Each run starts `switchboard dev` afresh (a new data folder; on CQL a new
# keyspace), waits until it is ready, runs `switchboard bench chat` with
# the dev process, its nats-server and every Cassandra node as server
# processes (so the CPU per message is split by process), and on CQL adds
# the rows Cassandra wrote per acked message (`nodetool tablestats`,
# divided by the replication factor) and the fence's lightweight
# transactions. Everything it prints goes to $OUT/<store>-<rate>.txt too.
# The Cassandra nodes are its own (SWITCHBOARD_CASSANDRA_DIR below), wiped
# at the end. Needs the release build (scripts/dev.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${CARGO_TARGET_DIR:-target}/release/switchboard"
RATES="${RATES:-1000 5000 10000}"
DURATION="${DURATION:-20}"
STORES="${STORES:-embedded cql1 cql3}"
OUT="${OUT:-${TMPDIR:-/tmp}/switchboard-bench-stores}"
PORT=18090
export SWITCHBOARD_CASSANDRA_DIR="${TMPDIR:-/tmp}/switchboard-cassandra-bench"
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/.venv/bin/nats-server}"

[ -x "$BIN" ] || { echo "bench-stores.sh: no release build at $BIN" >&2; exit 1; }
mkdir -p "$OUT"
dev_pid=""
cleanup() {
  [ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null && wait "$dev_pid" 2>/dev/null
  scripts/cassandra.sh wipe >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Rows written on every node to a keyspace, or to one table of it
# ("keyspace.table"): the sum of the tables' "Local write count".
local_writes() {
  local what="$1" nodes="$2" total=0 i n
  for i in $(seq 1 "$nodes"); do
    n=$(scripts/cassandra.sh nodetool "$i" tablestats "$what" 2>/dev/null |
      awk -F': ' '/Local write count/ {s += $2} END {print s + 0}')
    total=$((total + n))
  done
  echo "$total"
}

for store in $STORES; do
  nodes=0
  case "$store" in
    embedded) ;;
    cql1) nodes=1 ;;
    cql3) nodes=3 ;;
    *) echo "bench-stores.sh: unknown store $store" >&2; exit 2 ;;
  esac
  if [ "$nodes" -gt 0 ]; then
    scripts/cassandra.sh wipe >/dev/null
    scripts/cassandra.sh start "$nodes"
  fi
  for rate in $RATES; do
    data="$(mktemp -d)"
    keyspace="sb_bench_${store}_${rate}"
    config="$data/bench.toml"
    {
      echo "[limits]"
      echo "max_connections_per_ip = 5000"
      if [ "$nodes" -gt 0 ]; then
        echo "[scylla]"
        printf 'nodes = [%s]\n' "$(for i in $(seq 1 "$nodes"); do printf '"127.0.0.%s:9042",' "$i"; done | sed 's/,$//')"
        echo "keyspace = \"$keyspace\""
        echo "consistency = \"quorum\""
        echo "replication = { strategy = \"simple\", factor = $nodes }"
      fi
    } >"$config"
    store_args=()
    [ "$nodes" -gt 0 ] && store_args=(--store scylla)
    "$BIN" dev --data-dir "$data/dev" --listen "127.0.0.1:$PORT" --config "$config" \
      "${store_args[@]}" >"$OUT/$store-$rate.dev.log" 2>&1 &
    dev_pid=$!
    for _ in $(seq 1 240); do
      curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
      sleep 0.5
    done
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null || {
      echo "bench-stores.sh: switchboard dev did not get ready; see $OUT/$store-$rate.dev.log" >&2
      exit 1
    }
    pids=(--server-pid "$dev_pid")
    for i in $(seq 1 "$nodes"); do
      pids+=(--server-pid "$(scripts/cassandra.sh pid "$i")")
    done
    writes_before=0 fences_before=0
    if [ "$nodes" -gt 0 ]; then
      writes_before=$(local_writes "$keyspace" "$nodes")
      fences_before=$(local_writes "$keyspace.writer_fences" "$nodes")
    fi
    {
      echo "== $store, $rate msg/s, $DURATION s"
      "$BIN" bench chat --url "http://127.0.0.1:$PORT" --users 200 --rate "$rate" \
        --duration "$DURATION" --size 64 --with-children "${pids[@]}" \
        --nats-url nats://127.0.0.1:4222
    } | tee "$OUT/$store-$rate.txt"
    if [ "$nodes" -gt 0 ]; then
      # Memtables count writes as they apply: give stragglers a moment.
      sleep 2
      acked=$(awk '/^  acked/ {print $2; exit}' "$OUT/$store-$rate.txt")
      writes=$(( $(local_writes "$keyspace" "$nodes") - writes_before ))
      fences=$(( $(local_writes "$keyspace.writer_fences" "$nodes") - fences_before ))
      awk -v w="$writes" -v f="$fences" -v n="$nodes" -v a="${acked:-0}" 'BEGIN {
        if (a == 0) a = 1
        printf "  CQL rows         %.1f written per acked message (%d over %d replicas), %.3f fence decisions per message\n", w / n / a, w, n, f / n / a
      }' | tee -a "$OUT/$store-$rate.txt"
    fi
    kill "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
    dev_pid=""
    rm -rf "$data"
  done
  [ "$nodes" -gt 0 ] && scripts/cassandra.sh wipe >/dev/null
done
echo "bench-stores.sh: results in $OUT"
