// Package daytona is the Daytona backend (daytona://): an adapter over
// Daytona's REST API (the v0.190.0 OpenAPI spec) and its toolbox API. Daytona
// has no secret store and no hard lifetime: secret values go into the
// sandbox's env, and a deadline this process enforces backs autoStopInterval
// (SBX-TMO-005 warns). See docs/design/cloud-backends.md for the mapping.
package daytona

import "github.com/sandboxio/terraform-provider-sandboxio/internal/backends"

// Name is the DSN scheme.
const Name = "daytona"

func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 50,
		DSN: backends.DSNSyntax{
			Form: "daytona://", Target: backends.TargetNone,
			Env: []string{"DAYTONA_API_KEY"}, EnvHelp: "DAYTONA_API_KEY",
			NoHost: "a self-hosted Daytona API goes in the api_url option: daytona://?api_url=URL",
			Options: map[string]backends.DSNOption{
				"target":  backends.Pattern(`^[a-z]{2}(-[a-z0-9]+){0,3}$`, "a region id such as us-east"),
				"api_url": backends.APIURL(),
			},
		},
		EndpointOptions: []string{"api_url", "target"},
		Open:            New,
		Unreachable:     "set " + EnvAPIKey + " (and " + EnvAPIURL + " for a self-hosted Daytona) before apply",
		Lists:           true,
	})
}
