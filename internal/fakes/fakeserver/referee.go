package fakeserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// NeedReferee returns the fake's referee directory (./referee, where its
// package.json and node_modules are), and skips the test (or, with
// RequireDockerEnv=1, fails it) when node or the vendor's SDK, the npm
// package sdk, is missing.
func NeedReferee(t testing.TB, vendor, sdk string) string {
	t.Helper()
	dir, err := filepath.Abs("referee")
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, sdkErr := os.Stat(filepath.Join(dir, "node_modules", sdk, "package.json"))
	if nodeErr != nil || sdkErr != nil {
		msg := fmt.Sprintf("the referee needs node and %s's SDK installed by `make referee-deps` (node: %v, sdk: %v)", vendor, nodeErr, sdkErr)
		if os.Getenv(RequireDockerEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	return dir
}

// RunReferee runs referee.mjs in dir with env added to the test's
// environment, and returns the steps it reported (a JSON object a line,
// named by its "step"). The test fails when the referee exits non-zero.
func RunReferee(t testing.TB, dir string, env ...string) map[string]map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	steps, out, stderr, err := Referee(ctx, dir, env)
	if err != nil {
		t.Fatalf("the official SDK failed against the server: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	return steps
}

// Referee runs `node referee.mjs` in dir with env added to this process's
// environment, and returns the steps it reported on stdout (a JSON object a
// line, named by its "step"), its stdout and stderr, and its error.
func Referee(ctx context.Context, dir string, env []string) (steps map[string]map[string]any, stdout []byte, stderr string, err error) {
	cmd := exec.CommandContext(ctx, "node", "referee.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	steps = map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			if s, ok := m["step"].(string); ok {
				steps[s] = m
			}
		}
	}
	return steps, out, errBuf.String(), err
}

// CheckSteps fails the test for every step of want that did not report,
// or that reported another value for one of its fields, and when the SDK's
// 1 s command timeout (step run-timeout) did not end in about a second.
func CheckSteps(t testing.TB, steps, want map[string]map[string]any) {
	t.Helper()
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
}
