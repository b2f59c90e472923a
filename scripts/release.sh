#!/usr/bin/env bash
# Builds the release binary to ship: optimised, stripped, with its debug
# information split off into a file of its own (for symbolising crash
# reports and profiles later, matched by the binary's GNU debuglink).
#
#   scripts/release.sh [OUT_DIR]     (default: dist/)
#
# Leaves OUT_DIR/switchboard (stripped) and OUT_DIR/switchboard.debug, and
# prints both sizes. Needs binutils' objcopy (apt-get install binutils).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
mkdir -p "$out"
cargo build --release --locked --bin switchboard
target="${CARGO_TARGET_DIR:-target}/release/switchboard"
cp "$target" "$out/switchboard"
objcopy --only-keep-debug "$out/switchboard" "$out/switchboard.debug"
objcopy --strip-all --add-gnu-debuglink="$out/switchboard.debug" "$out/switchboard"
chmod 0755 "$out/switchboard"
size() { du -h "$1" | cut -f1; }
echo "release: $out/switchboard $(size "$out/switchboard") (stripped), $out/switchboard.debug $(size "$out/switchboard.debug") (debug info)"
