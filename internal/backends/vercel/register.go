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
			Env: []string{EnvOIDCToken, EnvToken}, EnvHelp: EnvOIDCToken + " (or " + EnvToken + ")",
			Options: map[string]backends.DSNOption{
				"region": backends.Pattern(`^[a-z]{3}[0-9]$`, "a Vercel region id such as iad1"),
			},
		},
		Open: New,
		// The runtime is checked when a sandbox is opened: Vercel answers a
		// create for an unknown runtime with 400, a ConfigurationError.
		Unreachable: "set " + EnvOIDCToken + " (or " + EnvToken + ") before apply",
		Lists:       true,
	})
}
