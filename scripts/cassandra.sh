#!/usr/bin/env bash
# A local Apache Cassandra for the CQL store: its tests, `scripts/dev.sh
# cql`, and the benchmarks. Fetches a pinned Cassandra 5.0 with Maven and
# runs one node, or a cluster of up to three, on loopback (127.0.0.1, .2,
# .3, the same ports on each), every node in a folder of its own with a
# small heap. Nothing is installed by hand and nothing outside the clone's
# .tools/ folder and the nodes' folder is written.
#
#   scripts/cassandra.sh install        fetch Cassandra (idempotent)
#   scripts/cassandra.sh start [N]      start nodes 1..N (default 1) that are
#                                       not running, and wait until each
#                                       answers CQL (N must be the size the
#                                       nodes' folder was first started with)
#   scripts/cassandra.sh start-node I   start node I alone and wait for it
#   scripts/cassandra.sh stop [I]       stop node I, or every node, by its
#                                       process id (TERM, then KILL after 60 s)
#   scripts/cassandra.sh wipe           stop every node and delete its data
#   scripts/cassandra.sh status         which nodes run, with their pids
#   scripts/cassandra.sh nodetool I ... nodetool against node I
#   scripts/cassandra.sh pid I          node I's process id, if it runs
#
# Settings (environment):
#   SWITCHBOARD_CASSANDRA_DIR   the nodes' folder
#                               (default ${TMPDIR:-/tmp}/switchboard-cassandra)
#   SWITCHBOARD_CASSANDRA_HEAP  each node's heap (default 512M)
#   SWITCHBOARD_JAVA17          the Java 17 to run it with (Cassandra 5.0
#                               does not run on newer JDKs; default: the
#                               machine's OpenJDK 17)
#
# Node I listens on 127.0.0.I: CQL on 9042, gossip on 7000, and JMX (for
# nodetool) on 127.0.0.1:7I99. Its folder holds data/, commitlog/, hints/,
# cassandra.yaml, system.log (rolled at 20 MB), stdout.log and pid.
set -euo pipefail
cd "$(dirname "$0")/.."

CASSANDRA_VERSION="5.0.9"
HERE="$PWD/scripts/cassandra"
HOME_DIR="$PWD/.tools/cassandra-$CASSANDRA_VERSION"
LIB="$HOME_DIR/lib"
NODES_DIR="${SWITCHBOARD_CASSANDRA_DIR:-${TMPDIR:-/tmp}/switchboard-cassandra}"
HEAP="${SWITCHBOARD_CASSANDRA_HEAP:-512M}"
MAX_NODES=3
# How long a node may take to answer CQL after it starts: a cold JVM on
# two busy cores takes 20-60 s.
START_TIMEOUT_SECS=240

# Java 17's module flags from Cassandra's conf/jvm17-server.options: the
# node and nodetool both need them.
JPMS_OPTS=(
  -Djdk.attach.allowAttachSelf=true
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
  --add-exports java.sql/java.sql=ALL-UNNAMED
  --add-exports java.base/java.lang.ref=ALL-UNNAMED
  --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
  --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
  --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
  --add-opens java.base/java.lang.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
  --add-opens java.base/jdk.internal.math=ALL-UNNAMED
  --add-opens java.base/jdk.internal.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
)

java17() {
  local candidate
  for candidate in "${SWITCHBOARD_JAVA17:-}" \
      /usr/lib/jvm/java-17-openjdk-amd64/bin/java \
      /usr/lib/jvm/java-17-openjdk-arm64/bin/java \
      /usr/lib/jvm/temurin-17-jdk-amd64/bin/java; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] \
        && "$candidate" -version 2>&1 | grep -q 'version "17\.'; then
      echo "$candidate"
      return
    fi
  done
  echo "cassandra.sh: no Java 17 found (Cassandra 5.0 needs it); set SWITCHBOARD_JAVA17" >&2
  exit 1
}

install() {
  if [ -f "$LIB/cassandra-all-$CASSANDRA_VERSION.jar" ] && [ -f "$HOME_DIR/complete" ]; then
    return
  fi
  echo "installing Cassandra $CASSANDRA_VERSION into $HOME_DIR" >&2
  rm -rf "$HOME_DIR"
  mkdir -p "$LIB"
  # Maven's own output only when it fails.
  if ! mvn -B -q -f "$HERE/pom.xml" -Dcassandra.version="$CASSANDRA_VERSION" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIB" \
      >"$HOME_DIR/maven.log" 2>&1; then
    cat "$HOME_DIR/maven.log" >&2
    echo "cassandra.sh: fetching Cassandra $CASSANDRA_VERSION with Maven failed" >&2
    exit 1
  fi
  touch "$HOME_DIR/complete"
}

