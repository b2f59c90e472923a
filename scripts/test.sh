#!/usr/bin/env bash
# Set-up command 2: installs what the tests need and runs the whole suite:
# unit tests, the store conformance suite (on the embedded store and on a
# real Cassandra node), and the integration tests that start real
# nats-server and switchboard processes.
set -euo pipefail
cd "$(dirname "$0")/.."

# The layout rules first (seconds): no non-test file over 700 lines, no
# two modules of a crate that import each other.
python3 scripts/check-layout.py
scripts/install-nats.sh
# The NATS CLI, pinned: the tests run the documented `nats` commands.
scripts/install-nats-cli.sh
# The blob tests run against a real S3-compatible server on loopback.
scripts/install-s3s.sh
# The tests load the example and hostile plugins as built components.
scripts/build-plugins.sh
# The power-loss test runs nats-server on a FUSE file system that forgets
# unsynced writes (tests/lossyfs, Go, pinned in its go.mod).
(cd tests/lossyfs && go build -o ../../.tools/lossyfs .)
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/.venv/bin/nats-server}"
# The integration tests run the binary; build it and the tests first.
cargo build --bin switchboard
cargo test --workspace --no-run "$@"
# The CQL store's tests run on real Apache Cassandra nodes that
# scripts/cassandra.sh fetches with Maven, new for every run in a folder
# of their own. The conformance suite: one node on 127.0.0.1, for the
# workspace's tests but the integration tests, stopped before those.
# The integration tests' CQL fault test then starts three nodes on
# 127.0.0.1/2/3 itself and stops them at its end.
# SWITCHBOARD_TEST_SCYLLA=host:port runs the suite on another node
# instead, and skips the fault test (which needs those addresses).
export SWITCHBOARD_CASSANDRA_DIR="${TMPDIR:-/tmp}/switchboard-cassandra-test"
trap 'scripts/cassandra.sh wipe' EXIT
if [ -z "${SWITCHBOARD_TEST_SCYLLA:-}" ]; then
  export SWITCHBOARD_TEST_CQL_CLUSTER=1
  scripts/cassandra.sh wipe
  scripts/cassandra.sh start 1
  export SWITCHBOARD_TEST_SCYLLA=127.0.0.1:9042
fi
cargo test --workspace --exclude switchboard-tests "$@"
scripts/cassandra.sh wipe
cargo test -p switchboard-tests "$@"
# The TypeScript SDK against a live `switchboard dev` (clients/js/).
scripts/test-js.sh
# The API contract: schemathesis against a live server and the OpenAPI
# document it serves (tests/contract/).
scripts/contract-test.sh
# What deploy/ ships, checked without containers or a cluster
# (scripts/check-deploy.py says what it could not run here).
# The Helm chart too: Helm (pinned, built into .tools) lints and renders
# it, kubernetes-validate (pinned; it carries the API schemas) validates
# what it and kustomize render.
scripts/install-helm.sh
.venv/bin/pip install --quiet --disable-pip-version-check "pyyaml==6.0.3" "kubernetes-validate==1.37.0"
.venv/bin/python scripts/check-deploy.py
