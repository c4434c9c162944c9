// Package modal is the Modal backend (modal://APP): sandboxes in a Modal
// app, through Modal's official Go SDK. The DSN's app and environment
// select where; the credentials come from MODAL_TOKEN_ID and
// MODAL_TOKEN_SECRET, the endpoint from MODAL_SERVER_URL (else Modal's).
//
// Deny egress is an allow list with no entries (not the legacy
// block-network flag); an allow list is CIDR blocks; caps are CPU and
// memory, each a request with an equal hard limit; the lifetime is the
// sandbox's timeout, enforced by Modal; labels are tags. Commands run
// through Modal's command router; secrets are Modal Secrets. Its local
// conformance server is internal/fakes/modal.
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
