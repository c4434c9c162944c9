package main

import (
	"strings"
	"testing"
)

// terraform plan on Daytona matches the policy: a default template plans
// with the unverified isolation tier and the idle-only lifetime as warnings,
// an allow list is refused, and no require_isolation is satisfied. Real
// Terraform CLI, real provider binary; no Daytona credentials are needed to
// plan.
func TestE2E_DaytonaPlanMatchesPolicy(t *testing.T) {
	x := newE2E(t)
	for _, tc := range []struct {
		name, extra string
		ok          bool
		want        string
	}{
		{"default template plans", "", true,
			"sandboxio_template.d SBX-ISO-004 warn, sandboxio_template.d SBX-RES-009 warn, sandboxio_template.d SBX-TMO-005 warn"},
		{"allow list refused", `  network = { allow = ["10.0.0.0/8"] }`, false, "sandboxio_template.d SBX-NET-003 fail"},
		{"require_isolation not satisfied", `  require_isolation = "CONTAINER"`, false, "sandboxio_template.d SBX-ISO-003 fail"},
		{"memory in whole GiB only", `  resources = { memory_mb = 1536 }`, false, "sandboxio_template.d SBX-RES-008 fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "main.tf", providerBlock("")+`
resource "sandboxio_template" "d" {
  name    = "python"
  image   = "python:3.12-slim"
  backend = "daytona://"
`+tc.extra+`
}
`)
			d, ok := x.plan(t, dir)
			if ok != tc.ok {
				t.Fatalf("terraform plan ok=%v, want %v; findings %v", ok, tc.ok, d.findings)
			}
			if got := strings.Join(d.findings, ", "); !strings.Contains(got, tc.want) {
				t.Fatalf("findings %q, want %q", got, tc.want)
			}
			if tc.ok && len(d.findings) != 3 {
				t.Fatalf("findings %v, want only the three warnings", d.findings)
			}
		})
	}
}
