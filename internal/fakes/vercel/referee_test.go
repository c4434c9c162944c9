package vercelserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "referee.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REFEREE_BASE_URL="+srv.URL, "REFEREE_TOKEN="+token, "REFEREE_TEAM="+TestTeam,
		"REFEREE_PROJECT="+TestProject, "VERCEL_OIDC_TOKEN="+oidc, "VERCEL_URL=", "VERCEL_TELEMETRY_DISABLED=1", "DEBUG_FETCH=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			if s, ok := m["step"].(string); ok {
				steps[s] = m
			}
		}
	}
	if err != nil {
		t.Fatalf("the official SDK failed against the server: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
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
	for step, fields := range want {
		got, ok := steps[step]
		if !ok {
			t.Errorf("step %s did not report", step)
			continue
		}
		for k, v := range fields {
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("step %s: %s = %#v, want %#v", step, k, got[k], v)
			}
		}
	}
	if ms, _ := steps["run-timeout"]["elapsedMs"].(float64); ms < 900 || ms > 5000 {
		t.Errorf("the SDK's 1 s command timeout took %.0f ms", ms)
	}
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