check_index() {
  case "$1" in
    [1-9]) [ "$1" -le "$MAX_NODES" ] && return ;;
  esac
  echo "cassandra.sh: node $1 is not one of 1..$MAX_NODES" >&2
  exit 2
}

node_dir() { echo "$NODES_DIR/node$1"; }

# The process id of node $1 when it runs, else nothing.
node_pid() {
  local pidfile
  pidfile="$(node_dir "$1")/pid"
  [ -f "$pidfile" ] || return 0
  local pid
  pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
      && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q CassandraDaemon; then
    echo "$pid"
  fi
}

# One token per node, spread evenly over Murmur3's range, so that every
# node owns a third of it and nodes can start without bootstrapping.
initial_token() {
  case "$1" in
    1) echo "-9223372036854775808" ;;
    2) echo "-3074457345618258603" ;;
    3) echo "3074457345618258602" ;;
  esac
}

write_config() {
  local i="$1" dir
  dir="$(node_dir "$i")"
  mkdir -p "$dir"/{data,commitlog,saved_caches,hints,cdc_raw}
  cat >"$dir/cassandra.yaml" <<EOF
# Written by scripts/cassandra.sh: a test node, not a production one
# (deploy/scylla/README.md says what a production cluster needs).
cluster_name: switchboard-test
num_tokens: 1
initial_token: $(initial_token "$i")
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
# Every node of a new test cluster owns its token from the start.
auto_bootstrap: false
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:7000"
listen_address: 127.0.0.$i
rpc_address: 127.0.0.$i
storage_port: 7000
native_transport_port: 9042
start_native_transport: true
data_file_directories: [$dir/data]
commitlog_directory: $dir/commitlog
saved_caches_directory: $dir/saved_caches
hints_directory: $dir/hints
cdc_raw_directory: $dir/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
# Small machine: fewer threads and smaller caches than the defaults.
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 4
concurrent_compactors: 1
key_cache_size: 8MiB
# A commit is one batch (store-scylla/src/commit.rs): Cassandra's default
# limit (50KiB) refuses those of large groups. ScyllaDB's default.
batch_size_fail_threshold: 1024KiB
batch_size_warn_threshold: 256KiB
# A logged batch (the gateways' marks; a writer's commits go unlogged)
# first writes its batch log to two other nodes, by default chosen at
# random among the remote ones: with three nodes, always both others, so
# one stopped node holds such batches up until gossip convicts it.
# "dynamic" may use the coordinator itself and ranks nodes by latency.
batchlog_endpoint_strategy: dynamic
# Test keyspaces come and go by the hundred: no snapshot of each dropped one.
auto_snapshot: false
EOF
}

wait_for_cql() {
  local i="$1" pid="$2" deadline=$((SECONDS + START_TIMEOUT_SECS))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "cassandra.sh: node $i exited during start-up; the end of its log:" >&2
      tail -n 40 "$(node_dir "$i")/system.log" "$(node_dir "$i")/stdout.log" >&2 || true
      exit 1
    fi
    if cql_answers "127.0.0.$i"; then
      return
    fi
    sleep 1
  done
  echo "cassandra.sh: node $i did not answer CQL within ${START_TIMEOUT_SECS} s" >&2
  exit 1
}

# True when the CQL server at $1:9042 answers an OPTIONS request with
# SUPPORTED (protocol v4 framing): the port alone opens before the node
# serves.
cql_answers() {
  python3 - "$1" <<'EOF'
import socket, struct, sys
try:
    with socket.create_connection((sys.argv[1], 9042), timeout=2) as s:
        s.sendall(struct.pack(">BBhBI", 4, 0, 0, 5, 0))
        header = s.recv(9)
        sys.exit(0 if len(header) == 9 and header[4] == 6 else 1)
except OSError:
    sys.exit(1)
EOF
}

