// Package analysers runs the static analysers of the pre-execution hook:
// Debian's bandit on Python and shellcheck on shell. Each runs on a copy of
// the code written to a fresh temporary directory, bounded in time and in
// output, and never executes the code: bandit parses it into a Python AST,
// shellcheck parses it as shell. What an analyser could not do (it is not
// installed, it ran out of time, it failed, its output did not parse) is a
// status in the report, never an empty list of findings: a rule that needs
// the analyser reads the status and decides (see policies/exec.rego).
package analysers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Tools.
const (
	Bandit     = "bandit"
	ShellCheck = "shellcheck"
)

// Status says what became of one analyser's run.
type Status string

// Statuses.
const (
	// OK: the analyser ran and its findings are complete.
	OK Status = "ok"
	// Missing: the analyser is not installed (not on PATH).
	Missing Status = "missing"
	// TimedOut: the analyser did not finish within its bound and was killed.
	TimedOut Status = "timeout"
	// Failed: it ran but failed, could not parse the code, or printed
	// what is not its report.
	Failed Status = "failed"
)

// Finding is one issue an analyser reported.
type Finding struct {
	// ID is the tool and its rule: "bandit:B602", "shellcheck:SC2086".
	ID string `json:"id"`
	// Severity is lower-case: bandit's low, medium, high; shellcheck's
	// style, info, warning, error.
	Severity string `json:"severity"`
	// Confidence is bandit's (low, medium, high); empty for shellcheck.
	Confidence string `json:"confidence,omitempty"`
	Line       int    `json:"line"`
}

// Report is one analyser's result on one piece of code.
type Report struct {
	Tool     string    `json:"tool"`
	Status   Status    `json:"status"`
	Detail   string    `json:"detail,omitempty"` // why, when Status is not OK; never quotes the code
	Findings []Finding `json:"findings"`
	Duration time.Duration
}

// IDs returns the findings' IDs, in order.
func (r Report) IDs() []string {
	out := make([]string, len(r.Findings))
	for i, f := range r.Findings {
		out[i] = f.ID
	}
	return out
}

// DefaultTimeout bounds one analyser run. Bandit starts a Python
// interpreter (about half a second on an idle core); a snippet an agent
// writes is analysed well within this on a busy machine.
const DefaultTimeout = 20 * time.Second

// maxOutput bounds what is read of an analyser's output: a report on a
// snippet is kilobytes; a pathological one is cut and read as Failed.
const maxOutput = 4 << 20

// maxCode bounds the code handed to an analyser. Larger code is not
// analysed (Failed, "too large"), so a rule that needs the analyser
// decides as it does for any analyser that could not run.
const maxCode = 1 << 20

// Config locates and bounds the analysers. The zero value looks them up on
// PATH with DefaultTimeout.
type Config struct {
	BanditPath     string // default: bandit on PATH
	ShellCheckPath string // default: shellcheck on PATH
	Timeout        time.Duration
}

func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func lookPath(configured, name string) (string, error) {
	if configured != "" {
		return exec.LookPath(configured)
	}
	return exec.LookPath(name)
}

// RunBandit analyses Python code with bandit.
func (c Config) RunBandit(ctx context.Context, code string) Report {
	r := Report{Tool: Bandit, Findings: []Finding{}}
	path, err := lookPath(c.BanditPath, Bandit)
	if err != nil {
		r.Status, r.Detail = Missing, "bandit is not installed (apt-get install bandit)"
		return r
	}
	// -f json: the machine-readable report; -q: no banner on stderr;
	// --ignore-nosec: a "# nosec" comment is the code's own say, and the
	// code is what is being judged. An --ini or a .bandit file cannot be
	// picked up: the directory holds the copy only.
	out, status, detail := c.run(ctx, path, "snippet.py", code, "-f", "json", "-q", "--ignore-nosec", "snippet.py")
	r.Status, r.Detail = status, detail
	if status != OK {
		return r
	}
	r.Findings, err = ParseBandit(out)
	if err != nil {
		r.Status, r.Detail, r.Findings = Failed, err.Error(), []Finding{}
	}
	return r
}

// RunShellCheck analyses a shell script with shellcheck, as dialect
// (sh, bash, dash, ksh; "" means sh).
func (c Config) RunShellCheck(ctx context.Context, script, dialect string) Report {
	r := Report{Tool: ShellCheck, Findings: []Finding{}}
	path, err := lookPath(c.ShellCheckPath, ShellCheck)
	if err != nil {
		r.Status, r.Detail = Missing, "shellcheck is not installed (apt-get install shellcheck)"
		return r
	}
	switch dialect {
	case "sh", "bash", "dash", "ksh":
	default:
		dialect = "sh"
	}
	// -S style: every finding, whatever its level; the rules choose.
	out, status, detail := c.run(ctx, path, "snippet.sh", script, "-f", "json1", "-s", dialect, "-S", "style", "snippet.sh")
	r.Status, r.Detail = status, detail
	if status != OK {
		return r
	}
	r.Findings, err = ParseShellCheck(out)
	if err != nil {
		r.Status, r.Detail, r.Findings = Failed, err.Error(), []Finding{}
	}
	return r
}

// run writes code to a fresh directory and runs the analyser there, with an
// empty environment but PATH and a bound in time and output. Exit status 1
// means "issues found" for both tools; anything else non-zero is Failed.
func (c Config) run(ctx context.Context, path, file, code string, args ...string) ([]byte, Status, string) {
	if len(code) > maxCode {
		return nil, Failed, fmt.Sprintf("the code is %d bytes, more than the %d analysed", len(code), maxCode)
	}
	dir, err := os.MkdirTemp("", "sandboxio-analyse-")
	if err != nil {
		return nil, Failed, "temporary directory: " + err.Error()
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, file), []byte(code), 0o600); err != nil {
		return nil, Failed, "write the copy: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}
	cmd.Stdin = nil
	stdout := &capped{max: maxOutput}
	stderr := &capped{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, TimedOut, fmt.Sprintf("did not finish within %s", c.timeout())
	case ctx.Err() != nil:
		return nil, Failed, "cancelled"
	case stdout.over:
		return nil, Failed, fmt.Sprintf("printed more than %d bytes", maxOutput)
	}
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
		return nil, Failed, fmt.Sprintf("exited with %v", err)
	}
	return stdout.Bytes(), OK, ""
}

// capped keeps at most max bytes and records that more came.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); len(p) > room {
		c.over = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
