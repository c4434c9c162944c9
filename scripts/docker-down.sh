#!/usr/bin/env bash
# docker-down.sh: stop the Docker daemon that scripts/docker-up.sh started.
#
# A daemon this project did not start (a developer's own Docker, a CI
# service) is never touched: without docker-up.sh's marker file this script
# does nothing. Installed packages are left in place.
set -euo pipefail

PIDFILE=${SANDBOXIO_DOCKERD_PIDFILE:-/run/sandboxio-dockerd.pid}
MARKER=${SANDBOXIO_DOCKERD_MARKER:-/run/sandboxio-dockerd.started}
WAIT=${SANDBOXIO_DOCKERD_STOP_WAIT:-30}

say() { printf 'docker-down: %s\n' "$*" >&2; }

if [ ! -e "$MARKER" ]; then
	say "no daemon started by docker-up.sh; nothing to stop"
	exit 0
fi
pid=$(cat "$PIDFILE" 2>/dev/null || true)
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
	say "daemon started by docker-up.sh is no longer running"
	rm -f "$MARKER" "$PIDFILE"
	exit 0
fi
# Make sure the pid still belongs to dockerd before signalling it: pids are
# reused, and killing an unrelated process would be far worse than leaking.
comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
if [ "$comm" != dockerd ]; then
	say "pid $pid is now '$comm', not dockerd; not signalling it"
	rm -f "$MARKER" "$PIDFILE"
	exit 0
fi
# The sandboxio host backstop (a container the Docker backend creates, with
# restart policy unless-stopped): removed first, so that it does not come
# back with the next daemon, and its images with it.
if command -v docker >/dev/null 2>&1; then
	docker rm -f sandboxio-backstop >/dev/null 2>&1 || true
	docker image ls -q sandboxio/backstop 2>/dev/null | xargs -r docker image rm -f >/dev/null 2>&1 || true
fi
say "stopping dockerd (pid $pid)"
kill -TERM "$pid"
deadline=$((SECONDS + WAIT))
while kill -0 "$pid" 2>/dev/null; do
	if [ $SECONDS -ge $deadline ]; then
		say "dockerd still running after ${WAIT}s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		break
	fi
	sleep 0.5
done
rm -f "$MARKER" "$PIDFILE"
say "stopped"
