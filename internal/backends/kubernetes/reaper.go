package kubernetes

import (
	"context"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// Reap deletes the sandbox pods whose lifetime has passed or whose owner
// process is gone (owners on this host; others by lifetime only). A pod of
// this very process is never reaped for its owner. A backend opened with no
// namespace (`sandboxio reap` sweeping every backend) sweeps every
// namespace the kubeconfig's current context may list.
func (b *k8sBackend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	pods, err := b.listPods(ctx, opts.Labels)
	if err != nil {
		return nil, err
	}
	var out []backends.Reaped
	var firstErr error
	for i := range pods {
		p := &pods[i]
		reason := ""
		if t, err := time.Parse(time.RFC3339, p.Annotations[annExpires]); err == nil && now.After(t) {
			reason = "expired"
		} else if ownerGone(p.Annotations, p.Labels, b.owner) {
			reason = "owner gone"
		}
		if reason == "" {
			continue
		}
		if !opts.DryRun {
			if err := b.deletePodIn(ctx, p.Namespace, p.Name); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
		}
		out = append(out, backends.Reaped{Info: infoFromPod(p), Reason: reason})
	}
	return out, firstErr
}
