package vercelserver

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// TestRefereeOfficialSDK drives the server with Vercel's official
// JavaScript SDK (npm @vercel/sandbox, pinned in referee/package-lock.json)
// through every operation the adapter uses: each step's result is checked
// here, with what the server recorded of the requests.
func TestRefereeOfficialSDK(t *testing.T) {
	dir := needReferee(t)
	const token = "vercel_referee_canary_token_0123456789"
	oidc := OIDCToken(TestTeam, TestProject, "referee")
	srv := NewTestServer(t, token, oidc)
	steps := fakeserver.RunReferee(t, dir, "REFEREE_BASE_URL="+srv.URL, "REFEREE_TOKEN="+token, "REFEREE_TEAM="+TestTeam,
		"REFEREE_PROJECT="+TestProject, "VERCEL_OIDC_TOKEN="+oidc, "VERCEL_URL=", "VERCEL_TELEMETRY_DISABLED=1", "DEBUG_FETCH=")
	want := map[string]map[string]any{
		"create":       {"name": "referee-main", "status": "running", "vcpus": 1.0, "memory": 2048.0, "networkPolicy": "deny-all"},
		"run-exit":     {"exitCode": 3.0, "stdout": "out from-create\n", "stderr": "err\n"},
		"run-env":      {"exitCode": 0.0, "stdout": "/tmp\nfrom-cmd\n", "streamed": "/tmp\nfrom-cmd\n"},
		"run-timeout":  {"exitCode": 137.0, "stdout": "before\n"},
		"kill-command": {"before": nil, "exitCode": 137.0},
		"write":        {"stdout": "hello from the referee\n640\n"},
		"network-deny": {"interfaces": []any{"lo"}},
		"list-by-tag":  {"found": true, "others": 0.0},
		"get":          {"status": "running", "name": "referee-main"},
		"stop":         {"status": "stopped", "after": "stopped"},
		"delete":       {"afterStatus": 404.0},
		"lifetime":     {"status": "stopped", "runFails": true},
		"bad-token":    {"status": 403.0},
		"wrong-team":   {"status": 403.0},
		"refused":      {"tags": 400.0, "runtime": 400.0, "vcpus": 400.0},
		"oidc":         {"status": "running"},
		"done":         {},
	}
	fakeserver.CheckSteps(t, steps, want)
	rec, ok := srv.Observe("referee-main")
	if !ok {
		t.Fatal("no record of sandbox referee-main")
	}
	if rec.Path != "/v2/sandboxes" || rec.Runtime != "node22" || rec.Timeout != 2*time.Minute || rec.NetworkMode != "deny-all" ||
		rec.LocalNetwork != "none" || rec.Tags["sandboxio.tenant_id"] != "acme" || rec.Env["REFEREE_VAR"] != "from-create" ||
		rec.Ended != "stopped" || !rec.Deleted {
		t.Errorf("the server's record of the SDK's sandbox: %+v", rec)
	}
	// The OIDC sandbox's allow list: received as the SDK sent it, and
	// reported unenforced (the local sandbox has no network at all).
	srv.mu.Lock()
	records := maps.Clone(srv.records)
	srv.mu.Unlock()
	for _, r := range records {
		if r.Runtime == "python3.13" {
			if !reflect.DeepEqual(r.AllowDomains, []string{"pypi.org"}) || !reflect.DeepEqual(r.AllowCIDRs, []string{"10.1.0.0/16"}) ||
				r.LocalNetwork != "none" || len(r.Unenforced) != 1 || !strings.Contains(r.Unenforced[0], "pypi.org") {
				t.Errorf("the OIDC sandbox's network: %+v", r)
			}
		}
	}
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes still running after the referee: %v", srv.Running())
	}
}
