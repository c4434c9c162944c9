package inputs

// The tests build inputs from DSNs, so they need the backends registered,
// as the programs register them.
import _ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
