#!/usr/bin/env bash
# The API contract test: starts `switchboard dev` (the debug build that
# scripts/test.sh made) on a free loopback port with an operator token,
# and runs schemathesis against the OpenAPI document it serves. Fails on
# any failure schemathesis reports. Bounded: a fixed number of examples
# per operation and a time limit.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION="4.32.5"
if ! .venv/bin/schemathesis --version 2>/dev/null | grep -q "${SCHEMATHESIS_VERSION}"; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "schemathesis==${SCHEMATHESIS_VERSION}"
fi
export SWITCHBOARD_NATS_SERVER="${SWITCHBOARD_NATS_SERVER:-$PWD/.venv/bin/nats-server}"
BIN="${CARGO_TARGET_DIR:-target}/debug/switchboard"
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
OPERATOR="contract-test-operator-token"
# The per-user REST rate is lifted so that the run reaches every
# operation's logic instead of 429s (the rate has tests of its own).
cat > "$WORK/config.toml" <<TOML
operator_token = "$OPERATOR"
[limits]
rest_requests_per_second = 100000.0
rest_request_burst = 100000.0
uploads_per_minute = 100000.0
members_added_per_minute = 1000000.0
plugin_replays_per_minute = 1000000.0
reports_per_minute = 1000000.0
profile_updates_per_minute = 1000000.0
exports_per_hour = 1000000.0
operator_failures_per_minute = 1000000
TOML
"$BIN" dev --config "$WORK/config.toml" --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" \
  --nats-port 0 --log warn > "$WORK/dev.log" 2>&1 &
DEV=$!
trap 'kill $DEV 2>/dev/null || true; wait $DEV 2>/dev/null || true; rm -rf "$WORK"' EXIT
python3 - "$PORT" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=1)
        break
    except Exception:
        time.sleep(0.2)
else:
    sys.exit("switchboard dev did not become ready")
PY
TOKEN=$("$BIN" token --user contract-alice --admin)
cd tests/contract
# The operator API takes the operator token, everything else a tenant's.
timeout 900 ../../.venv/bin/schemathesis run "http://127.0.0.1:$PORT/v1/openapi.json" \
  --header "Authorization: Bearer $TOKEN" \
  --exclude-path-regex '^/v1/(ws|operator/)' \
  --max-examples 40 --seed 1 --workers 1 --no-color
timeout 600 ../../.venv/bin/schemathesis run "http://127.0.0.1:$PORT/v1/openapi.json" \
  --header "Authorization: Bearer $OPERATOR" \
  --include-path-regex '^/v1/operator/' \
  --max-examples 40 --seed 1 --workers 1 --no-color
