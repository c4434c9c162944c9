// Package e2b declares the E2B backend: its DSN (e2b://) and, through the
// policy bundle's capability data, what it can enforce. This build cannot
// provision on it yet; specs for it are checked by the policy all the same.
package e2b

import "github.com/sandboxio/terraform-provider-sandboxio/internal/backends"

// Name is the DSN scheme.
const Name = "e2b"

func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 20,
		DSN: backends.DSNSyntax{
			Form: "e2b://", Target: backends.TargetNone,
			Env: []string{"E2B_API_KEY"}, EnvHelp: "E2B_API_KEY",
			NoHost: "a self-hosted E2B domain goes in the domain option: e2b://?domain=HOST",
			Options: map[string]backends.DSNOption{
				"domain":          backends.DNSName("a DNS name such as e2b.app"),
				"request_timeout": backends.WholeSeconds(),
			},
		},
		EndpointOptions: []string{"domain", "request_timeout"},
	})
}
