//go:build tools

// Package tools pins the command scripts/k8s-build.sh builds.
package tools

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
