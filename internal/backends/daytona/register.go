// Package daytona declares the Daytona backend: its DSN (daytona://) and,
// through the policy bundle's capability data, what it can enforce. This
// build cannot provision on it yet; specs for it are checked by the policy
// all the same.
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
	})
}
