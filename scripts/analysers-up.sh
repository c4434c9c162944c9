#!/usr/bin/env bash
# analysers-up.sh: install the static analysers of the pre-execution hook,
# Debian's bandit (Python) and shellcheck (shell), for the tests and the
# benchmarks that drive them (make test sets SANDBOXIO_REQUIRE_ANALYSERS=1,
# so a missing analyser fails those tests instead of skipping them).
#
# Idempotent: installs only what is missing, from the distribution's
# archive (bookworm: bandit 1.6.2, shellcheck 0.9.0), then prints the versions.
set -euo pipefail

say() { printf 'analysers-up: %s\n' "$*" >&2; }

need=()
command -v bandit >/dev/null 2>&1 || need+=(bandit)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || { say "error: installing ${need[*]} needs root (run with sudo, or apt-get install ${need[*]})"; exit 1; }
	say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -qq update >/dev/null
	apt-get -qq install -y --no-install-recommends "${need[@]}" >/dev/null
fi
say "$(bandit --version 2>/dev/null | head -1); shellcheck $(shellcheck --version | sed -n 's/^version: //p')"
