package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/hostile"
)

// No team package makes `sandboxio policy check` pass, or `sandboxio run`
// open, a configuration the built-in rules refuse: the bundle is refused
// when it loads, the evaluation fails closed, or the built-in refusal
// stands. Nothing reaches a daemon, so none is needed.
func TestHostileTeamPolicies_CheckAndRunFailClosed(t *testing.T) {
	dir := t.TempDir()
	refused := writeFile(t, dir, "plan.json", plan("hostile", map[string]any{
		"runtime":         "runsc",
		"network":         map[string]any{"egress": "learn", "allow": []any{"151.101.0.0/16"}},
		"resources":       map[string]any{"cpu": 0, "memory_mb": -1, "disk_mb": 1024, "pids": 256},
		"timeout_seconds": 0,
	}))
	spec, sum := specFile(t, "acme", "s-1", func(x *inputs.Template) { x.Egress, x.Runtime = "learn", "runsc" })
	for _, c := range hostile.Cases() {
		if c.Slow {
			continue // the engine's test spends the budget once; here it would be once per resource
		}
		t.Run(c.Name, func(t *testing.T) {
			team := c.Write(t)
			code, out, errOut := cli(t, "", "policy", "check", "--policy", team, refused)
			switch c.Want {
			case hostile.BuiltinsIntact:
				if code != exitDenied || !strings.Contains(out, "SBX-NET-001") || !strings.Contains(out, "SBX-RES-001") {
					t.Fatalf("policy check: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
				}
			default:
				if code != exitUsage || !strings.Contains(errOut, c.Rule) || strings.Contains(out, "PASS") {
					t.Fatalf("policy check: exit %d, want %d naming %s\nstdout: %s\nstderr: %s", code, exitUsage, c.Rule, out, errOut)
				}
			}

			code, out, errOut = cli(t, "", "run", "--spec", spec, "--spec-sha256", sum, "--policy", team,
				"--tenant", "acme", "--session", "s-1", "--", "true")
			wantCode, wantRule := exitConfiguration, c.Rule
			if c.Want == hostile.BuiltinsIntact {
				wantCode, wantRule = exitCapability, "SBX-NET-001"
			}
			if code != wantCode || !strings.Contains(errOut, wantRule) || out != "" {
				t.Fatalf("run: exit %d, want %s naming %s\nstdout: %s\nstderr: %s", code, strconv.Itoa(wantCode), wantRule, out, errOut)
			}
		})
	}
}
