#!/usr/bin/env bash
# build-image.sh: build the small local test image without any registry.
#
# No image registry is reachable from these machines, so the image is made by
# `docker import` of a root filesystem tar holding Debian's static busybox
# and its applet links. Idempotent: an existing image is left alone unless
# SANDBOXIO_REBUILD_IMAGE=1. The Go test harness builds the same image itself
# (internal/backends/docker, EnsureTestImage), so `go test` needs only a daemon.
#
# Usage: scripts/build-image.sh [TAG]   (default sandboxio/busybox:local)
set -euo pipefail

TAG=${1:-sandboxio/busybox:local}
BUSYBOX=${SANDBOXIO_BUSYBOX:-/bin/busybox}

say() { printf 'build-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

docker info >/dev/null 2>&1 || die "no Docker daemon answers; run scripts/docker-up.sh first"
if [ "${SANDBOXIO_REBUILD_IMAGE:-}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
	say "$TAG already present; nothing to do"
	exit 0
fi
[ -x "$BUSYBOX" ] || die "$BUSYBOX not found; install Debian's busybox-static"
# A dynamically linked busybox would need its libraries inside the image.
if command -v file >/dev/null 2>&1 && ! file -L "$BUSYBOX" | grep -q 'statically linked'; then
	die "$BUSYBOX is not statically linked; install Debian's busybox-static"
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,tmp,proc,sys,dev,etc,work,home,root,var/tmp}
chmod 1777 "$root/tmp" "$root/var/tmp"
cp "$BUSYBOX" "$root/bin/busybox"
# Every applet this busybox build has gets a link, so `sh`, `cat`, `dd`,
# `head`, `sleep` and the rest resolve through PATH.
for applet in $("$BUSYBOX" --list); do
	[ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . |
	docker import \
		--change 'ENV PATH=/bin' \
		--change 'CMD ["/bin/sh"]' \
		--message 'sandboxio test image: static busybox' \
		- "$TAG" >/dev/null
say "built $TAG ($(docker image inspect --format '{{.Id}}' "$TAG"))"
