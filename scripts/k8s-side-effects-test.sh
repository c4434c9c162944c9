#!/usr/bin/env bash
# Checks that the test cluster leaves nothing behind and never touches
# Docker: snapshots the host, runs k8s-up.sh twice (the second must be a
# no-op), checks Docker while the cluster runs, runs k8s-down.sh twice, then
# compares the host with the snapshot and runs a Docker container.
# Docker is shared with other tests that run at the same time, so Docker's
# own objects (its veths, bridges, chains' contents, mounts) are filtered out
# of the host comparison and checked separately: its daemon and containerd
# keep their pids, its chains all remain, DOCKER-USER is unchanged.
set -uo pipefail
. "$(dirname "$0")/k8s-lib.sh"

PASS=0
FAIL=0
OUT=$(mktemp -d /tmp/k8s-side-effects.XXXXXX)
check() { # NAME COMMAND...
	local name=$1
	shift
	if "$@"; then
		PASS=$((PASS + 1))
		echo "ok   $name"
	else
		FAIL=$((FAIL + 1))
		echo "FAIL $name"
	fi
}
same() { # NAME: $OUT/before.NAME equals $OUT/after.NAME
	diff -u "$OUT/before.$1" "$OUT/after.$1" >"$OUT/diff.$1" && return 0
	sed 's/^/    /' "$OUT/diff.$1" | head -40
	return 1
}

# Values that change on their own, or per interface (Docker's veths).
VOLATILE='^(fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.(random\.|ns_last_pid|pty\.nr|sched_domain)|net\.netfilter\.nf_conntrack_count|net\.ipv[46]\.(conf|neigh)\.[^.]*(veth|docker|br-)|net\.ipv6\.route\.gc_|vm\.nr_|dev\.|fs\.binfmt_misc)'
DOCKER_RE='docker|br-[0-9a-f]{12}|DOCKER'

snapshot() { # PREFIX
	local p=$OUT/$1 c t
	sysctl -a 2>/dev/null | grep -vE "$VOLATILE" | sort >"$p.sysctl"
	ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -vE '^veth' | grep -vE "$DOCKER_RE" | sort >"$p.links"
	ip -o link show | grep -E '^[0-9]+: veth' | grep -vE 'master (docker0|br-)' | awk -F': ' '{print $2}' | sort >"$p.veths"
	ip netns list 2>/dev/null | awk '{print $1}' | sort >"$p.netns"
	ip -4 route show table all | grep -vE "$DOCKER_RE" | sort >"$p.routes"
	ip -4 addr show | grep -E 'inet ' | grep -vE "$DOCKER_RE" | sort >"$p.addrs"
	for c in iptables ip6tables; do
		for t in filter nat mangle raw; do
			# Rule lines that are not Docker's, and every chain name.
			$c -t "$t" -S 2>/dev/null | grep -vE "$DOCKER_RE" | sed "s/^/$c $t /"
			$c -t "$t" -S 2>/dev/null | awk -v c="$c" -v t="$t" '$1 == "-N" {print c, t, "chain", $2}'
		done
	done | sort -u >"$p.iptables"
	awk '{print $5}' /proc/self/mountinfo | grep -vE '^/(var/lib/docker|run/docker|var/run/docker)/' | sort >"$p.mounts"
	find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d 2>/dev/null | grep -vE '/(docker|system\.slice)' | sort >"$p.cgroups"
	for d in $K8S_HOST_DIRS /run/containerd/runc /run/containerd/fifo "$K8S_RUN"; do
		[ -e "$d" ] && echo "$d"
	done >"$p.dirs"
	# The pattern comes from a file so that grep's own command line does not match.
	echo "$K8S_RUN" >"$OUT/pattern"
	grep -laF -f "$OUT/pattern" /proc/[0-9]*/cmdline 2>/dev/null | sort >"$p.procs" || true
	ss -ltnH 2>/dev/null | awk '{print $4}' | grep -E ":($K8S_API_PORT|$K8S_ETCD_PORT|$K8S_ETCD_PEER_PORT|10250|10248|18082)\$" | sort >"$p.ports" || true
	if [ -r /proc/modules ]; then awk '{print $1}' /proc/modules | sort; fi >"$p.modules"
}

