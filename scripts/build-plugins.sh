#!/usr/bin/env bash
# Builds the example and hostile plugins in plugins/ for wasm32-wasip2 and
# copies the components to plugins/dist/<name>.wasm, where the tests and
# the plugin guide expect them; and the JavaScript ones (plugins/js) to
# plugins/dist/js-<name>.wasm. Installs the Rust target and the npm
# packages if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
# The plugins are their own workspace with their own target directory
# (under the shared one when CI sets it), never the host's.
target="${CARGO_TARGET_DIR:-$PWD/target}/plugins"
# One plugin at a time: each enables the SDK feature of its own hook,
# and one build of several would unify them.
for manifest in plugins/*/Cargo.toml plugins/hostile/*/Cargo.toml; do
  crate="$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -1)"
  grep -q 'crate-type = \["cdylib"\]' "$manifest" || continue
  cargo build --quiet --release --target wasm32-wasip2 \
    --manifest-path plugins/Cargo.toml --target-dir "$target" -p "$crate"
  mkdir -p plugins/dist
  cp "$target/wasm32-wasip2/release/${crate//-/_}.wasm" "plugins/dist/$crate.wasm"
done
# The JavaScript plugins (plugins/js): ComponentizeJS from npm, the
# versions package-lock.json pins, installed again only when it changes.
if [ ! -f plugins/js/node_modules/.switchboard-lock ] ||
   ! cmp -s plugins/js/package-lock.json plugins/js/node_modules/.switchboard-lock; then
  (cd plugins/js && npm ci --no-audit --no-fund --silent)
  cp plugins/js/package-lock.json plugins/js/node_modules/.switchboard-lock
fi
# The TypeScript declarations of the worlds must be what jco makes of the
# WIT, and the word-list must type-check against them.
(cd plugins/js && node types.mjs --check >&2 && npx --no-install tsc -p jsconfig.json)
for source in word-list probe; do
  node plugins/js/build.mjs "plugins/js/$source.js" moderator "plugins/dist/js-$source.wasm" >&2
done
ls plugins/dist >&2
