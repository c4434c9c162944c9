package policy

// Every backend of this build registers itself with the backends registry
// here, once: every user of the engine (the provider, the CLI, the run-time
// helper) parses DSNs, builds input documents and opens sandboxes through
// the same registrations.
import _ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
