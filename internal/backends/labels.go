package backends

import (
	"fmt"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// SandboxLabels is the label set of a sandbox that carries labels natively
// (a container's or a pod's): the user's labels plus managed, tenant,
// session and template under the reserved prefix. A user may repeat those
// (a rendered per-tenant spec carries them) but not contradict them or set
// any other reserved label; either is a Backstop of backend.
func SandboxLabels(backend string, s model.Spec) (map[string]string, error) {
	labels := map[string]string{model.LabelManaged: "true"}
	if s.TenantID != "" {
		labels[model.LabelTenantID] = s.TenantID
	}
	if s.SessionID != "" {
		labels[model.LabelSessionID] = s.SessionID
	}
	if s.Name != "" {
		labels[model.LabelTemplate] = s.Name
	}
	for k, v := range s.Labels {
		if strings.HasPrefix(k, model.ReservedLabelPrefix) {
			if own, ok := labels[k]; ok && own == v && k != model.LabelManaged {
				continue
			}
			return nil, Backstop(backend, rules.LblReserved, "labels", fmt.Sprintf("label %q", k))
		}
		if k == "" {
			return nil, Backstop(backend, rules.LblMalformed, "labels", "an empty label key")
		}
		labels[k] = v
	}
	return labels, nil
}
