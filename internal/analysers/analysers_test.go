package analysers

import (
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/tools"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBanditFindsHighSeverity(t *testing.T) {
	tools.NeedAnalysers(t, Bandit)
	code := "import subprocess\nsubprocess.call('ls ' + name, shell=True)\n"
	r := Config{}.RunBandit(t.Context(), code)
	if r.Status != OK {
		t.Fatalf("status %s (%s)", r.Status, r.Detail)
	}
	var high []string
	for _, f := range r.Findings {
		if f.Severity == "high" {
			high = append(high, f.ID)
		}
	}
	if !slices.Contains(high, "bandit:B602") {
		t.Fatalf("no high-severity B602 in %+v", r.Findings)
	}
	if !slices.Contains(r.IDs(), "bandit:B404") {
		t.Errorf("the low-severity B404 (import subprocess) is missing: %v", r.IDs())
	}
}

func TestBanditIgnoresNosec(t *testing.T) {
	tools.NeedAnalysers(t, Bandit)
	// The code under judgement cannot switch the judge off.
	r := Config{}.RunBandit(t.Context(), "import subprocess\nsubprocess.call(cmd, shell=True)  # nosec\n")
	if r.Status != OK || !slices.Contains(r.IDs(), "bandit:B602") {
		t.Fatalf("a # nosec comment hid B602: %s %v", r.Status, r.IDs())
	}
}

func TestBanditCleanCode(t *testing.T) {
	tools.NeedAnalysers(t, Bandit)
	r := Config{}.RunBandit(t.Context(), "print(sum(range(10)))\n")
	if r.Status != OK || len(r.Findings) != 0 {
		t.Fatalf("clean code: %s %v (%s)", r.Status, r.IDs(), r.Detail)
	}
}

func TestBanditSyntaxErrorIsFailed(t *testing.T) {
	tools.NeedAnalysers(t, Bandit)
	r := Config{}.RunBandit(t.Context(), "def (:\n  os.system(x)\n")
	if r.Status != Failed || len(r.Findings) != 0 {
		t.Fatalf("unparsable code: %s %v, want failed with no findings", r.Status, r.IDs())
	}
	if strings.Contains(r.Detail, "os.system") {
		t.Errorf("the detail quotes the code: %q", r.Detail)
	}
}

func TestShellCheckFindings(t *testing.T) {
	tools.NeedAnalysers(t, ShellCheck)
	r := Config{}.RunShellCheck(t.Context(), "echo $1\nif [ \n", "sh")
	if r.Status != OK {
		t.Fatalf("status %s (%s)", r.Status, r.Detail)
	}
	var errs []string
	for _, f := range r.Findings {
		if f.Severity == "error" {
			errs = append(errs, f.ID)
		}
	}
	if len(errs) == 0 || !strings.HasPrefix(errs[0], "shellcheck:SC1") {
		t.Fatalf("no parse error (SC1xxx, level error) in %+v", r.Findings)
	}
	clean := Config{}.RunShellCheck(t.Context(), "echo \"$1\"\n", "bash")
	if clean.Status != OK || len(clean.Findings) != 0 {
		t.Fatalf("clean script: %s %v", clean.Status, clean.IDs())
	}
	style := Config{}.RunShellCheck(t.Context(), "echo $1\n", "sh")
	if !slices.Contains(style.IDs(), "shellcheck:SC2086") {
		t.Fatalf("unquoted $1: %v, want SC2086", style.IDs())
	}
}

func TestShellCheckIgnoresDirectivesInTheCode(t *testing.T) {
	tools.NeedAnalysers(t, ShellCheck)
	// The code under judgement cannot switch the judge off, whatever the
	// directive's spelling; a .shellcheckrc beside it is not read either.
	for _, script := range []string{
		"# shellcheck disable=SC2086\necho $1\n",
		"#shellcheck disable=all\necho $1\n",
		"echo $1 # ShellCheck disable=SC2086\n",
		"# shellcheck disable=SC2086\n#  shellcheck  disable=SC2086\necho $1\n",
	} {
		r := Config{}.RunShellCheck(t.Context(), script, "sh")
		if r.Status != OK || !slices.Contains(r.IDs(), "shellcheck:SC2086") {
			t.Errorf("%q: %s %v, want SC2086 reported", script, r.Status, r.IDs())
		}
	}
	if got := inertDirectives("a # shellcheck disable=x\n"); len(got) != len("a # shellcheck disable=x\n") {
		t.Errorf("the rewrite changed the script's length: %q", got)
	}
}

// TestAnalysersNeverRunTheCode gives each analyser code that would create a
// file if it ran, and checks that the file is absent.
func TestAnalysersNeverRunTheCode(t *testing.T) {
	tools.NeedAnalysers(t, Bandit, ShellCheck)
	dir := t.TempDir()
	py := filepath.Join(dir, "from-python")
	sh := filepath.Join(dir, "from-shell")
	r := Config{}.RunBandit(t.Context(), "open('"+py+"', 'w').write('ran')\nimport os\nos.system('touch "+py+"')\n")
	if r.Status != OK {
		t.Fatalf("bandit: %s (%s)", r.Status, r.Detail)
	}
	s := Config{}.RunShellCheck(t.Context(), "touch "+sh+"\necho ran > "+sh+"\n", "sh")
	if s.Status != OK {
		t.Fatalf("shellcheck: %s (%s)", s.Status, s.Detail)
	}
	for _, p := range []string{py, sh} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists: the analysed code ran", p)
		}
	}
}

