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
	daytonaserver "github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/daytona"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestRunCLI_Daytona: `sandboxio run --spec` opens, runs and closes on
// Daytona through the same CLI, against the local Daytona server: the exit
// code and both streams come back apart, the audit names Daytona's sandbox
// ID (deleted at close), blocked_egress stays null, and the API key appears
// nowhere in the output or the audit.
func TestRunCLI_Daytona(t *testing.T) {
	srv := daytonaServer(t)
	spec, sum := daytonaSpecFile(t, "s-dtn-"+runID)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", "s-dtn-"+runID,
		"--audit", audit, "--", "sh", "-c", "echo hello from daytona; echo oops >&2; exit 3")
	if code != 3 || out != "hello from daytona\n" || !strings.Contains(errOut, "oops\n") || strings.Contains(errOut, "hello") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var id string
	for _, r := range auditLines(t, audit) {
		if r["event"] == "created" {
			id, _ = r["sandbox_id"].(string)
		}
		if v, ok := r["blocked_egress"]; !ok || v != nil {
			t.Errorf("%v record: blocked_egress %v (present %v), want null (Daytona does not report it)", r["event"], v, ok)
		}
	}
	rec, ok := srv.Observe(id)
	if !ok || rec.Ended != "deleted" || !rec.NetworkBlockAll || rec.Labels["sandboxio.tenant_id"] != "acme" {
		t.Errorf("audit sandbox_id %q: the server's record %+v (want Daytona's sandbox ID, deny as networkBlockAll, deleted at close)", id, rec)
	}
	data, _ := os.ReadFile(audit)
	for what, s := range map[string]string{"stdout": out, "stderr": errOut, "audit": string(data)} {
		if strings.Contains(s, daytonaTestKey) {
			t.Errorf("the Daytona API key leaked into %s", what)
		}
	}
	if r := srv.Running(); len(r) != 0 {
		t.Errorf("sandboxes left on the server: %v", r)
	}
}

// daytonaSpecFile renders the tenant spec of a default Daytona template
// of the server's snapshot.
func daytonaSpecFile(t *testing.T, session string) (string, string) {
	t.Helper()
	return specFile(t, "acme", session, func(x *inputs.Template) {
		x.Backend, x.Image, x.Caps = "daytona://", daytonaserver.TestSnapshot, model.CapsRequest{}
	})
}

// daytonaTestKey is the API key of the package's Daytona server: a canary.
const daytonaTestKey = "dtn_cli_canary_key_7c2e9a4f1b3d5e6f8a0b"

// One Daytona server for the package: the CLI's process keeps one backend
// per DSN target, which reads DAYTONA_API_KEY and DAYTONA_API_URL once, so
// every Daytona test of this process must see the same key and URL.
// TestMain closes it.
var sharedDaytona struct {
	once   sync.Once
	srv    *daytonaserver.Server
	docker backends.Backend
	err    error
}

// daytonaServer returns the package's Daytona server and points
// DAYTONA_API_KEY and DAYTONA_API_URL at it for the test.
func daytonaServer(t *testing.T) *daytonaserver.Server {
	t.Helper()
	daytonaserver.NeedDocker(t)
	sharedDaytona.once.Do(func() {
		d, err := docker.New()
		if err != nil {
			sharedDaytona.err = err
			return
		}
		sharedDaytona.docker = d
		sharedDaytona.srv, sharedDaytona.err = daytonaserver.Start(daytonaserver.Config{APIKey: daytonaTestKey, Docker: d,
			MaxCommand: 10 * time.Minute, Snapshots: map[string]string{daytonaserver.TestSnapshot: docker.LocalImage}})
	})
	if sharedDaytona.err != nil {
		t.Fatalf("the Daytona server: %v", sharedDaytona.err)
	}
	t.Setenv("DAYTONA_API_KEY", daytonaTestKey)
	t.Setenv("DAYTONA_API_URL", sharedDaytona.srv.APIURL())
	t.Cleanup(sharedDaytona.srv.Clear)
	return sharedDaytona.srv
}

// closeDaytona closes the package's Daytona server, if a test started it;
// it deletes every sandbox the server still holds.
func closeDaytona() {
	if sharedDaytona.srv != nil {
		if err := sharedDaytona.srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the Daytona server:", err)
		}
	}
	if sharedDaytona.docker != nil {
		_ = sharedDaytona.docker.Close()
	}
}
