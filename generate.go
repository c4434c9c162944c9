package main

// Before tfplugindocs (main.go; go generate runs a package's files in name
// order): the lists of backends and capabilities from the capability data,
// into the data's prose section and the marked regions of README.md and
// templates/, then the rule catalogue, a guide. `make docs-check` fails
// when docs/ is stale.
//go:generate go run ./scripts/prose README.md templates
//go:generate go run ./cmd/sandboxio policy docs -o templates/guides/policies.md.tmpl
