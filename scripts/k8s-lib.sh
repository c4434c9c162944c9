# shellcheck shell=bash
# The settings are read by the scripts that source this file.
# shellcheck disable=SC2034
# Shared settings of scripts/k8s-up.sh, k8s-down.sh and
# k8s-side-effects-test.sh: one single-node test cluster per machine.
# Sourced, not run.

K8S_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S_CACHE=${SANDBOXIO_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandboxio-k8s}
# Everything the cluster writes lives here; k8s-down.sh removes it whole.
K8S_RUN=${SANDBOXIO_K8S_RUN:-/var/tmp/sandboxio-k8s}
K8S_NODE=sandboxio-node
K8S_BRIDGE=sbxk8s0
K8S_POD_CIDR=10.244.0.0/24
K8S_SERVICE_CIDR=10.96.0.0/16
K8S_ETCD_PORT=23790
K8S_ETCD_PEER_PORT=23800
K8S_API_PORT=16443
# Debian packages unpacked with dpkg -x (never installed, so no service
# starts and nothing lands in /usr).
K8S_DEBS="etcd-server containernetworking-plugins"
K8S_DEBROOT=$K8S_CACHE/debs/root
K8S_CTR_SOCK=$K8S_RUN/containerd/containerd.sock
K8S_PAUSE_IMAGE=sandboxio.local/pause:1
K8S_BUSYBOX_IMAGE=sandboxio.local/busybox:1
# Sysctls the kubelet and the CNI bridge may set; k8s-up.sh records their
# values before it starts anything and k8s-down.sh restores them.
K8S_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables"
# Host paths outside K8S_RUN that the kubelet, containerd's CRI plugin or
# CNI create whatever their configuration says; removed by k8s-down.sh only
# when k8s-up.sh found them absent.
K8S_HOST_DIRS="/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /var/run/netns /run/netns /etc/kubernetes"

export KUBECONFIG=$K8S_RUN/admin.kubeconfig
export PATH=$K8S_DEBROOT/usr/bin:$K8S_DEBROOT/usr/sbin:$PATH

k8s_log() { echo "k8s: $*" >&2; }

# The pid recorded for a daemon, if it still runs as that daemon.
k8s_pid() {
	local f=$K8S_RUN/pids/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
	grep -qa -- "$K8S_RUN" "/proc/$pid/cmdline" "/proc/$pid/environ" 2>/dev/null || return 1
	echo "$pid"
}

k8s_kubectl() { "$K8S_BIN/kubectl" --request-timeout=10s "$@"; }
