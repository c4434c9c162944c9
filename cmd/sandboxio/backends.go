package main

// The backends this program opens sandboxes on; registered here, by the
// program, rather than by the policy engine, which knows backends only as
// capability data.
import _ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
