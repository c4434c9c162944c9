#!/usr/bin/env bash
# CI's Kubernetes stage (make test-k8s-ci), meant to run after the main
# suite on a fresh machine: builds the cluster's binaries (skipped when the
# cache has them), brings the cluster up, runs the Kubernetes backend's
# tests (make test-k8s, which fails rather than skips without a cluster),
# brings the cluster down whatever happened, then runs the side-effects test
# (which needs the cluster down: it snapshots the host first). Prints the
# time of each step.
#
# It tears the cluster down, so it refuses to start when one is already up
# (a developer's shared cluster) unless SANDBOXIO_K8S_CI_TAKE_OVER=1.
set -euo pipefail
. "$(dirname "$0")/k8s-lib.sh"
cd "$K8S_ROOT"

if [ -f "$K8S_RUN/up.done" ] || k8s_pid kube-apiserver >/dev/null; then
	if [ "${SANDBOXIO_K8S_CI_TAKE_OVER:-}" != 1 ]; then
		k8s_log "a cluster is already up in $K8S_RUN and this stage would bring it down; set SANDBOXIO_K8S_CI_TAKE_OVER=1 to allow it"
		exit 1
	fi
fi

step() { # NAME COMMAND...
	local name=$1 t0=$SECONDS
	shift
	echo "== k8s: $name"
	"$@"
	echo "== k8s: $name took $((SECONDS - t0)) s"
}

down() { step "down" ./scripts/k8s-down.sh; }

step "build" ./scripts/k8s-build.sh >/dev/null
trap 'down || true' EXIT
step "up" ./scripts/k8s-up.sh
step "make test-k8s" make test-k8s
trap - EXIT
down
step "side effects" make test-k8s-side-effects
