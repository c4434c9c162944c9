package model

import (
	"sort"
	"strings"
)

// ReservedLabelPrefix is the label namespace that sandboxio owns. Users may
// not set labels under it; the tenant and session labels live there.
const ReservedLabelPrefix = "sandboxio."

// Reserved labels set on every per-tenant sandbox.
const (
	LabelTenantID  = ReservedLabelPrefix + "tenant_id"
	LabelSessionID = ReservedLabelPrefix + "session_id"
	LabelTemplate  = ReservedLabelPrefix + "template"
	LabelManaged   = ReservedLabelPrefix + "managed"
)

func formatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}
