// Package daytona is the Daytona backend (daytona://): an adapter over
// Daytona's REST API (the v0.190.0 OpenAPI spec) and its toolbox API
// (sessions and files, through the toolbox proxy).
//
// What each policy field maps to: the image is a declarative build
// (buildInfo "FROM <image>"), since Daytona takes cpu, memory and disk
// only with a build, never with a snapshot; labels are Daytona labels (plus a create
// nonce, so a create is never repeated blindly); deny egress is
// networkBlockAll (allow lists are refused by the policy); cpu, memory and
// disk are sent in whole cores and GiB; lifetime_seconds becomes
// autoStopInterval (whole minutes, an idle limit) with autoDeleteInterval 0,
// and a deadline this process enforces while it runs (SBX-TMO-005 warns).
// Daytona has no secret store: secret values go into the sandbox's env.
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
