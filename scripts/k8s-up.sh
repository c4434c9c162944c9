#!/usr/bin/env bash
# Brings up the single-node test cluster: etcd, kube-apiserver,
# controller-manager, scheduler, a private containerd (its own sockets, root
# and state; Docker's containerd is never used), a CNI bridge, the kubelet,
# locally built pause and busybox images, and the agent-sandbox CRDs and
# controller. Waits until the node is Ready and a busybox pod has run to
# completion. Idempotent: on a healthy cluster it does nothing. Everything
# it changes on the host is recorded so that scripts/k8s-down.sh undoes it.
# See docs/.. and /work notes: kubelet v1.37 is the newest that still talks
# to Debian's containerd 1.6.
set -euo pipefail
. "$(dirname "$0")/k8s-lib.sh"

T0=$(date +%s%3N)
elapsed() { local ms=$(($(date +%s%3N) - T0)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

healthy() {
	local d
	for d in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet agent-sandbox-controller; do
		k8s_pid "$d" >/dev/null || return 1
	done
	[ -f "$K8S_RUN/up.done" ] || return 1
	K8S_BIN=$(cat "$K8S_RUN/bin-dir")
	k8s_kubectl get --raw /readyz >/dev/null 2>&1 || return 1
	[ "$(k8s_kubectl get node "$K8S_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# Debian's etcd, CNI plugins and busybox-static (and containerd/runc when
# the host has none) unpacked into the cache: nothing is installed.
ensure_debs() {
	local want=$K8S_DEBS" busybox-static" p missing=""
	command -v containerd >/dev/null || want+=" containerd"
	command -v runc >/dev/null || want+=" runc"
	[ -f "$K8S_CACHE/debs/.done-${want// /_}" ] && return 0
	mkdir -p "$K8S_CACHE/debs/pkgs" "$K8S_DEBROOT"
	cd "$K8S_CACHE/debs/pkgs"
	# shellcheck disable=SC2086
	if ! apt-get download -q $want >/dev/null 2>&1; then
		apt-get update -q >/dev/null
		# shellcheck disable=SC2086
		apt-get download -q $want >/dev/null
	fi
	for p in ./*.deb; do dpkg -x "$p" "$K8S_DEBROOT"; done
	cd - >/dev/null
	for p in usr/bin/etcd usr/lib/cni/bridge usr/lib/cni/firewall usr/lib/cni/host-local bin/busybox; do
		[ -x "$K8S_DEBROOT/$p" ] || missing+=" $p"
	done
	[ -z "$missing" ] || { k8s_log "Debian packages lack:$missing"; exit 1; }
	touch "$K8S_CACHE/debs/.done-${want// /_}"
}

# What the host looks like before anything starts, for k8s-down.sh.
record_host() {
	local s d c t v
	mkdir -p "$K8S_RUN/host"
	: >"$K8S_RUN/host/sysctl-orig"
	for s in $K8S_SYSCTLS; do
		if v=$(sysctl -n "$s" 2>/dev/null); then echo "$s=$v" >>"$K8S_RUN/host/sysctl-orig"; fi
	done
	: >"$K8S_RUN/host/absent-dirs"
	for d in $K8S_HOST_DIRS; do
		[ -e "$d" ] || echo "$d" >>"$K8S_RUN/host/absent-dirs"
	done
	: >"$K8S_RUN/host/absent-shared-dirs"
	for d in /run/containerd/s /run/containerd; do
		[ -e "$d" ] || echo "$d" >>"$K8S_RUN/host/absent-shared-dirs"
	done
	ip netns list 2>/dev/null | awk '{print $1}' >"$K8S_RUN/host/netns-before" || true
	for c in iptables ip6tables; do
		for t in filter nat mangle; do
			$c -t "$t" -S 2>/dev/null | awk -v c="$c" -v t="$t" '$1 == "-N" {print c, t, $2}'
		done
	done >"$K8S_RUN/host/chains-before"
	ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null >"$K8S_RUN/host/cgroups-before" || true
}

# Starts a daemon in its own session so that it outlives this script.
start_daemon() {
	local name=$1
	shift
	setsid "$@" >"$K8S_RUN/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$K8S_RUN/pids/$name.pid"
}

wait_for() {
	local what=$1 tries=$2
	shift 2
	local i
	for ((i = 0; i < tries; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.25
	done
	k8s_log "timed out waiting for $what; logs in $K8S_RUN/logs"
	return 1
}

main() {
	if [ -d "$K8S_RUN" ] && healthy; then
		k8s_log "already up (KUBECONFIG=$KUBECONFIG)"
		exit 0
	fi
	if [ -d "$K8S_RUN" ]; then
		k8s_log "a previous cluster is not healthy; bringing it down first"
		"$K8S_ROOT/scripts/k8s-down.sh"
	fi
	K8S_BIN=$("$K8S_ROOT/scripts/k8s-build.sh")
	ensure_debs
	command -v containerd >/dev/null && command -v runc >/dev/null && command -v openssl >/dev/null ||
		{ k8s_log "containerd, runc and openssl are needed"; exit 1; }
	T0=$(date +%s%3N)
	mkdir -p "$K8S_RUN"/{logs,pids,pki,images,cni/net.d,cni/ipam,pod-logs}
	echo "$K8S_BIN" >"$K8S_RUN/bin-dir"
	record_host
	# The kubelet refuses a loopback node IP: take the default route's address.
	dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
	NODE_IP=$(ip -4 -o addr show dev "${dev:-eth0}" scope global | awk '{split($4,a,"/"); print a[1]; exit}')
	[ -n "$NODE_IP" ] || { k8s_log "no global IPv4 address for the node"; exit 1; }
	echo "$NODE_IP" >"$K8S_RUN/node-ip"

	. "$K8S_ROOT/scripts/k8s-config.sh"
	write_pki
	write_configs
	start_daemon etcd "$K8S_DEBROOT/usr/bin/etcd" --name sandboxio --data-dir "$K8S_RUN/etcd" \
		--listen-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
		--initial-cluster "sandboxio=http://127.0.0.1:$K8S_ETCD_PEER_PORT" --listen-metrics-urls "" \
		--unsafe-no-fsync --snapshot-count 10000 --quota-backend-bytes $((512 * 1024 * 1024))
	start_daemon containerd containerd --config "$K8S_RUN/containerd/config.toml"
	build_images
	wait_for etcd 80 curl -fsS "http://127.0.0.1:$K8S_ETCD_PORT/health"
	start_apiserver
	wait_for containerd 80 ctr --address "$K8S_CTR_SOCK" version
	import_images
	# The kubelet and controllers retry until the API server answers:
	# starting them now overlaps their start-up with its own.
	start_rest
	wait_for kube-apiserver 120 k8s_kubectl get --raw /readyz
	k8s_log "apiserver ready at $(elapsed) s"
	install_agent_sandbox
	wait_for "node Ready" 240 node_ready
	k8s_log "node Ready at $(elapsed) s"
	smoke
	touch "$K8S_RUN/up.done"
	k8s_log "up in $(elapsed) s; export KUBECONFIG=$KUBECONFIG"
}

node_ready() {
	[ "$(k8s_kubectl get node "$K8S_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

main "$@"
