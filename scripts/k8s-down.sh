#!/usr/bin/env bash
# Stops the test cluster of scripts/k8s-up.sh and undoes every host side
# effect it recorded or that the kubelet, containerd and CNI leave: pods,
# daemons, shims, mounts, network namespaces, the bridge, iptables chains,
# cgroups, sysctls and directories. Docker's daemon, its containerd and its
# iptables chains are never touched. Safe to run when nothing is up.
set -uo pipefail
. "$(dirname "$0")/k8s-lib.sh"

if [ ! -d "$K8S_RUN" ]; then
	k8s_log "nothing to bring down"
	exit 0
fi
H=$K8S_RUN/host

# SIGTERM to the named daemons at once, SIGKILL to those still running
# after SECONDS.
stop() { # SECONDS NAME...
	local grace=$1 pid n i left
	shift
	local -A pids=()
	for n in "$@"; do
		pid=$(k8s_pid "$n") && pids[$n]=$pid && kill -TERM "$pid" 2>/dev/null
	done
	for ((i = 0; i < grace * 10; i++)); do
		left=0
		for n in "${!pids[@]}"; do [ -d "/proc/${pids[$n]}" ] && left=1; done
		[ $left = 0 ] && return 0
		sleep 0.1
	done
	for n in "${!pids[@]}"; do
		[ -d "/proc/${pids[$n]}" ] || continue
		k8s_log "$n did not stop within $grace s of SIGTERM; killed"
		kill -KILL "${pids[$n]}" 2>/dev/null
	done
}

# Pods are deleted through the kubelet so that CNI DEL runs for each.
drain_pods() {
	local i
	k8s_pid kubelet >/dev/null && k8s_pid kube-apiserver >/dev/null || return 0
	# shellcheck disable=SC2034 # read by k8s_kubectl (k8s-lib.sh)
	K8S_BIN=$(cat "$K8S_RUN/bin-dir")
	k8s_kubectl delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1 || return 0
	for ((i = 0; i < 100; i++)); do
		[ -z "$(ctr --address "$K8S_CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null)" ] && return 0
		sleep 0.2
	done
}

kill_tasks() {
	local id
	k8s_pid containerd >/dev/null || return 0
	for id in $(ctr --address "$K8S_CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
		ctr --address "$K8S_CTR_SOCK" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1
	done
	sleep 0.5
	for id in $(ctr --address "$K8S_CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
		ctr --address "$K8S_CTR_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1
	done
}

# Shim sockets live in containerd 1.6's fixed /run/containerd/s, next to
# those of Docker's containerd: remove only the ones whose name is the hash
# of our address, namespace and a container id of ours.
shim_sockets() {
	local d id
	for d in "$K8S_RUN"/containerd/state/io.containerd.runtime.v2.task/*/*; do
		[ -d "$d" ] || continue
		id=$(basename "$d")
		echo "/run/containerd/s/$(printf '%s' "$K8S_CTR_SOCK/$(basename "$(dirname "$d")")/$id" | sha256sum | cut -d' ' -f1)"
	done
}

# Any process left that belongs to the cluster: its command line names the
# run directory (shims, daemons) or it sits in one of the kubelet's pod
# cgroups. Each is killed by its id.
kill_leftovers() {
	local p pid
	# One grep over every command line; the pattern comes from a file so
	# that grep's own command line does not match.
	echo "$K8S_RUN" >"$K8S_RUN/.pattern"
	for p in $(grep -laF -f "$K8S_RUN/.pattern" /proc/[0-9]*/cmdline 2>/dev/null); do
		pid=${p#/proc/}
		pid=${pid%/cmdline}
		[ "$pid" = $$ ] || kill -KILL "$pid" 2>/dev/null
	done
	find /sys/fs/cgroup/*/kubepods -name cgroup.procs 2>/dev/null | while read -r p; do
		while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$p"
	done
	sleep 0.3
}

unmount_all() {
	local m
	for m in $(awk -v r="$K8S_RUN" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	if [ -f "$H/netns-before" ]; then
		for m in $(ip netns list 2>/dev/null | awk '{print $1}'); do
			grep -qx "$m" "$H/netns-before" || [[ $m != cni-* ]] || ip netns delete "$m" 2>/dev/null
		done
	fi
}

# Chains the kubelet or the CNI firewall plugin created (named CNI-* or
# KUBE-*), with the rules in other chains that jump to them; chains that
# existed before k8s-up.sh are left alone.
clean_iptables() {
	local cmd t c rule
	for cmd in iptables ip6tables; do
		for t in filter nat mangle; do
			for c in $($cmd -t "$t" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^CNI-/ || $2 ~ /^KUBE-/) {print $2}'); do
				grep -qx "$cmd $t $c" "$H/chains-before" 2>/dev/null && continue
				$cmd -t "$t" -S 2>/dev/null | grep -E -- "-j $c( |\$)" | while read -r rule; do
					eval "$cmd -t $t ${rule/#-A/-D}" 2>/dev/null
				done
				$cmd -t "$t" -F "$c" 2>/dev/null
			done
			for c in $($cmd -t "$t" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^CNI-/ || $2 ~ /^KUBE-/) {print $2}'); do
				grep -qx "$cmd $t $c" "$H/chains-before" 2>/dev/null || $cmd -t "$t" -X "$c" 2>/dev/null
			done
		done
	done
}

remove_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
		[ -d "$d" ] || continue
		grep -qx "$d" "$H/cgroups-before" 2>/dev/null && continue
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
}

restore_sysctls() {
	local kv
	[ -f "$H/sysctl-orig" ] || return 0
	while read -r kv; do
		[ "$(sysctl -n "${kv%%=*}" 2>/dev/null)" = "${kv#*=}" ] || sysctl -q -w "$kv" >/dev/null
	done <"$H/sysctl-orig"
}

main() {
	local sockets d t0
	t0=$(date +%s%3N)
	drain_pods
	k8s_log "pods drained at $((($(date +%s%3N) - t0) / 1000)) s"
	# The cluster's state is thrown away, so a daemon gets a short grace.
	stop 3 agent-sandbox-controller kube-scheduler kube-controller-manager kubelet
	kill_tasks
	sockets=$(shim_sockets)
	stop 3 kube-apiserver etcd containerd
	k8s_log "daemons stopped at $((($(date +%s%3N) - t0) / 1000)) s"
	kill_leftovers
	unmount_all
	ip link show "$K8S_BRIDGE" >/dev/null 2>&1 && ip link delete "$K8S_BRIDGE"
	clean_iptables
	remove_cgroups
	restore_sysctls
	for d in $sockets; do rm -f "$d"; done
	if [ -f "$H/absent-dirs" ]; then
		while read -r d; do rm -rf --one-file-system "$d"; done <"$H/absent-dirs"
	fi
	# Shared with Docker's containerd: removed only if absent before and empty.
	if [ -f "$H/absent-shared-dirs" ]; then
		while read -r d; do rmdir "$d" 2>/dev/null; done <"$H/absent-shared-dirs"
	fi
	rm -rf --one-file-system "$K8S_RUN"
	if [ -d "$K8S_RUN" ]; then
		k8s_log "could not remove $K8S_RUN (a mount still held?)"
		exit 1
	fi
	k8s_log "down in $((($(date +%s%3N) - t0) / 1000)).$((($(date +%s%3N) - t0) % 1000 / 100)) s"
}

main "$@"
