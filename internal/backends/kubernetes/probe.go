package kubernetes

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const probeMarker = "\x1esandboxio-probe\x1e "

// wrapProtocol is the wrapper's exec-block format (package wrap).
const wrapProtocol = "sandboxio-wrap/1"

// nodeFactsTTL bounds how long a node's measured process ceiling is
// trusted: the kubelet's podPidsLimit changes only on a restart.
const nodeFactsTTL = 10 * time.Minute

type nodeFacts struct {
	ceiling int
	at      time.Time
	kernel  string // the node's kernel as its status says, "" until read
}

// parseProbe reads the wrapper's probe line into key=value facts.
func parseProbe(out []byte) (map[string]string, bool) {
	s := string(out)
	i := strings.LastIndex(s, probeMarker)
	if i < 0 {
		return nil, false
	}
	line, _, _ := strings.Cut(s[i+len(probeMarker):], "\n")
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, false
		}
		m[k] = v
	}
	return m, m["protocol"] != ""
}

// verified is what the probe showed from inside one pod.
type verified struct {
	tier    model.Tier
	pidsCap string
	swap    string
}

func refuse(attr, msg, fix string) error {
	return &model.Error{Class: model.ErrCapabilityNotSupported, Attribute: attr, Message: msg, Fix: fix}
}

// verify runs the probe in a started pod and checks, from inside, what the
// pod spec asked for: no capabilities, no_new_privs, seccomp, a read-only
// root, the memory cap bounding swap, a process ceiling, and the tier.
// What cannot be shown is refused with the reason.
func (b *k8sBackend) verify(ctx context.Context, s *sandbox, p createPlan, node string) (verified, error) {
	var v verified
	b.mu.Lock()
	nf, known := b.nodes[node]
	b.mu.Unlock()
	fresh := known && time.Since(nf.at) < nodeFactsTTL
	cmd := []string{wrapBin, "probe"}
	if fresh {
		cmd = append(cmd, "nofill")
	}
	res, err := b.exec(ctx, s.name, cmd, nil, nil, execOut{})
	if err != nil {
		return v, fmt.Errorf("probe: %w", err)
	}
	b.step("probe-exec")
	if res.stopped != nil {
		return v, fmt.Errorf("probe: %w", res.stopped)
	}
	f, ok := parseProbe(res.stdout)
	if !ok || f["protocol"] != wrapProtocol {
		return v, fmt.Errorf("probe: no report from the wrapper (exit %d): %.300s", res.exitCode, strings.TrimSpace(string(res.stdout)+" "+string(res.stderr)))
	}
	if err := checkHardening(f); err != nil {
		return v, err
	}
	if err := checkLock(f, p.egress); err != nil {
		return v, err
	}
	if v.swap, err = checkMemory(f, p.caps.MemoryMB); err != nil {
		return v, err
	}
	ceiling := nf.ceiling
	if !fresh {
		if f["pids_refused"] != "eagain" {
			return v, refuse("resources.pids", fmt.Sprintf("no process ceiling could be shown from inside the pod: a process creating threads was not refused with EAGAIN (%s), so the node's kubelet sets no podPidsLimit", f["pids_refused"]),
				"set podPidsLimit in the kubelet configuration of the cluster's nodes")
		}
		if ceiling, err = strconv.Atoi(f["pids_ceiling"]); err != nil || ceiling <= 0 {
			return v, refuse("resources.pids", "the process ceiling measured from inside the pod is unreadable: "+f["pids_ceiling"], "set podPidsLimit in the kubelet configuration")
		}
		b.mu.Lock()
		b.nodes[node] = nodeFacts{ceiling: ceiling, at: time.Now()}
		b.mu.Unlock()
	}
	v.pidsCap = fmt.Sprintf("node %s podPidsLimit: a thread was refused with EAGAIN at %d tasks in the sandbox container, measured from inside the pod (not settable per sandbox)", node, ceiling)
	if v.tier, err = b.confirmTier(ctx, f["kernel"], node, p); err != nil {
		return v, err
	}
	return v, nil
}

