package daytonaserver

import (
	"strconv"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// TestRefereeOfficialSDK drives the server with Daytona's official
// TypeScript SDK (npm @daytonaio/sdk 0.190.1, pinned in
// referee/package-lock.json) through every operation the adapter uses:
// referee/referee.mjs exits non-zero on any mismatch, and each step's result
// is checked here, with what the server recorded of the requests.
func TestRefereeOfficialSDK(t *testing.T) {
	dir := needReferee(t)
	const key = "dtn_referee_canary_key_0123456789abcdef"
	const minute = 2 * time.Second
	srv := NewTestServer(t, key, minute)
	steps := fakeserver.RunReferee(t, dir, "DAYTONA_API_URL="+srv.APIURL(), "DAYTONA_API_KEY="+key, "DAYTONA_TARGET=us",
		"REFEREE_SNAPSHOT="+TestSnapshot, "REFEREE_MINUTE_MS="+strconv.Itoa(int(minute/time.Millisecond)),
		"DAYTONA_JWT_TOKEN=", "DAYTONA_ORGANIZATION_ID=", "DAYTONA_SERVER_URL=")
	id, _ := steps["create"]["sandboxId"].(string)
	want := map[string]map[string]any{
		"create":                  {"state": "started", "toolbox": srv.URL + "/toolbox"},
		"run-exit":                {"exitCode": 3.0, "stdout": "out-from-session\n", "stderr": "err\n"},
		"run-env":                 {"exitCode": 0.0, "stdout": "from-create"},
		"upload":                  {"stdout": "hello from the referee\n750\n"},
		"network-deny":            {"interfaces": []any{"lo"}},
		"run-timeout":             {"error": "DaytonaTimeoutError", "sleepers": "0"},
		"list":                    {"listed": []any{id}, "others": 0.0},
		"get":                     {"state": "started", "networkBlockAll": true, "memory": 1.0},
		"delete":                  {"afterDelete": "DaytonaNotFoundError", "secondDelete": "DaytonaNotFoundError"},
		"auto-stop":               {"get": "DaytonaNotFoundError", "run": "DaytonaNotFoundError"},
		"bad-key":                 {"error": "DaytonaAuthenticationError"},
		"unknown-snapshot":        {"error": "DaytonaNotFoundError"},
		"snapshot-with-resources": {"error": "DaytonaValidationError"},
		"done":                    {},
	}
	fakeserver.CheckSteps(t, steps, want)
	rec, ok := srv.Observe(id)
	if !ok {
		t.Fatalf("no record of sandbox %q", id)
	}
	if rec.Labels["needs encoding"] != "a&b=c %" || rec.Labels["sandboxio.tenant_id"] != "acme" || rec.Env["REFEREE_VAR"] != "from-create" {
		t.Errorf("labels and env as stored: %v %v", rec.Labels, rec.Env)
	}
	if !rec.NetworkBlockAll || rec.LocalNetwork != "none" || rec.CPU != 1 || rec.MemoryGB != 1 || rec.DiskGB != 1 ||
		rec.AutoStopInterval != 5 || rec.AutoDeleteInterval != 0 || rec.Ended != "deleted" {
		t.Errorf("create as received: %+v", rec)
	}
	if len(srv.Running()) != 0 {
		t.Errorf("sandboxes still there after the referee: %v", srv.Running())
	}
}