func TestMissingAnalyser(t *testing.T) {
	c := Config{BanditPath: "/nonexistent/bandit", ShellCheckPath: "/nonexistent/shellcheck"}
	if r := c.RunBandit(t.Context(), "print(1)"); r.Status != Missing || r.Findings == nil {
		t.Errorf("bandit: %s %v, want missing with an empty (not nil) list", r.Status, r.Findings)
	}
	if r := c.RunShellCheck(t.Context(), "echo", "sh"); r.Status != Missing {
		t.Errorf("shellcheck: %s, want missing", r.Status)
	}
}

// TestTimeout bounds an analyser that hangs (a stand-in that sleeps, and
// leaves a child behind that must be killed with it).
func TestTimeout(t *testing.T) {
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 30 &\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := Config{BanditPath: slow, Timeout: 300 * time.Millisecond}.RunBandit(t.Context(), "print(1)")
	if r.Status != TimedOut || len(r.Findings) != 0 {
		t.Fatalf("status %s, want timeout", r.Status)
	}
	// The bound plus WaitDelay at most: the process group was killed, so
	// the background sleep does not hold the pipes open for 30 s.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestOutputNotAReport(t *testing.T) {
	dir := t.TempDir()
	liar := filepath.Join(dir, "liar")
	if err := os.WriteFile(liar, []byte("#!/bin/sh\necho 'all good'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Config{ShellCheckPath: liar}.RunShellCheck(t.Context(), "echo", "sh")
	if r.Status != Failed {
		t.Fatalf("status %s, want failed for output that is not a report", r.Status)
	}
	crash := filepath.Join(dir, "crash")
	if err := os.WriteFile(crash, []byte("#!/bin/sh\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := (Config{BanditPath: crash}).RunBandit(t.Context(), "print(1)"); r.Status != Failed {
		t.Fatalf("exit 2: status %s, want failed", r.Status)
	}
}

func TestTooLarge(t *testing.T) {
	r := Config{ShellCheckPath: "/bin/true"}.RunShellCheck(t.Context(), strings.Repeat("#", maxCode+1), "sh")
	if r.Status != Failed {
		t.Fatalf("status %s, want failed", r.Status)
	}
}

func TestParseBandit(t *testing.T) {
	for _, bad := range []string{``, `{`, `{"results": null}`, `{"errors": [{"reason": "x"}], "results": []}`,
		`{"results": [{"test_id": "rm -rf /"}]}`, `[]`} {
		if _, err := ParseBandit([]byte(bad)); err == nil {
			t.Errorf("ParseBandit(%q) accepted it", bad)
		}
	}
	fs, err := ParseBandit([]byte(`{"errors": [], "results": [{"test_id": "B602", "issue_severity": "HIGH", "issue_confidence": "<b>", "line_number": -3}]}`))
	if err != nil || len(fs) != 1 || fs[0].ID != "bandit:B602" || fs[0].Severity != "high" || fs[0].Confidence != "unknown" || fs[0].Line != 0 {
		t.Fatalf("%+v %v", fs, err)
	}
}

func TestParseShellCheck(t *testing.T) {
	for _, bad := range []string{``, `{}`, `{"comments": [{"code": 5}]}`, `{"comments": [{"code": 100000}]}`} {
		if _, err := ParseShellCheck([]byte(bad)); err == nil {
			t.Errorf("ParseShellCheck(%q) accepted it", bad)
		}
	}
	fs, err := ParseShellCheck([]byte(`{"comments": [{"code": 2086, "level": "info", "line": 1}]}`))
	if err != nil || len(fs) != 1 || fs[0].ID != "shellcheck:SC2086" || fs[0].Severity != "info" {
		t.Fatalf("%+v %v", fs, err)
	}
}

// checkFindings holds for every parse that succeeded: IDs of the tool's
// form, levels from the known words, no negative line.
func checkFindings(t *testing.T, fs []Finding, prefix string) {
	if len(fs) > maxFindings {
		t.Fatalf("%d findings kept", len(fs))
	}
	for _, f := range fs {
		if !strings.HasPrefix(f.ID, prefix) || len(f.ID) > len(prefix)+6 || f.Line < 0 || level(f.Severity) != f.Severity {
			t.Fatalf("finding %+v", f)
		}
	}
}

func FuzzParseBandit(f *testing.F) {
	f.Add([]byte(`{"errors": [], "results": [{"test_id": "B602", "issue_severity": "HIGH", "issue_confidence": "HIGH", "line_number": 2}]}`))
	f.Add([]byte(`{"errors": [{"reason": "syntax error while parsing AST from file"}], "results": []}`))
	f.Add([]byte(`{"results": [{"test_id": "B1", "line_number": 1e400}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fs, err := ParseBandit(data)
		if err == nil {
			checkFindings(t, fs, "bandit:B")
		}
	})
}

func FuzzParseShellCheck(f *testing.F) {
	f.Add([]byte(`{"comments":[{"file":"s.sh","line":3,"level":"error","code":1073,"message":"x"}]}`))
	f.Add([]byte(`{"comments":[{"code":-1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fs, err := ParseShellCheck(data)
		if err == nil {
			checkFindings(t, fs, "shellcheck:SC")
		}
	})
}
