package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The egress probe: three short-lived pods of the wrapper's image, reaped like
// sandboxes: a listener; a control client with no lock, which must reach it
// (so "blocked" cannot come from a broken pod network); and a client under the
// mode's lock, whose connects its own kernel must refuse, which the listener
// must never see, and which must fail to undo the lock. cidr mode is proven
// with a documentation range as its allow list.

const (
	probePort    = "7181"
	probeTimeout = 120 * time.Second
	probeAllowed = "198.18.0.1" // in the cidr mode's allow list, 198.18.0.0/15
	probeOutside = "203.0.113.1"
)

var probeAllow = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}

// probeRuns counts the probes run (the cache's test).
var probeRuns atomic.Int64

// proveLock runs the probe for a mode in the backend's namespace.
func (b *k8sBackend) proveLock(ctx context.Context, mode string) error {
	probeRuns.Add(1)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	lockouts, err := b.lockouts(ctx)
	if err != nil {
		return err
	}
	id := randomHex(4)
	lis, ctl, lkd := "sandboxio-probe-"+id+"-listen", "sandboxio-probe-"+id+"-control", "sandboxio-probe-"+id+"-"+mode
	probe := "egress/" + mode + " (pods " + lkd + ", " + ctl + ", " + lis + ")"
	defer func() {
		for _, n := range []string{lis, ctl, lkd} {
			b.discard(ctx, n)
		}
	}()
	if err := b.createProbePod(ctx, lis, []string{wrapBinInImage, "listen", probePort}, nil); err != nil {
		return probeFailed(probe, "listener pod: "+err.Error())
	}
	ip, err := b.waitPodIP(ctx, lis)
	if err != nil {
		return probeFailed(probe, "listener pod: "+err.Error())
	}
	target := ip + ":" + probePort
	if err := b.createProbePod(ctx, ctl, []string{wrapBinInImage, "netprobe", target}, nil); err != nil {
		return probeFailed(probe, "control pod: "+err.Error())
	}
	var allow []netip.Prefix
	if mode == lockCIDR {
		allow = probeAllow
	}
	lc := lockContainer(lockArgs(mode, lockouts, allow))
	err = b.createProbePod(ctx, lkd, []string{wrapBinInImage, "netprobe", target, "gw:" + probePort, "route:" + probeAllowed, "route:" + probeOutside}, &lc)
	if err != nil {
		if f := b.lockForbidden(probe, err); f != nil {
			return f
		}
		return probeFailed(probe, "locked pod: "+err.Error())
	}
	ctlOut, err := b.probeResult(ctx, ctl, "")
	if err != nil {
		return probeFailed(probe, err.Error())
	}
	lkdOut, err := b.probeResult(ctx, lkd, lockCtr)
	if err != nil {
		return probeFailed(probe, err.Error())
	}
	accepted, err := b.acceptedFrom(ctx, lis, ctlOut["self"])
	if err != nil {
		return probeFailed(probe, err.Error())
	}
	if why := judge(mode, target, ctlOut, lkdOut, accepted); why != "" {
		return probeFailed(probe, why)
	}
	return nil
}

func probeFailed(probe, why string) error {
	return &model.Error{Class: model.ErrCapabilityNotSupported, Attribute: "network.egress",
		Message: fmt.Sprintf("egress probe %s failed: %s; the egress policy cannot be shown to hold on this cluster, so it is refused", probe, why),
		Fix:     "run the backend in a namespace where init containers may add NET_ADMIN and the wrapper image " + WrapImage + " is on the nodes, then apply again; or use egress = \"allow\" only where that probe passes"}
}

// judge is the verdict on the probe's reports; "" when the lock held.
func judge(mode, target string, ctl, lkd map[string]string, accepted []string) string {
	blocked := func(v string) bool { return v == "network_is_unreachable" || v == "no_route_to_host" }
	switch {
	case ctl["connect:"+target] != "ok" || !sharesAddr(accepted, ctl["self"]):
		return fmt.Sprintf("the control pod (no lock) did not reach the listener (%s; listener saw %v), so the probe cannot tell blocked from broken", ctl["connect:"+target], accepted)
	case lkd["lock"] != wantLock(mode):
		return fmt.Sprintf("the lock read back from inside the locked pod is %q, not %q", lkd["lock"], wantLock(mode))
	case !blocked(lkd["connect:"+target]):
		return fmt.Sprintf("the locked pod's connect to another pod's listener gave %q, not a refusal by its own routes", lkd["connect:"+target])
	case sharesAddr(accepted, lkd["self"]):
		return fmt.Sprintf("the listener accepted a connection from the locked pod (%s)", lkd["self"])
	case !blocked(lkd["connect:gw:"+probePort]):
		return fmt.Sprintf("the locked pod's connect to the node's bridge address gave %q, not a refusal by its own routes", lkd["connect:gw:"+probePort])
	case mode == lockDeny && lkd["links_up"] != "lo":
		return fmt.Sprintf("under deny, links other than lo are up: %s", lkd["links_up"])
	}
	allowed, outside := lkd["route:"+probeAllowed], lkd["route:"+probeOutside]
	switch mode {
	case lockDeny:
		if allowed != "unreachable" || outside != "unreachable" {
			return fmt.Sprintf("under deny, addresses outside the cluster are routed (%s: %s, %s: %s)", probeAllowed, allowed, probeOutside, outside)
		}
	case lockCIDR:
		if !strings.HasPrefix(allowed, "via_") || outside != "unreachable" {
			return fmt.Sprintf("under the allow list 198.18.0.0/15, %s is %s (want routed through the gateway) and %s is %s (want unreachable)", probeAllowed, allowed, probeOutside, outside)
		}
	case lockAllow:
		if !strings.HasPrefix(outside, "via_") {
			return fmt.Sprintf("under open egress, %s outside the cluster is %s, not routed through the gateway", probeOutside, outside)
		}
	}
	for _, u := range strings.Split(lkd["undo"], ",") {
		if _, res, _ := strings.Cut(u, ":"); res != "eperm" {
			return fmt.Sprintf("the sandboxed process could act on the lock: %s (want eperm for every attempt: %s)", u, lkd["undo"])
		}
	}
	return ""
}

