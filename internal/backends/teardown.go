package backends

import (
	"context"
	"maps"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// CloseWithin is the teardown of every backend's Sandbox.Close: kill runs
// in a scope shielded from ctx's cancellation and bounded by grace. A kill
// that fails (or cannot be confirmed in time) leaves the sandbox orphaned:
// orphan, completed as an OrphanedSandboxWarning with a copy of its labels,
// goes to onWarning and comes back in an *OrphanedError.
func CloseWithin(ctx context.Context, grace time.Duration, kill func(context.Context) error, orphan model.Warning, onWarning func(model.Warning)) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := kill(kctx)
	if err == nil {
		return nil
	}
	orphan.Class = model.OrphanedSandboxWarning
	orphan.Labels = maps.Clone(orphan.Labels)
	if onWarning != nil {
		onWarning(orphan)
	}
	return &OrphanedError{Warning: orphan, Err: err}
}
