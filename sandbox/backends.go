package sandbox

// Programs outside this module cannot import internal/backends/all, so the
// run-time library registers every backend for its users.
import _ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
