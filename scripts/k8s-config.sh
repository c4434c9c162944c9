# shellcheck shell=bash
# The test cluster's certificates, configuration files, images and daemon
# command lines. Sourced by scripts/k8s-up.sh after k8s-lib.sh, with
# K8S_BIN and NODE_IP set.

PKI=$K8S_RUN/pki

# A leaf certificate signed by the cluster CA: NAME SUBJECT [SANS].
cert() {
	local name=$1 subj=$2 sans=${3:-} ext
	ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=${sans:+serverAuth,}clientAuth"
	[ -n "$sans" ] && ext+="
subjectAltName=$sans"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/$name.key" \
		-subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 12)" \
		-days 30 -extfile <(echo "$ext") -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr"
}

kubeconfig() {
	local name=$1 user=$2
	cat >"$K8S_RUN/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandboxio
  cluster:
    server: https://127.0.0.1:$K8S_API_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$user.crt")
    client-key-data: $(base64 -w0 <"$PKI/$user.key")
contexts:
- name: sandboxio
  context: {cluster: sandboxio, user: $user, namespace: default}
current-context: sandboxio
EOF
	chmod 600 "$K8S_RUN/$name.kubeconfig"
}

write_pki() {
	umask 077
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$PKI/ca.key" \
		-subj "/CN=sandboxio-test-cluster-ca" -days 30 -out "$PKI/ca.crt" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	cert apiserver "/CN=kube-apiserver" \
		"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:$NODE_IP" &
	cert kubelet-serving "/CN=$K8S_NODE" "DNS:$K8S_NODE,IP:$NODE_IP,IP:127.0.0.1" &
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" &
	cert admin "/O=system:masters/CN=sandboxio-admin" &
	cert node "/O=system:nodes/CN=system:node:$K8S_NODE" &
	cert kcm "/CN=system:kube-controller-manager" &
	cert sched "/CN=system:kube-scheduler" &
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
	openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	# Each background job must have succeeded.
	local j
	for j in $(jobs -p); do wait "$j" || { k8s_log "certificate generation failed"; exit 1; }; done
	for j in apiserver kubelet-serving apiserver-kubelet-client admin node kcm sched; do
		[ -s "$PKI/$j.crt" ] || { k8s_log "no certificate $j"; exit 1; }
	done
	umask 022
	kubeconfig admin admin
	kubeconfig kubelet node
	kubeconfig kcm kcm
	kubeconfig sched sched
}

write_configs() {
	mkdir -p "$K8S_RUN/containerd" "$K8S_RUN/kubelet"
	cat >"$K8S_RUN/containerd/config.toml" <<EOF
version = 2
root = "$K8S_RUN/containerd/root"
state = "$K8S_RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$K8S_CTR_SOCK"
[ttrpc]
  address = "$K8S_CTR_SOCK.ttrpc"
[debug]
  address = "$K8S_RUN/containerd/debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$K8S_RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$K8S_PAUSE_IMAGE"
  # This machine's root lacks CAP_SYS_RESOURCE: without this, runc fails
  # to write oom_score_adj and no pod starts.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$K8S_RUN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$K8S_DEBROOT/usr/lib/cni"
    conf_dir = "$K8S_RUN/cni/net.d"
EOF
	# The firewall plugin lets pod traffic through FORWARD, whose policy
	# Docker sets to DROP while bridged packets go through iptables.
	cat >"$K8S_RUN/cni/net.d/10-sandboxio.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "sandboxio", "plugins": [
  {"type": "bridge", "bridge": "$K8S_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$K8S_POD_CIDR"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$K8S_RUN/cni/ipam"}},
  {"type": "firewall", "backend": "iptables"}
]}
EOF
	cat >"$K8S_RUN/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Required on cgroup v1 from 1.35 on.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$K8S_CTR_SOCK
podLogsDir: $K8S_RUN/pod-logs
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
# No KUBE-FIREWALL and friends: fewer host iptables changes to undo.
makeIPTablesUtilChains: false
podPidsLimit: 1024
maxPods: 60
nodeStatusUpdateFrequency: 4s
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
	cat >"$K8S_RUN/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
