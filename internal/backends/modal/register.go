// Package modal declares the Modal backend: its DSN (modal://APP) and,
// through the policy bundle's capability data, what it can enforce. This
// build cannot provision on it yet; specs for it are checked by the policy
// all the same.
package modal

import "github.com/sandboxio/terraform-provider-sandboxio/internal/backends"

// Name is the DSN scheme.
const Name = "modal"

func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 30,
		DSN: backends.DSNSyntax{
			Form: "modal://APP", Target: backends.TargetApp,
			Env: []string{"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"}, EnvHelp: "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET",
			Options: map[string]backends.DSNOption{
				"environment": backends.Name("a Modal environment name", 64),
				"region":      backends.Pattern(`^[a-z]{2}(-[a-z0-9]+){0,3}$`, "a region id such as us-east"),
			},
		},
		EndpointOptions: []string{"environment"},
	})
}
