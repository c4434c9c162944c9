#!/usr/bin/env bash
# docker-up.sh: make sure a Docker daemon answers, for the Docker backend tests.
#
# Idempotent. When `docker info` already answers, it does nothing. Otherwise it
# installs Debian's docker.io, runsc (gVisor) and busybox-static, registers
# runsc as a Docker runtime, starts dockerd directly (these machines have no
# systemd) and waits until it answers. It leaves a marker file so that
# scripts/docker-down.sh stops only a daemon that this script started.
#
# Environment:
#   SANDBOXIO_DOCKERD_LOG       dockerd log file   (/var/log/sandboxio-dockerd.log)
#   SANDBOXIO_DOCKERD_PIDFILE   dockerd pid file   (/run/sandboxio-dockerd.pid)
#   SANDBOXIO_DOCKERD_MARKER    started-by-us mark (/run/sandboxio-dockerd.started)
#   SANDBOXIO_DOCKERD_WAIT      seconds to wait for the daemon (60)
set -euo pipefail

LOG=${SANDBOXIO_DOCKERD_LOG:-/var/log/sandboxio-dockerd.log}
PIDFILE=${SANDBOXIO_DOCKERD_PIDFILE:-/run/sandboxio-dockerd.pid}
MARKER=${SANDBOXIO_DOCKERD_MARKER:-/run/sandboxio-dockerd.started}
WAIT=${SANDBOXIO_DOCKERD_WAIT:-60}
DAEMON_JSON=/etc/docker/daemon.json

say() { printf 'docker-up: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

answers() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

if answers; then
	say "a Docker daemon already answers; nothing to do"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "no Docker daemon answers and starting one needs root (run with sudo)"

# --- packages -------------------------------------------------------------
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v runsc >/dev/null 2>&1 || need+=(runsc)
[ -x /bin/busybox ] || need+=(busybox-static)
# jq merges an existing daemon.json rather than overwriting it.
command -v jq >/dev/null 2>&1 || need+=(jq)
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Package maintainer scripts must not try to start services: there is no
	# init system to start them with, and we start dockerd ourselves below.
	created_policy=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		created_policy=1
	fi
	apt-get -qq update >/dev/null
	apt-get -qq install -y --no-install-recommends "${need[@]}" >/dev/null
	[ -n "$created_policy" ] && rm -f /usr/sbin/policy-rc.d
fi
command -v dockerd >/dev/null 2>&1 || die "dockerd not found after installing docker.io"
RUNSC=$(command -v runsc) || die "runsc not found after installing runsc"

# --- daemon.json ------------------------------------------------------------
# runsc must be registered with --network=none: without it gVisor tries to
# build its own network stack and fails to start under Docker's network mode
# none. An existing daemon.json is merged, never replaced: every other key and
# runtime is kept, an existing runsc entry keeps its path and its other
# arguments, and only its --network argument is set to none.
mkdir -p /etc/docker
# shellcheck disable=SC2016 # jq program, not shell
merge='.runtimes = (.runtimes // {})
  | .runtimes.runsc = ((.runtimes.runsc // {})
      | .path = (.path // $path)
      | .runtimeArgs = ([(.runtimeArgs // [])[] | select(startswith("--network") | not)] + ["--network=none"]))'
if [ -s "$DAEMON_JSON" ]; then
	jq -e . "$DAEMON_JSON" >/dev/null 2>&1 || die "$DAEMON_JSON is not valid JSON; fix it by hand"
	merged=$(jq --arg path "$RUNSC" "$merge" "$DAEMON_JSON")
	if [ "$merged" != "$(jq . "$DAEMON_JSON")" ]; then
		cp "$DAEMON_JSON" "$DAEMON_JSON.sandboxio.bak"
		printf '%s\n' "$merged" >"$DAEMON_JSON.tmp" && mv "$DAEMON_JSON.tmp" "$DAEMON_JSON"
		say "registered runsc in $DAEMON_JSON (previous file kept as $DAEMON_JSON.sandboxio.bak)"
	fi
else
	jq -n --arg path "$RUNSC" "$merge" >"$DAEMON_JSON"
	say "wrote $DAEMON_JSON registering runsc"
fi

# --- start dockerd ----------------------------------------------------------
# A stale pid file from a daemon that died would make dockerd refuse to start.
if [ -s /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
	rm -f /var/run/docker.pid
fi
mkdir -p "$(dirname "$LOG")" "$(dirname "$PIDFILE")"
say "starting dockerd (log: $LOG)"
# setsid detaches dockerd from this shell's session so that it survives the
# caller (CI step, terminal) exiting.
setsid dockerd >>"$LOG" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$PIDFILE"
: >"$MARKER"

deadline=$((SECONDS + WAIT))
until answers; do
	if ! kill -0 "$pid" 2>/dev/null; then
		rm -f "$MARKER" "$PIDFILE"
		say "dockerd exited before answering; last lines of $LOG:"
		tail -n 30 "$LOG" >&2 || true
		exit 1
	fi
	if [ $SECONDS -ge $deadline ]; then
		say "dockerd did not answer within ${WAIT}s; last lines of $LOG:"
		tail -n 30 "$LOG" >&2 || true
		kill "$pid" 2>/dev/null || true
		rm -f "$MARKER" "$PIDFILE"
		exit 1
	fi
	sleep 0.5
done
say "dockerd answers (pid $pid): $(docker info --format '{{.ServerVersion}} storage={{.Driver}} cgroup={{.CgroupVersion}} runtimes={{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null)"
