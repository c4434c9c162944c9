package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Warm sandboxes (warm pools), the backend's own: pods (or Sandboxes) created
// ahead from a template spec by a cold open's create and probe, with no tenant,
// session or secret. agent-sandbox's SandboxWarmPool is not used: its pods have
// no owner the reaper could judge and no idle bound. An unclaimed pod's
// activeDeadlineSeconds is idle + lifetime; a claim binds tenant and session by
// labels and lowers it to one lifetime from the claim, in one patch.
// See docs/design/kubernetes-backend.md.
const (
	labelPool   = model.ReservedLabelPrefix + "pool"        // poolWarm until claimed, then poolClaimed
	annSpecHash = model.ReservedLabelPrefix + "spec_sha256" // the template spec's digest (64 hex digits: too long for a label)
	poolWarm    = "warm"
	poolClaimed = "claimed"
)

type warm struct {
	b         *k8sBackend
	s         *sandbox
	p         createPlan
	uid       types.UID
	idleUntil time.Time

	once backends.WarmOnce
}

// CreateWarm creates one warm sandbox from a template spec.
func (b *k8sBackend) CreateWarm(ctx context.Context, req backends.WarmRequest) (backends.Warm, error) {
	if err := backends.CheckWarmRequest(req); err != nil {
		return nil, err
	}
	p, err := b.validate(backends.CreateRequest{Spec: req.Spec, Timeout: req.Timeout}, false)
	if err != nil {
		return nil, err
	}
	p.secrets = nil
	p.warmIdle = time.Duration(math.Ceil(req.MaxIdle.Seconds())) * time.Second
	p.warmSpecHash = req.SpecSHA256
	if b.namespace == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: "no namespace to create the warm sandbox in", Fix: "open the backend with kubernetes://CONTEXT/NAMESPACE"}
	}
	cctx, cancel := context.WithTimeout(ctx, p.createTimeout)
	defer cancel()
	s, err := b.create(cctx, p)
	if err != nil {
		return nil, backends.WarmCreateError(ctx, cctx, p.createTimeout, "check the cluster's load", err)
	}
	w := &warm{b: b, s: s, p: p, uid: s.createdUID, idleUntil: s.created.Add(p.warmIdle)}
	return w, nil
}

func (w *warm) ID() string           { return w.s.name }
func (w *warm) IdleUntil() time.Time { return w.idleUntil }

// Discard removes the warm sandbox (if it was not claimed); idempotent.
func (w *warm) Discard(ctx context.Context) error {
	return w.once.Discard(ctx, w.remove)
}

// remove ends a warm sandbox as Close ends any sandbox: the deletion and
// then no container of the pod running are confirmed within the teardown
// grace, and what cannot be confirmed is an *OrphanedError with the pod's
// name and labels (the pool audits it and warns), not a plain error.
func (w *warm) remove(ctx context.Context) error {
	return w.s.Close(ctx)
}

// Claim binds the warm sandbox to the tenant and session of req.Spec; any
// failure removes it.
func (w *warm) Claim(ctx context.Context, req backends.ClaimRequest) (backends.Sandbox, error) {
	return w.once.Claim(ctx, func(ctx context.Context) (backends.Sandbox, error) { return w.claim(ctx, req) }, w.remove)
}

// claim checks, from the API server's view, that the pod is the one created
// and probed (same uid, running, not restarted, unchanged image and
// deadline, no ephemeral container added), then writes the binding and the
// new deadline in one patch. The claim runs no command in the pod: nothing
// has run in it since the probe at its creation.
func (w *warm) claim(ctx context.Context, req backends.ClaimRequest) (*sandbox, error) {
	b := w.b
	p, err := backends.PlanClaim(req, b.validate, func(p createPlan) error { return samePlan(w.p, p) },
		w.p.warmSpecHash, w.idleUntil, w.tampered)
	if err != nil {
		return nil, err
	}
	lbls := maps.Clone(w.s.labels)
	maps.Copy(lbls, p.labels)
	lbls[labelPool] = poolClaimed
	claimed := time.Now()
	// The kubelet's status updates (and with agent-sandbox its controller)
	// write the pod too: a conflict checks it again. With agent-sandbox the
	// Sandbox is bound first, so that its controller, which keeps the pod's
	// labels from the Sandbox's template, moves them the same way.
	sandboxBound := false
	for try := 0; ; try++ {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, w.s.name, metav1.GetOptions{})
		if err != nil {
			return nil, apiError("warm pod get", err)
		}
		if err := w.unchanged(pod, sandboxBound, lbls); err != nil {
			return nil, err
		}
		if b.api == APIAgentSandbox && !sandboxBound {
			if err := w.bindSandbox(ctx, claimed, p, lbls); err != nil {
				return nil, err
			}
			sandboxBound = true
		}
		err = w.bind(ctx, pod, claimed, p, lbls)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || try == 4 {
			return nil, err
		}
	}
	ws := w.s
	s := &sandbox{b: b, name: ws.name, tier: ws.tier, caps: ws.caps, callTimeout: p.callTimeout, created: claimed,
		expires: claimed.Add(p.lifetime), labels: lbls, env: p.env, secrets: p.secrets, onWarning: p.onWarning,
		diskCap: ws.diskCap, pidsCap: ws.pidsCap, swap: ws.swap, podUID: ws.podUID, createdUID: ws.createdUID}
	if req.OnWarning != nil {
		ow := backends.RuleWarning(model.OpenEgressWarning, rules.NetOpenEgress, "network.egress")
		ow.SandboxID, ow.Labels = s.name, maps.Clone(lbls)
		req.OnWarning(ow)
	}
	return s, nil
}

