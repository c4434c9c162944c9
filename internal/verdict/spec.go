package verdict

import (
	"context"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// CheckSpec is the run-time helper's decision before it provisions a
// sandbox: the document of a rendered per-tenant spec (kind spec), decided
// by Check with the same engine (policy.Load with the team's policy_paths)
// and waivers as the provider and `sandboxio policy check`. A DSN the
// parser refuses is returned as that *model.Error; a refusal by the rules
// is v.Failed(), v.Err() the first one. A spec with no backend, or whose
// isolation_tier is not its backend's, is refused as inputs.Spec refuses it.
func CheckSpec(ctx context.Context, eng *policy.Engine, spec model.Spec, opts Options) (Verdict, error) {
	in, _, err := inputs.Spec(spec)
	if err != nil {
		return Verdict{}, err
	}
	return Check(ctx, eng, in, opts)
}
