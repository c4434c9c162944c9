package daytonaserver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Requests are validated as Daytona validates them: bearer auth, unknown and
// mistyped fields, limits, snapshots. None of these creates a sandbox.
func TestCreateValidation(t *testing.T) {
	const key = "dtn_validation_key"
	srv := NewTestServer(t, key, 0)
	for _, tc := range []struct {
		name, auth, body string
		status           int
		msg              string
	}{
		{"no key", "", `{}`, 401, "Invalid credentials"},
		{"wrong key", "Bearer nope", `{}`, 401, "Invalid credentials"},
		{"unknown field", "Bearer " + key, `{"snapshot":"` + TestSnapshot + `","lifetime":60}`, 400, `unknown field \"lifetime\"`},
		{"mistyped memory", "Bearer " + key, `{"memory":"1"}`, 400, "memory"},
		{"fractional memory", "Bearer " + key, `{"memory":0.5}`, 400, "memory"},
		{"zero cpu", "Bearer " + key, `{"cpu":0}`, 400, "cpu must not be less than 1"},
		{"memory over the limit", "Bearer " + key, `{"buildInfo":{"dockerfileContent":"FROM ` + TestSnapshot + `\n"},"memory":64}`, 400, "exceeds maximum"},
		// v0.190.0's controller: resources only with a declarative build.
		{"resources with a snapshot", "Bearer " + key, `{"snapshot":"` + TestSnapshot + `","memory":1}`, 400, "Cannot specify Sandbox resources when using a snapshot"},
		{"resources with the default snapshot", "Bearer " + key, `{"cpu":1}`, 400, "Cannot specify Sandbox resources when using a snapshot"},
		{"snapshot and build", "Bearer " + key, `{"snapshot":"` + TestSnapshot + `","buildInfo":{"dockerfileContent":"FROM ` + TestSnapshot + `\n"}}`, 400, "Cannot specify a snapshot when using a build info entry"},
		{"build of more than a base image", "Bearer " + key, `{"buildInfo":{"dockerfileContent":"FROM ` + TestSnapshot + `\nRUN id\n"}}`, 400, "bare FROM"},
		{"unknown build field", "Bearer " + key, `{"buildInfo":{"dockerfile":"FROM x"}}`, 400, `unknown field \"dockerfile\"`},
		{"negative auto-stop", "Bearer " + key, `{"autoStopInterval":-1}`, 400, "autoStopInterval"},
		{"unknown snapshot", "Bearer " + key, `{"snapshot":"nope"}`, 404, "Snapshot nope not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.APIURL()+"/sandbox", strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.msg) {
				t.Fatalf("%d %s, want %d with %q", resp.StatusCode, b, tc.status, tc.msg)
			}
		})
	}
	if n := len(srv.Running()); n != 0 {
		t.Fatalf("%d sandboxes created by refused requests", n)
	}
}
