package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Create provisions one sandbox pod, waits for it to run, and shows from
// inside it that what was asked for holds; a pod that does not is removed
// and the create refused.
func (b *k8sBackend) Create(ctx context.Context, req backends.CreateRequest) (backends.Sandbox, error) {
	p, err := b.validate(req, true)
	if err != nil {
		return nil, err
	}
	if b.namespace == "" {
		return nil, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: "no namespace to create the sandbox pod in", Fix: "open the backend with kubernetes://CONTEXT/NAMESPACE"}
	}
	cctx, cancel := context.WithTimeout(ctx, p.createTimeout)
	defer cancel()
	s, err := b.create(cctx, p)
	if err == nil {
		return s, nil
	}
	if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		fix := "raise timeout_seconds (or the create timeout), or check the cluster's load and the pod's events"
		if b.api == APIAgentSandbox {
			fix += "; with agent-sandbox, check that its controller runs (a Sandbox without one never gets a pod)"
		}
		return nil, &model.Error{Class: model.ErrCreateTimeout,
			Message: fmt.Sprintf("the sandbox pod was not ready within %s; it is being removed", p.createTimeout), Fix: fix, Err: err}
	}
	return nil, err
}

func (b *k8sBackend) create(ctx context.Context, p createPlan) (*sandbox, error) {
	name := "sandboxio-" + randomHex(6)
	created := time.Now()
	// A warm sandbox (pool.go) lives at most its idle time and then its
	// lifetime from a claim at the last moment; the claim shortens it.
	bound, shutdown := p.lifetime, created.Add(p.lifetime)
	lbls := maps.Clone(p.labels)
	lbls[labelOwner] = b.owner.ID
	ann := ownerAnnotations(b.owner)
	if p.warmIdle > 0 {
		bound += p.warmIdle
		shutdown = created.Add(p.warmIdle)
		lbls[labelPool] = poolWarm
		ann[annSpecHash] = p.warmSpecHash
	}
	expires := created.Add(bound)
	ann[annExpires] = expires.UTC().Format(time.RFC3339)
	ann[annTier] = string(p.tier)
	ann[annDiskCap] = diskDescription(p.caps.DiskMB)
	if err := b.ensureLock(ctx, &p); err != nil {
		return nil, err
	}
	pp := p
	pp.lifetime = bound
	pod := podFor(pp, name, lbls, ann)
	withLock(pod, pp)
	if err := b.createObject(ctx, pod, shutdown); err != nil {
		if !refusedOutright(err) {
			// A create cut short, or whose answer was lost, may have
			// landed: the name is this create's alone.
			b.discard(ctx, name)
		}
		return nil, err
	}
	b.step("create")
	s := &sandbox{b: b, name: name, caps: p.caps, callTimeout: p.callTimeout, created: created, expires: expires,
		labels: lbls, env: p.env, secrets: p.secrets, onWarning: p.onWarning, diskCap: diskDescription(p.caps.DiskMB)}
	pod, err := b.waitRunning(ctx, name, p)
	if err == nil {
		b.step("running")
		s.createdUID = pod.UID
		if b.api == APIAgentSandbox {
			s.podUID = pod.UID
		}
		var v verified
		if v, err = b.verify(ctx, s, p, pod.Spec.NodeName); err == nil {
			s.tier, s.pidsCap, s.swap = v.tier, v.pidsCap, v.swap
			b.step("verify")
			err = b.annotate(ctx, name, map[string]string{annTier: string(v.tier), annPidsCap: v.pidsCap})
			b.step("annotate")
		}
	}
	if err != nil {
		b.discard(ctx, name)
		return nil, err
	}
	if p.onWarning != nil {
		if s.tier == model.TierUnknown {
			p.onWarning(model.Warning{Class: model.UnverifiedIsolationWarning, SandboxID: name, Labels: maps.Clone(lbls),
				Message: "the pod's kernel is not the node's, and no sandbox kernel or VM was identified: its isolation tier is UNKNOWN",
				Fix:     "set require_isolation to refuse what cannot be confirmed"})
		}
		if p.egress.mode == lockAllow {
			w := backends.RuleWarning(model.OpenEgressWarning, rules.NetOpenEgress, "network.egress")
			w.SandboxID, w.Labels = name, maps.Clone(lbls)
			p.onWarning(w)
		}
	}
	return s, nil
}

// createObject creates the sandbox's pod, or with ?api=agent-sandbox the
// Sandbox whose template it is.
func (b *k8sBackend) createObject(ctx context.Context, pod *corev1.Pod, expires time.Time) error {
	if b.api == APIAgentSandbox {
		return b.createSandboxObject(ctx, pod, expires)
	}
	pods := b.cs.CoreV1().Pods(b.namespace)
	err := createWithLook(ctx, func(ctx context.Context) error {
		_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		return err
	}, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return b.landed(p, err)
	})
	if err != nil {
		return createRefused("sandbox pod", pod.Name, err)
	}
	return nil
}

