// Package model is sandboxio's domain model: isolation tiers, network
// policies, resource caps, timeouts, the sandbox spec and the error classes.
//
// It depends on nothing else in the project, so every other package (the
// backends, the policy engine, the provider, the run-time helper and the CLI)
// can share one vocabulary.
package model
