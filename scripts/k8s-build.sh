#!/usr/bin/env bash
# Builds the test cluster's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl, the agent-sandbox controller and a static
# pause binary) from the pinned wrapper modules in k8s/build, into a cache
# directory keyed by those pins. Prints the directory. Skips the build when
# every binary for the pins is already there. The Go build cache is the
# usual one (GOCACHE), so a cold build is paid once per machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KUBE_VERSION=v1.37.2
ASB_VERSION=v0.5.6
CACHE=${SANDBOXIO_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandboxio-k8s}

# The key covers everything that decides the binaries' contents.
key=$(cat "$ROOT"/k8s/build/kube/go.mod "$ROOT"/k8s/build/kube/go.sum \
	"$ROOT"/k8s/build/agent-sandbox/go.mod "$ROOT"/k8s/build/agent-sandbox/go.sum \
	"$ROOT"/k8s/build/kube/pause/main.go "$0" | sha256sum | cut -c1-12)
OUT="$CACHE/bin-$KUBE_VERSION-asb-$ASB_VERSION-$key"
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl agent-sandbox-controller pause)

if [ -f "$OUT/.complete" ]; then
	echo "$OUT"
	exit 0
fi
mkdir -p "$OUT"
log() { echo "k8s-build: $*" >&2; }

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldv=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldv+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldv+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$(date +%s)
log "building Kubernetes $KUBE_VERSION into $OUT (cold: about 20 min on 2 cores)"
(cd "$ROOT/k8s/build/kube" && CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags "-s -w$ldv" -o "$OUT/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl \
	./pause)
log "building agent-sandbox $ASB_VERSION"
(cd "$ROOT/k8s/build/agent-sandbox" && CGO_ENABLED=0 nice -n 19 go build -trimpath \
	-ldflags "-s -w -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=$ASB_VERSION" \
	-o "$OUT/" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
for b in "${BINS[@]}"; do
	[ -x "$OUT/$b" ] || { log "missing $b after the build"; exit 1; }
done
touch "$OUT/.complete"
log "built in $(($(date +%s) - start)) s"
echo "$OUT"