func (w *warm) tampered(why string) error {
	return &model.Error{Class: model.ErrSandboxGone, Attribute: "warm_pool",
		Message: fmt.Sprintf("warm sandbox %s was refused: %s; it was removed", w.s.name, why),
		Fix:     "find out what changes sandboxio's pods on this cluster; a cold open is not affected"}
}

// unchanged checks the pod as the API server describes it. Once the
// Sandbox is bound (agent-sandbox), its controller may have given the pod
// the claim's labels already: those are accepted, and only those.
func (w *warm) unchanged(pod *corev1.Pod, sandboxBound bool, claim map[string]string) error {
	want := podFor(w.p, w.s.name, nil, nil)
	c := pod.Spec.Containers
	switch {
	case pod.UID != w.uid:
		return w.tampered("its pod was replaced")
	case pod.DeletionTimestamp != nil:
		return w.tampered("its pod is being deleted")
	case !w.poolState(pod, sandboxBound, claim) || pod.Labels[labelOwner] != w.b.owner.ID || pod.Annotations[annSpecHash] != w.p.warmSpecHash:
		return w.tampered("its pool, owner or spec digest label does not match")
	case len(pod.Spec.EphemeralContainers) > 0:
		return w.tampered("an ephemeral container was added to its pod")
	case len(c) != 1 || c[0].Image != want.Spec.Containers[0].Image:
		return w.tampered("its image was changed")
	case pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds != int64((w.p.warmIdle+w.p.lifetime)/time.Second):
		return w.tampered("its activeDeadlineSeconds was changed")
	case pod.Status.StartTime == nil:
		return w.tampered("its pod has no start time")
	}
	if !sandboxRunning(pod) {
		return w.tampered("its container is not running")
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			return w.tampered("its container restarted")
		}
	}
	return nil
}

// bind writes the tenant's labels, the new expiry and the lowered deadline
// (counted, as the kubelet does, from the pod's start time, which has whole
// seconds: the lifetime from the claim is at least the one asked for, and
// at most a second more), as a compare-and-swap on the pod checked.
func (w *warm) bind(ctx context.Context, pod *corev1.Pod, claimed time.Time, p createPlan, lbls map[string]string) error {
	b := w.b
	expires := claimed.Add(p.lifetime)
	deadline := int64(math.Ceil(claimed.Sub(pod.Status.StartTime.Time).Seconds() + p.lifetime.Seconds()))
	if deadline > *pod.Spec.ActiveDeadlineSeconds {
		return &model.Error{Class: model.ErrSandboxGone, Message: "the warm sandbox's idle time is over", Fix: "open a new sandbox"}
	}
	ann := map[string]string{annExpires: expires.UTC().Format(time.RFC3339)}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": lbls, "annotations": ann, "resourceVersion": pod.ResourceVersion},
		"spec":     map[string]any{"activeDeadlineSeconds": deadline},
	})
	if err != nil {
		return err
	}
	// The resourceVersion makes it a compare-and-swap on the pod checked.
	if _, err := b.cs.CoreV1().Pods(b.namespace).Patch(ctx, w.s.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiError("warm pod claim", err)
	}
	return nil
}

// bindSandbox writes the claim into the Sandbox: the labels (on it and on
// its pod template) and the shutdownTime one lifetime after the claim.
func (w *warm) bindSandbox(ctx context.Context, claimed time.Time, p createPlan, lbls map[string]string) error {
	expires := claimed.Add(p.lifetime)
	meta := map[string]any{"labels": lbls, "annotations": map[string]string{annExpires: expires.UTC().Format(time.RFC3339)}}
	patch, err := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]any{
		"podTemplate":  map[string]any{"metadata": meta},
		"shutdownTime": expires.Add(time.Second - 1).UTC().Truncate(time.Second).Format(time.RFC3339),
	}})
	if err != nil {
		return err
	}
	if _, err := w.b.dyn.Resource(sandboxGVR).Namespace(w.b.namespace).Patch(ctx, w.s.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return apiError("warm sandbox claim", err)
	}
	return nil
}

// poolState: the pod is still warm, or (the Sandbox being bound) carries
// exactly the claim's labels.
func (w *warm) poolState(pod *corev1.Pod, sandboxBound bool, claim map[string]string) bool {
	return pod.Labels[labelPool] == poolWarm || (sandboxBound && hasLabels(pod.Labels, claim))
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// samePlan refuses a claim whose per-tenant spec would not have created the
// warm sandbox: anything but the tenant, session and secrets differs.
func samePlan(w, p createPlan) error {
	same := w.runtimeClass == p.runtimeClass && w.tier == p.tier && w.caps == p.caps && w.lifetime == p.lifetime &&
		w.callTimeout == p.callTimeout && slices.Equal(w.env, p.env) && w.spec.Image == p.spec.Image &&
		w.spec.Network.Normalized().Egress == p.spec.Network.Normalized().Egress
	return backends.SamePlan(same, w.labels, p.labels)
}
