// Package vercel declares the Vercel Sandbox backend: its DSN
// (vercel://TEAM/PROJECT) and, through the policy bundle's capability data,
// what it can enforce. This build cannot provision on it yet; specs for it
// are checked by the policy all the same.
package vercel

import "github.com/sandboxio/terraform-provider-sandboxio/internal/backends"

// Name is the DSN scheme.
const Name = "vercel"

func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 40,
		DSN: backends.DSNSyntax{
			Form: "vercel://TEAM/PROJECT", Target: backends.TargetTeamProject,
			// VERCEL_OIDC_TOKEN is Vercel's recommended credential and
			// VERCEL_TOKEN the access-token fallback; the team and project,
			// which the SDK would read from VERCEL_TEAM_ID and
			// VERCEL_PROJECT_ID, are in the DSN.
			Env: []string{"VERCEL_OIDC_TOKEN", "VERCEL_TOKEN"}, EnvHelp: "VERCEL_OIDC_TOKEN (or VERCEL_TOKEN)",
			Options: map[string]backends.DSNOption{
				"region": backends.Pattern(`^[a-z]{3}[0-9]$`, "a Vercel region id such as iad1"),
			},
		},
	})
}
