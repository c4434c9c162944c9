package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// agent-sandbox (kubernetes-sigs/agent-sandbox) objects, for ?api=agent-sandbox,
// written as unstructured objects through client-go's dynamic client: the
// project's Go types would bring controller-runtime and more into the module
// graph for one struct. The shape is v1beta1's, the storage version. The pod
// template is podFor's spec, so the hardening applies to both paths; the
// lifetime is both activeDeadlineSeconds (kubelet) and shutdownTime with
// shutdownPolicy Delete (controller).
const (
	APIPod          = "pod"
	APIAgentSandbox = "agent-sandbox"
)

// shutdownSlack delays the controller's shutdownTime past the lifetime; a
// test sets it to show the kubelet's activeDeadlineSeconds alone.
var shutdownSlack time.Duration

var sandboxGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}

// sandboxObject is the v1beta1 Sandbox around a pod built by podFor.
func sandboxObject(pod *corev1.Pod, expires time.Time) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod.Spec)
	if err != nil {
		return nil, fmt.Errorf("sandbox object: %w", err)
	}
	tmplMeta := map[string]any{"labels": toAny(pod.Labels), "annotations": toAny(pod.Annotations)}
	obj := map[string]any{
		"apiVersion": sandboxGVR.GroupVersion().String(),
		"kind":       "Sandbox",
		"metadata": map[string]any{
			"name":        pod.Name,
			"labels":      toAny(pod.Labels),
			"annotations": toAny(pod.Annotations),
		},
		"spec": map[string]any{
			"podTemplate": map[string]any{"metadata": tmplMeta, "spec": spec},
			// Rounded up: RFC 3339 here has whole seconds, and the
			// controller must not end it before its lifetime.
			"shutdownTime":   expires.Add(shutdownSlack + time.Second - 1).UTC().Truncate(time.Second).Format(time.RFC3339),
			"shutdownPolicy": "Delete",
			"operatingMode":  "Running",
			"service":        false,
		},
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sandboxesServed shows, from the API server's discovery, that it serves
// the Sandbox resource at the version this backend writes.
func (b *k8sBackend) sandboxesServed() error {
	gv := sandboxGVR.GroupVersion().String()
	rl, err := b.cs.Discovery().ServerResourcesForGroupVersion(gv)
	if err == nil {
		for _, r := range rl.APIResources {
			if r.Name == sandboxGVR.Resource {
				return nil
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return apiError("discovery", err)
	}
	return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
		Message: fmt.Sprintf("the cluster does not serve %s sandboxes: the agent-sandbox CRDs are not installed, or not at that version", gv),
		Fix:     "install agent-sandbox v0.5 or later (its CRDs and controller) on the cluster, or drop ?api=agent-sandbox to use plain pods"}
}

// createSandboxObject creates the Sandbox; the controller creates its pod.
func (b *k8sBackend) createSandboxObject(ctx context.Context, pod *corev1.Pod, expires time.Time) error {
	obj, err := sandboxObject(pod, expires)
	if err != nil {
		return err
	}
	res := b.dyn.Resource(sandboxGVR).Namespace(b.namespace)
	err = createWithLook(ctx, func(ctx context.Context) error {
		_, err := res.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}, func(ctx context.Context) (bool, error) {
		u, err := res.Get(ctx, pod.Name, metav1.GetOptions{})
		return b.landed(u, err)
	})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: "the cluster does not serve agents.x-k8s.io/v1beta1 Sandboxes (the agent-sandbox CRDs are not installed, or not at v1beta1): " + err.Error(),
			Fix:     "install agent-sandbox v0.5 or later (its CRDs and controller) on the cluster, or drop ?api=agent-sandbox to use plain pods", Err: err}
	}
	return createRefused("Sandbox", pod.Name, err)
}

// sandboxStuck names why a Sandbox has no pod yet, when its status says;
// nil while it may still come.
func (b *k8sBackend) sandboxStuck(ctx context.Context, name string) error {
	u, err := b.dyn.Resource(sandboxGVR).Namespace(b.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the Sandbox %s was deleted before its pod ran", name)
		}
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["reason"] == "ReconcilerError" {
			return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
				Message: fmt.Sprintf("the agent-sandbox controller cannot make the Sandbox's pod: %v", m["message"]),
				Fix:     "check the namespace's admission policy and the agent-sandbox controller's log"}
		}
	}
	return nil
}

// deleteSandboxIn deletes a Sandbox (gone already, or no such resource on
// the cluster, is success). Its pod is deleted by the caller as well: the
// garbage collector would, later.
func (b *k8sBackend) deleteSandboxIn(ctx context.Context, ns, name string) error {
	bg := metav1.DeletePropagationBackground
	err := b.dyn.Resource(sandboxGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return apiError("sandbox delete", err)
}

// remove deletes a sandbox: its Sandbox object first (else the controller
// would make a new pod), then its pod.
func (b *k8sBackend) remove(ctx context.Context, ns, name string, agent bool) error {
	if agent {
		if err := b.deleteSandboxIn(ctx, ns, name); err != nil {
			return err
		}
	}
	return b.deletePodIn(ctx, ns, name)
}

// removeSandbox removes one of this backend's sandboxes.
func (b *k8sBackend) removeSandbox(ctx context.Context, name string) error {
	return b.remove(ctx, b.namespace, name, b.api == APIAgentSandbox)
}

// patchSandboxMeta merges labels and annotations into a Sandbox and its
// pod template (from which the controller keeps its pod's metadata).
func (b *k8sBackend) patchSandboxMeta(ctx context.Context, name string, lbls, ann map[string]string) error {
	meta := map[string]any{}
	if lbls != nil {
		meta["labels"] = lbls
	}
	if ann != nil {
		meta["annotations"] = ann
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]any{"podTemplate": map[string]any{"metadata": meta}}})
	if err != nil {
		return err
	}
	_, err = b.dyn.Resource(sandboxGVR).Namespace(b.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return apiError("sandbox patch", err)
	}
	return nil
}

// listSandboxObjects lists the Sandboxes carrying the labels; none when the
// cluster has no agent-sandbox CRDs.
func (b *k8sBackend) listSandboxObjects(ctx context.Context, selector string) ([]unstructured.Unstructured, error) {
	l, err := b.dyn.Resource(sandboxGVR).Namespace(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, apiError("sandbox list", err)
	}
	return l.Items, nil
}

// ownedBySandbox is the name of the Sandbox controlling a pod, or "".
func ownedBySandbox(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "Sandbox" && o.APIVersion == sandboxGVR.GroupVersion().String() {
			return o.Name
		}
	}
	return ""
}