docker_state() { # PREFIX
	local p=$OUT/$1
	pidof dockerd >"$p.dockerd" || echo none >"$p.dockerd"
	pgrep -f -- '--config /var/run/docker/containerd/containerd.toml' >"$p.docker-containerd" || echo none >"$p.docker-containerd"
	iptables -S DOCKER-USER >"$p.docker-user" 2>&1
	iptables-save | awk '/^:DOCKER/ {print $1}' | sort >"$p.docker-chains"
}

docker_untouched() { # PREFIX
	local ok=0 f
	docker info >/dev/null 2>&1 || { echo "    docker info does not answer"; ok=1; }
	docker_state "$1"
	for f in dockerd docker-containerd docker-user; do
		cmp -s "$OUT/docker0.$f" "$OUT/$1.$f" || { echo "    Docker's $f changed"; ok=1; }
	done
	# Docker may add chains for new networks; none of its chains may go.
	comm -23 "$OUT/docker0.docker-chains" "$OUT/$1.docker-chains" | sed 's/^/    Docker chain gone: /' | grep . && ok=1
	return $ok
}

main() {
	[ -d "$K8S_RUN" ] && { echo "a cluster is up ($K8S_RUN): run scripts/k8s-down.sh first"; exit 2; }
	docker info >/dev/null 2>&1 || { echo "no Docker daemon answers: run scripts/docker-up.sh"; exit 2; }
	docker image inspect sandboxio/busybox:local >/dev/null 2>&1 || { echo "no sandboxio/busybox:local: run scripts/build-image.sh"; exit 2; }
	"$K8S_ROOT/scripts/k8s-build.sh" >/dev/null || exit 2
	docker_state docker0
	snapshot before

	local t0 t1 pids1 pids2
	t0=$(date +%s%3N)
	check "k8s-up.sh brings the cluster up" "$K8S_ROOT/scripts/k8s-up.sh"
	t1=$(date +%s%3N)
	echo "     up took $(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100)) s"
	check "Docker untouched while the cluster runs" docker_untouched during
	check "the kubelet runs pods through the private containerd only" \
		bash -c "! grep -qF -- '/var/run/docker/containerd' '$K8S_RUN/kubelet/config.yaml' '$K8S_RUN/containerd/config.toml'"
	pids1=$(cat "$K8S_RUN"/pids/*.pid 2>/dev/null)
	t0=$(date +%s%3N)
	check "a second k8s-up.sh succeeds" "$K8S_ROOT/scripts/k8s-up.sh"
	t1=$(date +%s%3N)
	pids2=$(cat "$K8S_RUN"/pids/*.pid 2>/dev/null)
	echo "     second up took $(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100)) s"
	check "the second k8s-up.sh restarted nothing" test "$pids1" = "$pids2"

	t0=$(date +%s%3N)
	check "k8s-down.sh succeeds" "$K8S_ROOT/scripts/k8s-down.sh"
	t1=$(date +%s%3N)
	echo "     down took $(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100)) s"
	check "a second k8s-down.sh succeeds" "$K8S_ROOT/scripts/k8s-down.sh"
	snapshot after
	local what
	for what in sysctl links veths netns routes addrs iptables mounts cgroups dirs procs ports; do
		check "no $what left" same "$what"
	done
	if ! cmp -s "$OUT/before.modules" "$OUT/after.modules"; then
		echo "     note: kernel modules loaded meanwhile (left loaded): $(comm -13 "$OUT/before.modules" "$OUT/after.modules" | tr '\n' ' ')"
	fi
	check "Docker untouched after down" docker_untouched after
	check "a Docker container runs after down" \
		bash -c "[ \"\$(docker run --rm --label sandboxio.k8s-side-effects-test=1 sandboxio/busybox:local echo docker-ok)\" = docker-ok ]"
	echo "k8s-side-effects: $PASS passed, $FAIL failed"
	[ "$FAIL" = 0 ] && rm -rf "$OUT"
	[ "$FAIL" = 0 ]
}

main "$@"
