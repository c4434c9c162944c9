// Package all registers every backend of this build. The programs import
// it (the provider's main, cmd/sandboxio) and so does the run-time library
// (package sandbox, for programs outside this module); the policy engine
// does not: it knows backends only as capability data.
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