launch() {
  local i="$1" dir java
  check_index "$i"
  if [ -n "$(node_pid "$i")" ]; then
    return
  fi
  if cql_answers "127.0.0.$i"; then
    echo "cassandra.sh: something else already answers CQL on 127.0.0.$i:9042 (a node of" \
      "another folder?); stop it first" >&2
    exit 1
  fi
  install
  java="$(java17)"
  dir="$(node_dir "$i")"
  write_config "$i"
  echo "starting Cassandra node $i on 127.0.0.$i (folder $dir)" >&2
  # The flags of Cassandra's conf/jvm-server.options and
  # conf/jvm17-server.options that matter here, then the node's own.
  local opts=(
    -ea -da:net.openhft...
    -XX:+UseThreadPriorities -XX:+HeapDumpOnOutOfMemoryError -Xss256k
    -XX:+UseTLAB -XX:+ResizeTLAB -XX:+PerfDisableSharedMem
    -Djava.net.preferIPv4Stack=true
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
    -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300
    -XX:InitiatingHeapOccupancyPercent=70
    "${JPMS_OPTS[@]}"
    -Dio.netty.tryReflectionSetAccessible=true
    -Dio.netty.allocator.useCacheForAllThreads=true
    -Dio.netty.allocator.maxOrder=11
    "-Xms$HEAP" "-Xmx$HEAP"
    "-Dcassandra.config=file://$dir/cassandra.yaml"
    "-Dcassandra.logdir=$dir"
    "-Dcassandra.storagedir=$dir"
    "-Dlogback.configurationFile=$HERE/logback.xml"
    "-Dcassandra.jmx.local.port=7${i}99"
    -Dcassandra-foreground=yes
    # A test cluster starts in seconds, not in the half minute gossip is
    # given to settle on a real one.
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    -Dcassandra.ring_delay_ms=1000
    -Dcassandra.superuser_setup_delay_ms=0
  )
  rm -f "$dir/pid"
  # setsid: the node outlives this script and the shell that ran it, and
  # a test's process group signal does not reach it.
  setsid "$java" "${opts[@]}" -cp "$LIB/*" org.apache.cassandra.service.CassandraDaemon \
    >"$dir/stdout.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  wait_for_cql "$i" "$pid"
  echo "Cassandra node $i answers CQL on 127.0.0.$i:9042 (pid $pid)" >&2
}

stop_node() {
  local i="$1" pid
  pid="$(node_pid "$i")"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.2
  done
  rm -f "$(node_dir "$i")/pid"
  echo "stopped Cassandra node $i (pid $pid)" >&2
}

command="${1:-}"
shift || true
case "$command" in
  install)
    install
    ;;
  start)
    count="${1:-1}"
    check_index "$count"
    # The nodes know each other from their first start: node 1 started
    # alone on the data of a three-node cluster waits for two peers that
    # never come (and logs it millions of times).
    size_file="$NODES_DIR/cluster-size"
    if [ -f "$size_file" ] && [ "$(cat "$size_file")" != "$count" ]; then
      echo "cassandra.sh: $NODES_DIR holds a cluster of $(cat "$size_file") node(s), not $count:" \
        "run \`scripts/cassandra.sh wipe\` first (it deletes their data)" >&2
      exit 1
    fi
    mkdir -p "$NODES_DIR"
    echo "$count" >"$size_file"
    # The seed (node 1) first: the others gossip with it as they start.
    for ((i = 1; i <= count; i++)); do launch "$i"; done
    ;;
  start-node)
    launch "${1:?node index}"
    ;;
  stop)
    if [ -n "${1:-}" ]; then
      check_index "$1"
      stop_node "$1"
    else
      for ((i = 1; i <= MAX_NODES; i++)); do stop_node "$i"; done
    fi
    ;;
  wipe)
    for ((i = 1; i <= MAX_NODES; i++)); do stop_node "$i"; done
    rm -rf "$NODES_DIR"
    ;;
  status)
    for ((i = 1; i <= MAX_NODES; i++)); do
      pid="$(node_pid "$i")"
      if [ -n "$pid" ]; then
        echo "node $i (127.0.0.$i): running, pid $pid"
      else
        echo "node $i (127.0.0.$i): stopped"
      fi
    done
    ;;
  pid)
    check_index "${1:?node index}"
    node_pid "$1"
    ;;
  nodetool)
    i="${1:?node index}"
    check_index "$i"
    shift
    install
    exec "$(java17)" "${JPMS_OPTS[@]}" -cp "$LIB/*" -Dlogback.configurationFile="$HERE/logback.xml" \
      -Dcassandra.logdir="$(node_dir "$i")" \
      org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "7${i}99" "$@"
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
