#!/usr/bin/env bash
# Installs s3s-fs 0.14.1, the S3-compatible server the blob tests start on
# loopback (newer versions need a newer Rust). Idempotent.
set -euo pipefail

VERSION="0.14.1"
BIN="${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs"
if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "$VERSION"; then
  exit 0
fi
echo "installing s3s-fs ${VERSION}" >&2
# Its own target directory: a shared one would be locked by the main build.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${TMPDIR:-/tmp}/s3s-fs-build}/s3s-fs" \
  cargo install --quiet --locked s3s-fs --version "$VERSION" --features binary
