package model

// ForTenant returns the per-tenant spec of a template spec: the tenant and
// session ids recorded in the spec and in the reserved labels, beside the
// template's labels and the extra labels given here. It does not validate
// the ids or the labels; the policy bundle does (tenancy and label rules).
func (s Spec) ForTenant(tenantID, sessionID string, extra map[string]string) Spec {
	out := s
	out.TenantID = tenantID
	out.SessionID = sessionID
	labels := make(map[string]string, len(s.Labels)+len(extra)+3)
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	labels[LabelTenantID] = tenantID
	labels[LabelSessionID] = sessionID
	labels[LabelTemplate] = s.Name
	out.Labels = labels
	// Copy the slices and maps that callers might mutate.
	out.Env = copyMap(s.Env)
	out.SecretNames = append([]string(nil), s.SecretNames...)
	out.Network.Allow = append([]string(nil), s.Network.Allow...)
	out.BrokeredSecrets = NormalizeBrokered(s.BrokeredSecrets) // a copy
	if s.Volume != nil {
		v := *s.Volume
		out.Volume = &v
	}
	if s.WarmPool != nil {
		w := *s.WarmPool
		out.WarmPool = &w
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