EOF
}

# A docker-save style tarball that ctr imports: NAME ROOTFS CONFIG_JSON OUT.
mkimage() {
	local name=$1 rootfs=$2 cfg=$3 out=$4 tmp diff cfgsum
	tmp=$(mktemp -d "$K8S_RUN/images/mk.XXXXXX")
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$tmp/layer.tar" .
	diff=$(sha256sum "$tmp/layer.tar" | cut -d' ' -f1)
	mkdir "$tmp/$diff" && mv "$tmp/layer.tar" "$tmp/$diff/layer.tar"
	printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$cfg" "$diff" >"$tmp/config.json"
	cfgsum=$(sha256sum "$tmp/config.json" | cut -d' ' -f1)
	mv "$tmp/config.json" "$tmp/$cfgsum.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfgsum" "$name" "$diff" >"$tmp/manifest.json"
	tar -C "$tmp" -cf "$out" manifest.json "$cfgsum.json" "$diff"
	rm -rf "$tmp"
}

# The tarballs are deterministic, so they are kept in the cache, keyed by
# the binaries' directory.
build_images() {
	local r a cached
	cached=$K8S_CACHE/images-$(basename "$K8S_BIN")
	if [ -f "$cached/busybox.tar" ] && [ -f "$cached/pause.tar" ]; then
		cp "$cached/pause.tar" "$cached/busybox.tar" "$K8S_RUN/images/"
		return 0
	fi
	r=$K8S_RUN/images
	mkdir -p "$r/pause/bin" "$r/busybox/bin" "$r/busybox/etc" "$r/busybox/tmp"
	cp "$K8S_BIN/pause" "$r/pause/bin/pause"
	mkimage "$K8S_PAUSE_IMAGE" "$r/pause" '{"Entrypoint":["/bin/pause"]}' "$r/pause.tar"
	cp "$K8S_DEBROOT/bin/busybox" "$r/busybox/bin/busybox"
	for a in $("$K8S_DEBROOT/bin/busybox" --list); do
		[ "$a" = busybox ] || ln -s busybox "$r/busybox/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/busybox/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/busybox/etc/group"
	chmod 1777 "$r/busybox/tmp"
	mkimage "$K8S_BUSYBOX_IMAGE" "$r/busybox" '{"Cmd":["sh"],"Env":["PATH=/bin"]}' "$r/busybox.tar"
	rm -rf "$r/pause" "$r/busybox"
	mkdir -p "$cached"
	cp "$r/pause.tar" "$r/busybox.tar" "$cached/"
}

import_images() {
	local t
	for t in pause busybox; do
		ctr --address "$K8S_CTR_SOCK" -n k8s.io images import "$K8S_RUN/images/$t.tar" >/dev/null
	done
}

start_apiserver() {
	start_daemon kube-apiserver "$K8S_BIN/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$K8S_ETCD_PORT" \
		--bind-address=127.0.0.1 --secure-port="$K8S_API_PORT" --advertise-address=127.0.0.1 \
		--endpoint-reconciler-type=none \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$PKI/ca.crt" \
		--kubelet-preferred-address-types=InternalIP,Hostname \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--service-cluster-ip-range="$K8S_SERVICE_CIDR" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--allow-privileged=true --profiling=false \
		--audit-policy-file="$K8S_RUN/audit-policy.yaml" --audit-log-path="$K8S_RUN/logs/audit.log"
}

start_rest() {
	start_daemon kube-controller-manager "$K8S_BIN/kube-controller-manager" \
		--kubeconfig="$K8S_RUN/kcm.kubeconfig" --leader-elect=false \
		--bind-address=127.0.0.1 --secure-port=0 \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--use-service-account-credentials=true --controllers='*,-nodeipam'
	start_daemon kube-scheduler "$K8S_BIN/kube-scheduler" \
		--kubeconfig="$K8S_RUN/sched.kubeconfig" --leader-elect=false \
		--bind-address=127.0.0.1 --secure-port=0
	start_daemon kubelet "$K8S_BIN/kubelet" \
		--config="$K8S_RUN/kubelet/config.yaml" --kubeconfig="$K8S_RUN/kubelet.kubeconfig" \
		--hostname-override="$K8S_NODE" --node-ip="$NODE_IP" --root-dir="$K8S_RUN/kubelet" \
		--cert-dir="$K8S_RUN/kubelet/pki"
}

