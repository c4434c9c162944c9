#!/usr/bin/env bash
# Builds the Kubernetes backend's exec wrapper (cmd/sandboxio-k8s-wrap,
# static, CGO_ENABLED=0) into a one-file image and imports it into the test
# cluster's containerd, with no registry. Idempotent; run after k8s-up.sh.
set -euo pipefail
# shellcheck source=scripts/k8s-lib.sh
. "$(dirname "$0")/k8s-lib.sh"
# shellcheck source=scripts/k8s-config.sh
. "$(dirname "$0")/k8s-config.sh"

K8S_WRAP_IMAGE=sandboxio.local/sandboxio-wrap:2
root=$(mktemp -d "$K8S_RUN/images/wrap.XXXXXX")
trap 'rm -rf "$root"' EXIT
(cd "$K8S_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$root/rootfs/wrap" ./cmd/sandboxio-k8s-wrap)
mkimage "$K8S_WRAP_IMAGE" "$root/rootfs" '{"Entrypoint":["/wrap"]}' "$K8S_RUN/images/wrap.tar"
ctr --address "$K8S_CTR_SOCK" -n k8s.io images import "$K8S_RUN/images/wrap.tar" >/dev/null
echo "imported $K8S_WRAP_IMAGE"
