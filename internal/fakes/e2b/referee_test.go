package e2bserver

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// TestRefereeOfficialSDK drives the server with E2B's official JavaScript
// SDK (npm e2b, pinned in referee/package-lock.json) through every
// operation the adapter uses: referee/referee.mjs exits non-zero on any
// mismatch, and each step's result is checked here again, with what the
// server recorded of the requests.
func TestRefereeOfficialSDK(t *testing.T) {
	dir := needReferee(t)
	const key = "e2b_referee_canary_key_0123456789abcdef"
	srv := startServer(t, key)
	steps := fakeserver.RunReferee(t, dir, "E2B_API_URL="+srv.URL, "E2B_SANDBOX_URL="+srv.URL, "E2B_API_KEY="+key,
		"REFEREE_TEMPLATE="+TestTemplate, "E2B_DOMAIN=", "E2B_DEBUG=")
	want := map[string]map[string]any{
		"run-exit":         {"exitCode": 3.0, "stdout": "out-from-create-call\n", "stderr": "err\n"},
		"run-ok":           {"exitCode": 0.0, "stdout": "/home/user\nok\n"},
		"run-timeout":      {"error": "TimeoutError", "killed": true},
		"write":            {"path": "/tmp/referee/hello.txt", "readBack": "hello from the referee\nrelative\n"},
		"network-deny":     {"interfaces": []any{"lo"}},
		"set-timeout-list": {"state": "running"},
		"kill":             {"secondKill": false, "afterKill": "SandboxNotFoundError"},
		"lifetime":         {"listed": 0.0, "run": "SandboxNotFoundError", "kill": false},
		"bad-key":          {"error": "AuthenticationError"},
		"unknown-template": {"notFound": true},
		"done":             {},
	}
	fakeserver.CheckSteps(t, steps, want)
	id, _ := steps["create"]["sandboxId"].(string)
	rec, ok := srv.Observe(id)
	if !ok {
		t.Fatalf("no record of sandbox %q", id)
	}
	checkRefereeRecord(t, rec)
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes still running after the referee: %v", srv.Running())
	}
}

// checkRefereeRecord checks what the server saw of the SDK's create.
func checkRefereeRecord(t *testing.T, rec Record) {
	t.Helper()
	if rec.Path != "/v2/sandboxes" || rec.TemplateID != TestTemplate {
		t.Errorf("create went to %s for template %s", rec.Path, rec.TemplateID)
	}
	if rec.Metadata["needs encoding"] != "a&b=c %" || rec.Metadata["sandboxio.tenant_id"] != "acme" {
		t.Errorf("metadata as stored: %v", rec.Metadata)
	}
	if rec.EnvVars["REFEREE_VAR"] != "from-create" {
		t.Errorf("envVars as stored: %v", rec.EnvVars)
	}
	if rec.AllowInternetAccess == nil || *rec.AllowInternetAccess || !reflect.DeepEqual(rec.DenyOut, []string{"0.0.0.0/0"}) ||
		!reflect.DeepEqual(rec.AllowOut, []string{"8.8.8.8/32", "pypi.org"}) {
		t.Errorf("egress fields as received: allow_internet_access=%v denyOut=%v allowOut=%v", rec.AllowInternetAccess, rec.DenyOut, rec.AllowOut)
	}
	if rec.LocalNetwork != "none" || len(rec.Unenforced) != 1 || !strings.Contains(rec.Unenforced[0], "allowOut") {
		t.Errorf("local enforcement: network %s, unenforced %v (the allow list must be reported, not dropped)", rec.LocalNetwork, rec.Unenforced)
	}
	if rec.Timeout != 120*time.Second || rec.Ended != "killed" {
		t.Errorf("timeout %s (want the setTimeout value, 120s), ended %q", rec.Timeout, rec.Ended)
	}
}
