package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestCompletion_Scripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_sandboxio sandboxio",
		"zsh":  "#compdef sandboxio",
		"fish": "complete -c sandboxio",
	} {
		code, out, errOut := cli(t, "", "completion", shell)
		if code != exitOK || !strings.Contains(out, want) || errOut != "" {
			t.Errorf("completion %s: exit %d, stderr %q, script without %q", shell, code, errOut, want)
		}
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Log("no bash: the script's syntax is not checked")
			continue
		}
		script := filepath.Join(t.TempDir(), "sandboxio.bash")
		if err := os.WriteFile(script, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if msg, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s", err, msg)
		}
	}
	// The scripts ask the CLI itself for the candidates.
	code, out, _ := cli(t, "", cobra.ShellCompRequestCmd, "policy", "ch")
	if code != exitOK || !strings.HasPrefix(out, "check\t") {
		t.Errorf("__complete policy ch: exit %d\n%s", code, out)
	}
}

// Every command's help fits a screen and links the guide for the rest.
func TestHelp_FitsAScreen(t *testing.T) {
	code := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "sandboxio")), "--help")
		got, out, _ := cli(t, "", args...)
		if n := strings.Count(out, "\n"); got != exitOK || n > 40 || n < 5 {
			t.Errorf("%s: exit %d, %d lines (at most 40)\n%s", strings.Join(args, " "), got, n, out)
		}
		if c.HasParent() && c.Annotations[groupCmd] == "" && !strings.Contains(out, guideURL+"#"+anchor(c.CommandPath()[len("sandboxio "):])) {
			t.Errorf("%s: no link to the guide\n%s", strings.Join(args, " "), out)
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(newRoot(t.Context(), &env{}, &code))
}

func TestUsage_SuggestsCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"polcy", "check", "plan.json"}, "Did you mean this?\n\tsandboxio policy check\n"},
		{[]string{"policy", "chek"}, "Did you mean this?\n\tsandboxio policy check\n"},
		{[]string{"rn", "--", "true"}, "\tsandboxio run\n"},
		{[]string{"verson", "--json"}, "\tsandboxio version\n"},
	} {
		code, out, errOut := cli(t, "", tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "unknown command") || !strings.Contains(errOut, tc.want) {
			t.Errorf("sandboxio %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}

// The flag errors keep the flag package's wording and exit 2.
func TestUsage_FlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "--nope"}, "sandboxio version: flag provided but not defined: -nope\nusage: sandboxio version"},
		{[]string{"policy", "check", "--max-input-mib", "x", "p.json"}, `invalid value "x" for flag -max-input-mib: `},
		{[]string{"policy", "check", "--format"}, "flag needs an argument: -format"},
		{[]string{"policy", "docs", "-o"}, "flag needs an argument: -o"},
		{[]string{"run", "-spec", "s.json", "--", "true"}, "flag provided but not defined: -s (did you mean --spec? a long flag takes two dashes)"},
		{[]string{"completion", "tcsh"}, "sandboxio: unknown command \"completion tcsh\""},
	} {
		code, out, errOut := cli(t, "", tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("sandboxio %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}
