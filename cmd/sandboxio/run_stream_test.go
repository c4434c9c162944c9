package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// The CLI as a separate process streams the command's output: the first
// line is on its stdout while the command still runs. The command waits for
// a marker file that the test creates only after reading that line, so
// buffered output would show "gave-up" instead of "after-go": the order is
// proven by content, not by a timer. Meanwhile stderr stays apart, a secret
// printed in two writes a second apart is redacted in the stream, and the
// secret's value is not in the running CLI's /proc/PID/environ.
func TestRunCLI_StreamsOutputAndKeepsSecretsOutOfEnviron(t *testing.T) {
	cli := dockertest.Need(t)
	const secretName = "SANDBOXIO_TEST_STREAM_SECRET"
	canary := "CANARYvalue-" + runID // printed in two parts: "CANARYvalue-", then runID
	spec, sum := specFile(t, "acme", "stream", func(x *inputs.Template) { x.SecretNames = []string{secretName} })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := `echo first; echo on-stderr >&2; v=$` + secretName + `; printf '%s' "${v%%-*}-"; sleep 1; printf '%s\n' "${v#*-}"; ` +
		`i=0; while [ ! -e /tmp/go ] && [ $i -lt 40 ]; do sleep 1; i=$((i+1)); done; [ -e /tmp/go ] && echo after-go || echo gave-up`
	cmd := exec.Command(exe, "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "stream", "--quiet",
		"--timeout", "30s", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SANDBOXIO_TEST_RUN_ID="+runID, "SANDBOXIO_DOCKER_REAPER_GRACE=60s", secretName+"="+canary)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A failed test kills the CLI mid-command: its sandbox goes too.
		_ = cmd.Process.Kill()
		cs, _ := cli.ContainerList(context.WithoutCancel(t.Context()), container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", "test_run="+runID), filters.Arg("label", "sandboxio.session_id=stream"))})
		for _, c := range cs {
			_ = cli.ContainerRemove(context.WithoutCancel(t.Context()), c.ID, container.RemoveOptions{Force: true})
		}
	})
	lines := make(chan string, 10)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdoutPipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended early; stderr:\n%s", stderr.String())
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatalf("no line on stdout within 60s; stderr:\n%s", stderr.String())
		}
		return ""
	}
	if l := next(); l != "first" {
		t.Fatalf("first line %q", l)
	}
	if l := next(); l != "[REDACTED]" {
		t.Fatalf("the secret, printed in two writes, came out as %q", l)
	}

	// The CLI runs the command now: its environment holds no secret value.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(environ, []byte(canary)) || bytes.Contains(environ, []byte(secretName+"=")) {
		t.Fatalf("the secret is in the running CLI's /proc/%d/environ", cmd.Process.Pid)
	}
	if !bytes.Contains(environ, []byte(cliChildEnv+"=1")) {
		t.Fatalf("read the wrong process's environ: %q", environ)
	}

	// Let the command go on: create its marker file from outside.
	cs, err := cli.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "test_run="+runID), filters.Arg("label", "sandboxio.session_id=stream"))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("the sandbox: %v, %d found", err, len(cs))
	}
	ex, err := cli.ContainerExecCreate(t.Context(), cs[0].ID, container.ExecOptions{Cmd: []string{"touch", "/tmp/go"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerExecStart(t.Context(), ex.ID, container.ExecStartOptions{}); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "after-go" {
		t.Fatalf("third line %q, want after-go (the marker file was created after the first line arrived)", l)
	}
	for l := range lines {
		t.Fatalf("more on stdout: %q", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "on-stderr\n") || strings.Contains(stderr.String(), canary) {
		t.Fatalf("stderr: %q", stderr.String())
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id=stream"); n != 0 {
		t.Fatalf("%d containers left", n)
	}
}

// More than 64 MiB on stdout: ResourceLimitExceeded(output), exit 68 (not
// 70, which says the backend failed), with what was printed until then
// streamed.
func TestRunCLI_OutputCap(t *testing.T) {
	needDocker(t)
	// Generous: 64 MiB through the daemon takes a while, far longer on a
	// machine whose cores are busy.
	timeout, lifetime := int64(180), int64(240)
	spec, sum := specFile(t, "acme", "outcap", func(x *inputs.Template) { x.TimeoutSeconds, x.LifetimeSeconds = &timeout, &lifetime })
	n := &countWriter{}
	var errb bytes.Buffer
	code := run(t.Context(), []string{"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "outcap", "--quiet",
		"--", "yes", "0123456789abcdef0123456789abcdef"}, &env{stdout: n, stderr: &errb, stdin: strings.NewReader(""), now: time.Now})
	if code != exitLimit || !strings.Contains(errb.String(), "sandboxio run: ResourceLimitExceeded(output): ") {
		t.Fatalf("exit %d, stderr %q; want %d and ResourceLimitExceeded(output)", code, errb.String(), exitLimit)
	}
	if n.n == 0 || n.n > 64<<20 {
		t.Fatalf("%d bytes streamed before the cap", n.n)
	}
	if c := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id=outcap"); c != 0 {
		t.Fatalf("%d containers left", c)
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

// With --spec - the spec is read before the CLI re-executes itself without
// the secrets: it is handed over with them, and the secret still reaches
// the command (redacted in what it prints).
func TestRunCLI_SecretsHandedOverWithSpecOnStdin(t *testing.T) {
	needDocker(t)
	const secretName = "SANDBOXIO_TEST_HANDOFF_SECRET"
	canary := "HANDOFFvalue-" + runID
	spec, sum := specFile(t, "acme", "handoff", func(x *inputs.Template) { x.SecretNames = []string{secretName} })
	data, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "--spec", "-", "--spec-sha256", sum, "--tenant", "acme", "--session", "handoff", "--quiet",
		"--", "sh", "-c", `echo "len=${#`+secretName+`} value=$`+secretName+`"`)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SANDBOXIO_TEST_RUN_ID="+runID, "SANDBOXIO_DOCKER_REAPER_GRACE=60s", secretName+"="+canary)
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout %q\nstderr %q", err, stdout.String(), stderr.String())
	}
	want := fmt.Sprintf("len=%d value=[REDACTED]\n", len(canary))
	if stdout.String() != want || strings.Contains(stderr.String(), canary) || strings.Contains(stderr.String(), "warning: could not re-execute") {
		t.Fatalf("stdout %q, want %q; stderr %q", stdout.String(), want, stderr.String())
	}
}
