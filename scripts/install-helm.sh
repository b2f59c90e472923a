#!/usr/bin/env bash
# Installs Helm, pinned, into ./.tools: scripts/check-helm.sh lints and
# renders the chart (deploy/helm/switchboard) with it. Built by `go
# install` from the Go module proxy (a few minutes on two cores the
# first time). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION="v3.22.0"
if [ -x .tools/helm ] && .tools/helm version --template '{{.Version}}' 2>/dev/null | grep -qx "${HELM_VERSION}"; then
  exit 0
fi
echo "installing Helm ${HELM_VERSION} into .tools" >&2
mkdir -p .tools
# The version the binary reports is set at link time, as Helm's own
# release build does.
GOBIN="$PWD/.tools" go install \
  -ldflags "-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
  "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
.tools/helm version --template '{{.Version}}' >&2
echo >&2
