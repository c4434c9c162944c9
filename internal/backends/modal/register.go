// Package modal is the Modal backend (modal://APP): sandboxes in a Modal app,
// through Modal's official Go SDK, with credentials from MODAL_TOKEN_ID and
// MODAL_TOKEN_SECRET. See docs/design/cloud-backends.md for the mapping.
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
		Open:            open,
		LiveCheck:       liveCheck,
		Unreachable:     "set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (and MODAL_SERVER_URL for another endpoint) before apply; plan needs no Modal access, apply does",
		Lists:           true,
	})
}
