package main

// The rule catalogue is generated from the bundle's METADATA; `make
// docs-check` runs go generate ./... and fails when docs/ is stale.
//go:generate go run . policy docs -o ../../docs/policies.md