# The CRDs as shipped convert between versions through a webhook that only
# an in-cluster controller serves: serve v1beta1 (the storage version) alone,
# with no conversion.
install_agent_sandbox() {
	local crds=$K8S_RUN/agent-sandbox-crds f src
	src=$(cd "$K8S_ROOT/k8s/build/kube" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)/k8s/crds
	mkdir -p "$crds"
	for f in "$src"/*.yaml; do
		awk '
			/^  conversion:$/ { print; print "    strategy: None"; skip = 1; next }
			skip && /^    / { next }
			{ skip = 0 }
			/^    served: true$/ { held = $0; next }
			held != "" { print ($0 ~ /^    storage: false$/ ? "    served: false" : held); held = "" }
			{ print }
		' "$f" >"$crds/$(basename "$f")"
	done
	k8s_kubectl apply --server-side -f "$crds" >/dev/null
	# kubectl wait errors out, rather than waits, on a CRD with no
	# conditions yet: hence the retries.
	wait_for "the agent-sandbox CRDs" 60 k8s_kubectl wait --for=condition=Established crd --all --timeout=5s
	start_daemon agent-sandbox-controller "$K8S_BIN/agent-sandbox-controller" \
		--kubeconfig="$K8S_RUN/admin.kubeconfig" --enable-webhook=false --manage-webhook-certs=false \
		--extensions --leader-elect=false \
		--metrics-bind-address=0 --health-probe-bind-address=127.0.0.1:18082
}

# A busybox pod that must run to completion and print its marker, and an
# agent-sandbox Sandbox (v1beta1) whose pod the controller must bring to
# Ready: both at once, to keep bring-up short.
smoke() {
	wait_for "the default service account" 120 k8s_kubectl get serviceaccount default
	wait_for agent-sandbox-controller 120 curl -fsS http://127.0.0.1:18082/readyz
	# The Sandbox's pod takes the Sandbox's name, so the two names differ.
	k8s_kubectl delete pod/sandboxio-smoke sandbox.agents.x-k8s.io/sandboxio-smoke-sandbox --ignore-not-found --wait=true >/dev/null
	k8s_kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: sandboxio-smoke, namespace: default}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  enableServiceLinks: false
  containers:
  - name: c
    image: $K8S_BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, "echo sandboxio-smoke-ok"]
---
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: sandboxio-smoke-sandbox, namespace: default}
spec:
  podTemplate:
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: $K8S_BUSYBOX_IMAGE
        imagePullPolicy: Never
        command: [sleep, "3600"]
EOF
	wait_for "the smoke pod" 240 smoke_done
	k8s_kubectl logs pod/sandboxio-smoke | grep -qx sandboxio-smoke-ok || { k8s_log "smoke pod printed the wrong thing"; exit 1; }
	k8s_log "smoke pod Succeeded at $(elapsed) s"
	wait_for "the smoke Sandbox" 240 sandbox_ready
	k8s_log "smoke Sandbox Ready at $(elapsed) s"
	k8s_kubectl delete pod/sandboxio-smoke sandbox.agents.x-k8s.io/sandboxio-smoke-sandbox --wait=false >/dev/null
}

sandbox_ready() {
	[ "$(k8s_kubectl get sandbox.agents.x-k8s.io/sandboxio-smoke-sandbox \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

smoke_done() {
	local phase
	phase=$(k8s_kubectl get pod sandboxio-smoke -o jsonpath='{.status.phase}')
	if [ "$phase" = Failed ]; then
		k8s_log "smoke pod Failed"
		exit 1
	fi
	[ "$phase" = Succeeded ]
}
