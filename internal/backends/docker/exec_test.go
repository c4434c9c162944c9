package docker

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// The exec wrapper's $0 is "sh": when the command cannot be run, the shell's
// error reads as the command's ("sh: exec: ... python3: not found"), never
// as a line of the sandboxio CLI, whose own lines start with "sandboxio".
func TestWrapperErrorsReadAsTheShells(t *testing.T) {
	needDocker(t)
	t.Parallel()
	sb := open(t, newTestBackend(t), testSpec(t))
	ctx := t.Context()
	res, err := sb.Run(ctx, []string{"python3", "-c", "print(1)"}, backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stderr := string(res.Stderr)
	if res.ExitCode != 127 || !strings.HasPrefix(stderr, "sh: ") || !strings.Contains(stderr, "python3: not found") || strings.Contains(stderr, "sandboxio") {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, stderr)
	}
	res, err = sb.RunCode(ctx, "python", "print(1)", backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if stderr := string(res.Stderr); res.ExitCode != 127 || !strings.HasPrefix(stderr, "sh: ") || strings.Contains(stderr, "sandboxio") {
		t.Fatalf("run code: exit %d, stderr %q", res.ExitCode, stderr)
	}
}
