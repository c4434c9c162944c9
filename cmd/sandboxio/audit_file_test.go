package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// --audit never opens a symlink: it is refused before anything runs, with
// the link named, and the file it points to gets nothing.
func TestAuditFlag_RefusesASymlink(t *testing.T) {
	spec, sum := specFile(t, "acme", "audit-link")
	dir := t.TempDir()
	victim := writeFile(t, dir, "victim.log", "")
	link := filepath.Join(dir, "audit.jsonl")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/sandboxio-test.sock")
	for _, args := range [][]string{
		{"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "audit-link", "--audit", link, "--", "true"},
		{"reap", "--dry-run", "--audit", link},
	} {
		code, _, errOut := cli(t, "", args...)
		if code != exitUsage || !strings.Contains(errOut, link+" is a symbolic link") {
			t.Errorf("%s --audit LINK: exit %d, stderr %q; want exit 2 naming the symlink", args[0], code, errOut)
		}
	}
	if b, _ := os.ReadFile(victim); len(b) != 0 {
		t.Errorf("the symlink's target got records:\n%s", b)
	}
}

// The watcher of a CLI killed with SIGKILL appends the last record to the
// audit file only while the path is still the file the CLI opened: the
// path replaced by a symlink to another file (after the CLI opened it)
// gets nothing written through it. The watcher says why in its log.
func TestWatcherWritesNoTrailThroughAReplacedAuditPath(t *testing.T) {
	needDocker(t)
	session := "audit-swap-" + runID
	spec, sum := specFile(t, "acme", session)
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	victim := writeFile(t, dir, "victim.log", "")
	reaperLog := filepath.Join(dir, "reaper.log")
	p := startCLIProc(t, []string{"SANDBOXIO_DOCKER_REAPER_GRACE=100ms", "SANDBOXIO_DOCKER_REAPER_LOG=" + reaperLog},
		"run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit, "--quiet", "--", "sleep", "25")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(audit); strings.Contains(string(b), `"event":"created"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no created record within a minute:\n%s", p.stderrText())
		}
	}
	if err := os.Rename(audit, audit+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, audit); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	// The watcher removes the sandbox, then writes (or refuses) the trail.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(reaperLog)
		v, _ := os.ReadFile(victim)
		if strings.Contains(string(b), "audit:") || len(v) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher wrote nothing and logged no refusal within a minute:\n%s", b)
		}
	}
	if v, _ := os.ReadFile(victim); len(v) != 0 {
		t.Errorf("the watcher wrote through the symlink into another file:\n%s", v)
	}
	if b, _ := os.ReadFile(reaperLog); !strings.Contains(string(b), "is a symbolic link") {
		t.Errorf("the watcher's log does not say why it wrote nothing:\n%s", b)
	}
	if n := dockertest.Left(t, "test_run="+runID, "sandboxio.session_id="+session); n != 0 {
		t.Fatalf("%d containers left after the watcher", n)
	}
}