func wantLock(mode string) string {
	if mode == lockCIDR {
		return fmt.Sprintf("cidr:%d", len(probeAllow))
	}
	return mode
}

// sharesAddr reports whether any of the comma-separated addresses was seen.
func sharesAddr(seen []string, addrs string) bool {
	for _, a := range strings.Split(addrs, ",") {
		if a != "" && slices.Contains(seen, a) {
			return true
		}
	}
	return false
}

// createProbePod creates one of the probe's pods, hardened as a sandbox
// pod is, with lock as its init container when given.
func (b *k8sBackend) createProbePod(ctx context.Context, name string, cmd []string, lock *corev1.Container) error {
	no, yes := false, true
	deadline := int64(math.Ceil(probeTimeout.Seconds()))
	res := corev1.ResourceList{corev1.ResourceCPU: qty("100m"), corev1.ResourceMemory: qty("32Mi"), corev1.ResourceEphemeralStorage: qty("16Mi")}
	lbls := map[string]string{model.LabelManaged: "true", labelOwner: b.owner.ID, labelProbe: "egress"}
	ann := ownerAnnotations(b.owner)
	ann[annExpires] = time.Now().Add(probeTimeout).UTC().Format(time.RFC3339)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, Annotations: maps.Clone(ann)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, ActiveDeadlineSeconds: &deadline,
			AutomountServiceAccountToken: &no, EnableServiceLinks: &no, TerminationGracePeriodSeconds: ptr(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: WrapImage, ImagePullPolicy: corev1.PullNever, Command: cmd,
				SecurityContext: &corev1.SecurityContext{
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					AllowPrivilegeEscalation: &no, Privileged: &no, ReadOnlyRootFilesystem: &yes,
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
	if lock != nil {
		pod.Spec.InitContainers = []corev1.Container{*lock}
	}
	_, err := b.cs.CoreV1().Pods(b.namespace).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// waitPodIP waits for a pod to run and returns its IP.
func (b *k8sBackend) waitPodIP(ctx context.Context, name string) (string, error) {
	for {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", apiError("pod get", err)
		}
		if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
			return pod.Status.PodIP, nil
		}
		if err := startFailure(pod, createPlan{}); err != nil {
			return "", err
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return "", fmt.Errorf("pod %s did not run: %w", name, err)
		}
	}
}

// probeResult waits for a client pod to end and parses its report. A pod
// whose lock failed ends with the lock container's error, which is named.
func (b *k8sBackend) probeResult(ctx context.Context, name, lockName string) (map[string]string, error) {
	for {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, apiError("pod get", err)
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			out, err := b.logs(ctx, name, "probe")
			if err != nil {
				return nil, err
			}
			return parseNet(out), nil
		case corev1.PodFailed:
			msg := pod.Status.Reason + " " + pod.Status.Message
			if lockName != "" {
				if out, err := b.logs(ctx, name, lockName); err == nil {
					msg += " lock: " + strings.TrimSpace(out)
				}
			}
			return nil, fmt.Errorf("pod %s failed: %.400s", name, strings.TrimSpace(msg))
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, fmt.Errorf("pod %s did not finish: %w", name, err)
		}
	}
}

// acceptedFrom reads the listener's accepted peers, waiting (a few seconds
// at most) until the control's connection shows, so that the log is known
// to be current when the locked pod's address is looked for in it.
func (b *k8sBackend) acceptedFrom(ctx context.Context, name, control string) ([]string, error) {
	end := time.Now().Add(10 * time.Second)
	for {
		out, err := b.logs(ctx, name, "probe")
		if err != nil {
			return nil, err
		}
		var seen []string
		for _, line := range strings.Split(out, "\n") {
			if i := strings.Index(line, netMarker+"accept="); i >= 0 {
				seen = append(seen, strings.TrimSpace(line[i+len(netMarker+"accept="):]))
			}
		}
		if sharesAddr(seen, control) || time.Now().After(end) {
			return seen, nil
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return seen, nil
		}
	}
}

const netMarker = "\x1esandboxio-net\x1e "

// parseNet reads the wrapper's netprobe report (key=value lines).
func parseNet(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, netMarker)
		if i < 0 {
			continue
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(line[i+len(netMarker):]), "="); ok {
			m[k] = v
		}
	}
	return m
}

func (b *k8sBackend) logs(ctx context.Context, pod, container string) (string, error) {
	raw, err := b.cs.CoreV1().Pods(b.namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", apiError("pod logs", err)
	}
	return string(raw), nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