// landed reads a look after a create whose outcome is unknown: the object
// is there and this process made it, or it is absent. Anything else of
// that name is an error.
func (b *k8sBackend) landed(obj metav1.Object, err error) (bool, error) {
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	case obj.GetLabels()[labelOwner] != b.owner.ID:
		return false, fmt.Errorf("an object named %s exists that this process did not create", obj.GetName())
	}
	return true, nil
}

// annotate merges annotations into the pod.
func (b *k8sBackend) annotate(ctx context.Context, name string, ann map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = b.cs.CoreV1().Pods(b.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return apiError("pod annotate", err)
	}
	if b.api == APIAgentSandbox {
		// The controller resets the pod's metadata to its template's.
		return b.patchSandboxMeta(ctx, name, nil, ann)
	}
	return nil
}

// waitRunning waits until the sandbox container runs and returns its pod.
// A pod that cannot start for its configuration (image, wrapper image,
// RuntimeClass) is a ConfigurationError naming the reason.
func (b *k8sBackend) waitRunning(ctx context.Context, name string, p createPlan) (*corev1.Pod, error) {
	events, stop := b.podEvents(ctx, name)
	defer stop()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			if err := startFailure(pod, p); err != nil {
				return nil, err
			}
			if sandboxRunning(pod) {
				return pod, nil
			}
		case apierrors.IsNotFound(err) && b.api == APIAgentSandbox:
			// The controller has not made the pod yet.
			if err := b.sandboxStuck(ctx, name); err != nil {
				return nil, err
			}
		default:
			return nil, apiError("pod get", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for pod %s: %w", name, ctx.Err())
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case <-time.After(wait):
		}
	}
}

// podEvents wakes a poll loop as soon as the pod changes, so that it need
// not wait for its next tick: a watch on the pod. The loop still reads the
// pod itself each time; when no watch can be opened, or it ends, only the
// timer wakes it.
func (b *k8sBackend) podEvents(ctx context.Context, name string) (<-chan watch.Event, func()) {
	w, err := b.cs.CoreV1().Pods(b.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, func() {}
	}
	return w.ResultChan(), w.Stop
}

// sandboxRunning reports whether the sandbox container runs.
func sandboxRunning(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sandboxCtr && cs.State.Running != nil {
			return true
		}
	}
	return false
}

// startFailure names why a pod will not start, or nil while it may.
func startFailure(pod *corev1.Pod, p createPlan) error {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return fmt.Errorf("pod %s ended before it ran: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "resources",
				Message: "no node can take the sandbox pod: " + c.Message, Fix: "lower the caps, or add capacity"}
		}
	}
	all := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range all {
		w := cs.State.Waiting
		if w == nil {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return fmt.Errorf("container %s of pod %s ended with exit code %d: %s %s", cs.Name, pod.Name, t.ExitCode, t.Reason, t.Message)
			}
			continue
		}
		switch w.Reason {
		case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
			img := p.spec.Image
			fix := "make the image available to the cluster's nodes (a registry they can pull from, or imported into the node's runtime)"
			if cs.Name != sandboxCtr {
				img = WrapImage
				fix = "build the wrapper image " + WrapImage + " from cmd/sandboxio-k8s-wrap (static, CGO_ENABLED=0, entrypoint /wrap) and import it into the nodes' runtime"
			}
			return &model.Error{Class: model.ErrConfiguration, Attribute: "image",
				Message: fmt.Sprintf("image %s cannot be run on the node: %s %s", img, w.Reason, w.Message), Fix: fix}
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return &model.Error{Class: model.ErrConfiguration, Attribute: "image",
				Message: fmt.Sprintf("the node cannot start container %s: %s %s", cs.Name, w.Reason, w.Message), Fix: "check the image and the RuntimeClass"}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "RuntimeHandler") {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Message: "the RuntimeClass's handler is unknown on the node: " + c.Message, Fix: "name a RuntimeClass whose handler the node's runtime has"}
		}
	}
	return nil
}

// discard removes a pod that failed half-way, shielded from ctx.
func (b *k8sBackend) discard(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.grace)
	defer cancel()
	_ = b.remove(dctx, b.namespace, name, b.api == APIAgentSandbox)
}

// deletePod deletes a pod with a grace of one second, not zero: with zero the
// API server forgets the pod before the kubelet has killed anything, and its
// absence would prove nothing. Gone already is success.
func (b *k8sBackend) deletePod(ctx context.Context, name string) error {
	return b.deletePodIn(ctx, b.namespace, name)
}

// deletePodIn is deletePod in a namespace of its own (a sweep of every
// namespace by reap).
func (b *k8sBackend) deletePodIn(ctx context.Context, ns, name string) error {
	err := b.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return apiError("pod delete", err)
}

// stopped waits until no container of the pod runs (or it is gone).
func (b *k8sBackend) stopped(ctx context.Context, name string) error {
	events, stop := b.podEvents(ctx, name)
	defer stop()
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil && !anyRunning(pod):
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("a container still runs")
			}
			return fmt.Errorf("pod kill not confirmed: %w (%w)", ctx.Err(), err)
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case <-time.After(wait):
		}
	}
}

func anyRunning(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}
