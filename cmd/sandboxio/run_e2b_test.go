package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	e2bserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/e2b"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestRunCLI_E2B: `sandboxio run --spec` opens, runs and closes on E2B
// through the same CLI, against the local E2B conformance server; the
// audit names E2B's sandbox ID, blocked_egress stays null, and the API key
// appears nowhere in the output or the audit.
func TestRunCLI_E2B(t *testing.T) {
	srv := e2bServer(t)
	key := e2bTestKey
	spec, sum := specFile(t, "acme", "s-e2b-"+runID, func(x *inputs.Template) {
		x.Backend, x.Image, x.Caps = "e2b://", e2bserver.TestTemplate, model.CapsRequest{}
	})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "s-e2b-"+runID,
		"--audit", audit, "--", "sh", "-c", "echo hello from e2b; echo oops >&2; exit 3")
	if code != 3 || out != "hello from e2b\n" || !strings.Contains(errOut, "oops\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	recs := auditLines(t, audit)
	var id string
	for _, r := range recs {
		if r["event"] == "created" {
			id, _ = r["sandbox_id"].(string)
		}
		if v, ok := r["blocked_egress"]; ok && v != nil {
			t.Errorf("blocked_egress %v, want null (E2B does not report it)", v)
		}
	}
	rec, ok := srv.Observe(id)
	if !ok || rec.Ended != "killed" {
		t.Errorf("audit sandbox_id %q: the server's record %+v (want E2B's sandbox ID, killed at close)", id, rec)
	}
	data, _ := os.ReadFile(audit)
	for what, s := range map[string]string{"stdout": out, "stderr": errOut, "audit": string(data)} {
		if strings.Contains(s, key) {
			t.Errorf("the E2B API key leaked into %s", what)
		}
	}
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes left running: %v", srv.Running())
	}
}

// e2bTestKey is the API key of the package's E2B server: a canary.
const e2bTestKey = "e2b_cli_canary_key_4b1d9f0e8c7a6b5d4c3e2f10"

// One E2B server for the package: the CLI's process keeps one backend per
// DSN target (the sandbox package's shared backends), which reads
// E2B_API_KEY and E2B_API_URL once, so every E2B test of this process must
// see the same key and URL. TestMain closes it.
var sharedE2B struct {
	once   sync.Once
	srv    *e2bserver.Server
	docker backends.Backend
	err    error
}

// e2bServer returns the package's E2B server and points E2B_API_KEY,
// E2B_API_URL and E2B_SANDBOX_URL at it for the test.
func e2bServer(t *testing.T) *e2bserver.Server {
	t.Helper()
	e2bserver.NeedDocker(t)
	sharedE2B.once.Do(func() {
		d, err := docker.New()
		if err != nil {
			sharedE2B.err = err
			return
		}
		sharedE2B.docker = d
		sharedE2B.srv, sharedE2B.err = e2bserver.Start(e2bserver.Config{APIKey: e2bTestKey, Docker: d, MaxTimeout: 10 * time.Minute,
			Templates: map[string]e2bserver.Template{e2bserver.TestTemplate: {Image: e2bserver.TemplateImage, CPUCount: 1, MemoryMB: 512, DiskSizeMB: 1024}}})
	})
	if sharedE2B.err != nil {
		t.Fatalf("the E2B server: %v", sharedE2B.err)
	}
	t.Setenv("E2B_API_KEY", e2bTestKey)
	t.Setenv("E2B_API_URL", sharedE2B.srv.URL)
	t.Setenv("E2B_SANDBOX_URL", sharedE2B.srv.URL)
	t.Cleanup(sharedE2B.srv.Clear)
	return sharedE2B.srv
}

// closeE2B closes the package's E2B server, if a test started it; it
// kills every sandbox the server still holds.
func closeE2B() {
	if sharedE2B.srv != nil {
		if err := sharedE2B.srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the E2B server:", err)
		}
	}
	if sharedE2B.docker != nil {
		_ = sharedE2B.docker.Close()
	}
}