func checkHardening(f map[string]string) error {
	switch {
	case f["cap_eff"] != "0000000000000000":
		return refuse("backend", "a process in the pod holds capabilities (CapEff "+f["cap_eff"]+"), though all were dropped in the pod spec: something on the cluster changed the spec", "check the cluster's mutating admission webhooks")
	case f["no_new_privs"] != "1":
		return refuse("backend", "no_new_privs is not set inside the pod (allowPrivilegeEscalation false was not applied)", "check the cluster's admission and runtime")
	case f["seccomp"] != "2":
		return refuse("backend", "no seccomp filter applies inside the pod (Seccomp "+f["seccomp"]+"), though RuntimeDefault was asked for", "use a container runtime that applies its default seccomp profile")
	case f["root_ro"] != "true":
		return refuse("resources.disk_mb", "the pod's root filesystem is writable, so the disk cap would not hold", "check the cluster's admission and runtime")
	}
	return nil
}

// checkMemory shows the memory cap applied and swap bounded by it.
func checkMemory(f map[string]string, memoryMB int64) (string, error) {
	want := strconv.FormatInt(memoryMB<<20, 10)
	switch {
	case f["mem_limit"] != "-":
		if f["mem_limit"] != want {
			return "", refuse("resources.memory_mb", fmt.Sprintf("the memory cgroup's limit inside the pod is %s bytes, not %s", f["mem_limit"], want), "check the kubelet's cgroup settings")
		}
		switch {
		case f["memsw_limit"] == f["mem_limit"]:
			return "memory.memsw.limit_in_bytes = memory.limit_in_bytes (cgroup v1)", nil
		case f["memsw_limit"] == "-" && f["swap_total_kb"] == "0":
			return "no swap accounting, and no swap on the node when the pod started", nil
		}
		return "", refuse("resources.memory_mb", fmt.Sprintf("the memory cap does not bound swap on this node (memsw limit %s, swap %s kB)", f["memsw_limit"], f["swap_total_kb"]),
			"run the pods on nodes without swap, or with swap accounting and the kubelet's memorySwap behaviour NoSwap")
	case f["mem_max_v2"] != "-":
		if f["mem_max_v2"] != want {
			return "", refuse("resources.memory_mb", fmt.Sprintf("memory.max inside the pod is %s, not %s", f["mem_max_v2"], want), "check the kubelet's cgroup settings")
		}
		if f["swap_max_v2"] == "0" || (f["swap_max_v2"] == "-" && f["swap_total_kb"] == "0") {
			return "memory.swap.max = 0 (cgroup v2)", nil
		}
		return "", refuse("resources.memory_mb", "memory.swap.max inside the pod is "+f["swap_max_v2"]+": swap is not bounded by the memory cap", "set the kubelet's memorySwap swapBehavior to NoSwap")
	}
	return "", refuse("resources.memory_mb", "no memory cgroup limit is visible inside the pod", "check the kubelet's cgroup settings")
}

// confirmTier confirms the tier from inside: a pod that sees the node's own
// kernel shares it, whatever its RuntimeClass is called (CONTAINER). A
// different kernel is a sandbox kernel or a VM, which this probe cannot
// tell apart: UNKNOWN, unverified.
func (b *k8sBackend) confirmTier(ctx context.Context, kernel, node string, p createPlan) (model.Tier, error) {
	nodeKernel, err := b.nodeKernel(ctx, node)
	if err != nil {
		return "", err
	}
	live := model.TierUnknown
	if kernel != "" && kernel == nodeKernel {
		live = model.TierContainer
	}
	if r := p.spec.RequireIsolation; r != "" && !live.Satisfies(r) {
		found := fmt.Sprintf("the pod sees the node's kernel %s, so RuntimeClass %q gives %s, %s is required", kernel, p.runtimeClass, live, r)
		if live == model.TierUnknown {
			found = fmt.Sprintf("the pod's kernel (%s) is not the node's (%s), which does not confirm %s", kernel, nodeKernel, r)
		}
		return live, backends.Backstop(Name, rules.IsoBelow, "require_isolation", found)
	}
	return live, nil
}

// nodeKernel is the node's kernel version from its status, kept with the
// node's other facts for their time to live (a node changes kernels only
// by rebooting; a stale value can only fail to match, which gives UNKNOWN,
// never a tier that is not there).
func (b *k8sBackend) nodeKernel(ctx context.Context, node string) (string, error) {
	b.mu.Lock()
	nf, ok := b.nodes[node]
	b.mu.Unlock()
	if ok && nf.kernel != "" && time.Since(nf.at) < nodeFactsTTL {
		return nf.kernel, nil
	}
	n, err := b.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", apiError("node get", err)
	}
	k := n.Status.NodeInfo.KernelVersion
	b.mu.Lock()
	if e, ok := b.nodes[node]; ok {
		e.kernel = k
		b.nodes[node] = e
	}
	b.mu.Unlock()
	return k, nil
}
