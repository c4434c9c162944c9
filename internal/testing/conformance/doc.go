// Package backendtest is the conformance suite every sandbox backend passes:
// one table of behaviours, run with Run(t, h) against a Harness that plugs a
// backend (Docker, or a cloud adapter talking to its conformance server or to
// the live service) into it. What a harness leaves unset is skipped with a
// visible reason, never passed silently. selftest_test.go is a worked example
// of the fault side; Docker's harness is internal/backends/docker/conformance_test.go.
//
// See docs/design/conformance-suite.md for the harness fields and behaviours.
package backendtest
