// Package policies embeds the Rego bundle and the backend capability data, so
// that the provider, the CLI and the run-time helper evaluate exactly the
// rules a security team reviews in this directory.
package policies

import "embed"

// Bundle holds every Rego module (tests included) and capabilities/data.json.
//
//go:embed *.rego capabilities/data.json
var Bundle embed.FS

// CapabilitiesPath is the path of the capability data inside Bundle. OPA
// loads it at data.capabilities, as `opa test policies/` does.
const CapabilitiesPath = "capabilities/data.json"
