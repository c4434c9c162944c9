#!/usr/bin/env bash
# Builds the test cluster's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl, the agent-sandbox controller and a static
# pause binary) from the pinned wrapper module k8s/build/kube, into a cache
# directory keyed by those pins. Prints the directory. Skips the build when
# every binary for the pins is already there. The Go build cache is the
# usual one (GOCACHE), so a cold build is paid once per machine.
#
# One module and one `go build`: the agent-sandbox controller compiles
# against the same k8s.io libraries as Kubernetes, so they are compiled
# once. The tags are the ones Kubernetes' own release build uses.
# Measured costs are in k8s/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KUBE_VERSION=v1.37.2
ASB_VERSION=v0.5.6
CACHE=${SANDBOXIO_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandboxio-k8s}
TAGS=selinux,notest,grpcnotrace
# SANDBOXIO_K8S_GCFLAGS='all=-N -l' builds without optimisation: about 20%
# less compile CPU on the k8s.io libraries (k8s/README.md), for slower
# daemons whose bring-up has not been checked. Off by default.
GCFLAGS=${SANDBOXIO_K8S_GCFLAGS:-}

# The key covers everything that decides the binaries' contents.
key=$(cat "$ROOT"/k8s/build/kube/go.mod "$ROOT"/k8s/build/kube/go.sum \
	"$ROOT"/k8s/build/kube/pause/main.go "$0" <(echo "$GCFLAGS") | sha256sum | cut -c1-12)
OUT="$CACHE/bin-$KUBE_VERSION-asb-$ASB_VERSION-$key"
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl agent-sandbox-controller pause)

if [ -f "$OUT/.complete" ]; then
	echo "$OUT"
	exit 0
fi
mkdir -p "$OUT"
# One build at a time: a second caller (CI starts the build in the
# background, then k8s-up.sh asks for it) waits for the first, then finds it done.
exec 9>"$CACHE/.build.lock"
flock 9
if [ -f "$OUT/.complete" ]; then
	echo "$OUT"
	exit 0
fi
log() { echo "k8s-build: $*" >&2; }

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldv=" -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=$ASB_VERSION"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldv+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldv+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$(date +%s)
log "building Kubernetes $KUBE_VERSION and agent-sandbox $ASB_VERSION into $OUT (cold: see k8s/README.md)"
(cd "$ROOT/k8s/build/kube" && CGO_ENABLED=0 nice -n 19 go build -trimpath -tags "$TAGS" \
	-gcflags "$GCFLAGS" -ldflags "-s -w$ldv" -o "$OUT/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl \
	sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller ./pause)
for b in "${BINS[@]}"; do
	[ -x "$OUT/$b" ] || { log "missing $b after the build"; exit 1; }
done
touch "$OUT/.complete"
log "built in $(($(date +%s) - start)) s"
echo "$OUT"
