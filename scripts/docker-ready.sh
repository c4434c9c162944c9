#!/usr/bin/env bash
# docker-ready.sh: the first step of `make demo` and `make test`, so that the
# README's two commands are the whole set-up. When a Docker daemon answers it
# does nothing; as root it starts one the way scripts/docker-up.sh does
# (idempotent); otherwise it stops before anything is built, naming the
# command to run. SANDBOXIO_NO_DOCKER=1 skips it (`make test` then skips the
# Docker tests with their reason, unless SANDBOXIO_REQUIRE_DOCKER=1).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${SANDBOXIO_NO_DOCKER:-}" = 1 ] && exit 0
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" = 0 ]; then
	exec ./scripts/docker-up.sh
fi
echo "no Docker daemon answers and starting one needs root: run 'sudo make docker-up' (or SANDBOXIO_NO_DOCKER=1 to test without Docker)" >&2
exit 1
