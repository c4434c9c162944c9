// Package all registers every backend of this build. It is imported once,
// by the policy engine (internal/policy), so that every user of the engine
// (the provider, the CLI, the run-time helper) sees the same backends.
// Adding a backend is one package that calls backends.Register in its init
// function, its capability data in policies/capabilities/data.json, and one
// line here.
package all

import (
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/daytona"    // daytona://
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"     // docker://
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b"        // e2b://
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/kubernetes" // kubernetes://CONTEXT/NAMESPACE
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/modal"      // modal://APP
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vercel"     // vercel://TEAM/PROJECT
)
