package kubernetes

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Reap deletes the sandboxes whose lifetime has passed or whose owner
// process is gone (owners on this host; others by lifetime only): pods, and
// agent-sandbox Sandboxes with their pods (deleting only the pod of a
// Sandbox would have its controller make a new one). A sandbox of this
// very process is never reaped for its owner. A backend opened with no
// namespace (`sandboxio reap` sweeping every backend) sweeps every
// namespace the kubeconfig's current context may list, and both kinds
// whatever the DSN's api option says.
func (b *k8sBackend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	sel, err := selectorFor(opts.Labels)
	if err != nil {
		return nil, err
	}
	sbs, err := b.listSandboxObjects(ctx, sel)
	if err != nil {
		return nil, err
	}
	pods, err := b.listPods(ctx, opts.Labels)
	if err != nil {
		return nil, err
	}
	var out []backends.Reaped
	var firstErr error
	done := map[string]bool{} // namespace/name of the Sandboxes handled
	reap := func(ns, name string, agent bool, in backends.Info, reason string) {
		if !opts.DryRun {
			if err := b.remove(ctx, ns, name, agent); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
		}
		out = append(out, backends.Reaped{Info: in, Reason: reason})
	}
	for i := range sbs {
		u := &sbs[i]
		if reason := b.reapReason(u.GetAnnotations(), u.GetLabels(), now); reason != "" {
			done[u.GetNamespace()+"/"+u.GetName()] = true
			reap(u.GetNamespace(), u.GetName(), true, infoFromSandbox(u), reason)
		}
	}
	for i := range pods {
		p := &pods[i]
		owner := ownedBySandbox(p)
		if done[p.Namespace+"/"+owner] {
			continue
		}
		if reason := b.reapReason(p.Annotations, p.Labels, now); reason != "" {
			if owner != "" && owner != p.Name {
				// Not a pod this backend's Sandboxes make: leave it to its owner.
				continue
			}
			reap(p.Namespace, p.Name, owner != "", infoFromPod(p), reason)
		}
	}
	return out, firstErr
}

// reapReason is why a sandbox is to be reaped, or "".
func (b *k8sBackend) reapReason(ann, lbl map[string]string, now time.Time) string {
	if t, err := time.Parse(time.RFC3339, ann[annExpires]); err == nil && now.After(t) {
		return "expired"
	}
	if ownerGone(ann, lbl, b.owner) {
		return "owner gone"
	}
	return ""
}

// infoFromSandbox describes a Sandbox object whose pod may be gone.
func infoFromSandbox(u *unstructured.Unstructured) backends.Info {
	ann := u.GetAnnotations()
	in := backends.Info{ID: u.GetName(), Backend: Name, Tier: model.Tier(ann[annTier]), Labels: u.GetLabels(),
		Created: u.GetCreationTimestamp().Time, DiskCapStrategy: ann[annDiskCap], PidsCapStrategy: ann[annPidsCap]}
	if t, err := time.Parse(time.RFC3339, ann[annExpires]); err == nil {
		in.Expires = t
	}
	return in
}
