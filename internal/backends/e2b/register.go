package e2b

import "github.com/sandboxio/terraform-provider-sandboxio/internal/backends"

// Name is the DSN scheme.
const Name = "e2b"

func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 20,
		DSN: backends.DSNSyntax{
			Form: "e2b://", Target: backends.TargetNone,
			Env: []string{EnvAPIKey}, EnvHelp: EnvAPIKey,
			NoHost: "a self-hosted E2B domain goes in the domain option: e2b://?domain=HOST",
			Options: map[string]backends.DSNOption{
				"domain":          backends.DNSName("a DNS name such as e2b.app"),
				"request_timeout": backends.WholeSeconds(),
			},
		},
		EndpointOptions: []string{"domain", "request_timeout"},
		Open:            New,
		// The template is checked when a sandbox is opened: E2B answers a
		// create for an unknown template with 404, a ConfigurationError
		// naming it.
		Unreachable: "set " + EnvAPIKey + " (and E2B_API_URL or E2B_DOMAIN for a self-hosted E2B) before apply",
		Lists:       true,
	})
}
