#!/usr/bin/env bash
# Installs the NATS CLI (`nats`), pinned, into ./.tools: the tests run the
# documented operator commands with it, as operators type them. Built by
# `go install` from the Go module proxy (about a minute on two cores the
# first time). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

NATS_CLI_VERSION="v0.5.0"
if [ -x .tools/nats ] && .tools/nats --version 2>&1 | grep -qx "${NATS_CLI_VERSION}"; then
  exit 0
fi
echo "installing the NATS CLI ${NATS_CLI_VERSION} into .tools" >&2
mkdir -p .tools
GOBIN="$PWD/.tools" go install "github.com/nats-io/natscli/nats@${NATS_CLI_VERSION}"
.tools/nats --version >&2
