package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/analysers"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/tools"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
)

// The referee of `sandboxio mcp` is the official TypeScript MCP SDK's
// client (npm @modelcontextprotocol/sdk, pinned in
// mcpreferee/package-lock.json and installed by `make referee-deps`): it
// starts the server as an agent host does, lists the tools, calls each, and
// disconnects; the sandbox must then be gone from the daemon.

const refereeDir = "mcpreferee"

func needMCPReferee(t *testing.T) {
	t.Helper()
	_, nodeErr := exec.LookPath("node")
	_, sdkErr := os.Stat(filepath.Join(refereeDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if nodeErr != nil || sdkErr != nil {
		msg := fmt.Sprintf("the MCP referee needs node and @modelcontextprotocol/sdk installed by `make referee-deps` (node: %v, sdk: %v)", nodeErr, sdkErr)
		if os.Getenv(dockertest.RequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
}

// refereeSteps runs the referee and returns its steps by name, and all it
// printed (the server's stderr included, which the stdio transport passes
// through).
func refereeSteps(t *testing.T, env []string) (map[string]map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	steps, out, stderr, err := fakeserver.Referee(ctx, refereeDir, env)
	if err != nil {
		t.Fatalf("the official MCP client failed against sandboxio mcp: %v\nstdout:\n%s\nstderr:\n%s", err, out, tail(stderr, 4000))
	}
	if _, ok := steps["done"]; !ok {
		t.Fatalf("the referee did not finish\nstdout:\n%s\nstderr:\n%s", out, tail(stderr, 4000))
	}
	return steps, string(out) + "\n" + stderr
}

// serverEnv is the environment the host gives the server: this test binary
// turned into the CLI, labelled with the run id, the secret's value set.
func serverEnv(secret string) map[string]string {
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), cliChildEnv: "1",
		dockertest.RunIDEnv: runID, docker.ScopeEnv: os.Getenv(docker.ScopeEnv), "REFEREE_SECRET": secret}
	for _, k := range []string{"DOCKER_HOST", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// longOutput is what the referee's run-long step prints, redacted.
func longOutput() string {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line-%d\n", i)
		if i == 2500 {
			b.WriteString("mid=[REDACTED]\n")
		}
	}
	return b.String()
}

func TestMCPReferee_Stdio(t *testing.T) {
	needMCPReferee(t)
	needDocker(t)
	// Without shellcheck the hook asks for approval, and the referee gives none.
	tools.NeedAnalysers(t, analysers.ShellCheck)
	canary := "CANARY-mcp-s3cr3t-" + runID
	session := "mcp-ref-" + runID
	spec, sum := specFile(t, "acme", session, func(x *inputs.Template) { x.SecretNames = []string{"REFEREE_SECRET"} })
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	server, _ := json.Marshal(map[string]any{"command": exe, "env": serverEnv(canary),
		"args": []string{"mcp", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit, "--quiet",
			"--policy", recipePolicy(t)}})
	steps, everything := refereeSteps(t, []string{"REFEREE_MODE=stdio", "REFEREE_SERVER=" + string(server),
		"REFEREE_STEPS=" + strings.Join(refereeStdioSteps, ",")})

	checkRefereeSteps(t, steps)
	if t.Failed() {
		t.Logf("the referee and the server's stderr:\n%s", tail(everything, 6000))
	}
	auditText, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the referee's output (every result, the server's stderr)": everything, "the audit log": string(auditText)} {
		if strings.Contains(text, canary) {
			t.Errorf("the secret's value is in %s", what)
		}
	}
	// The client disconnected: the sandbox is gone from the daemon, and the
	// audit log records its close. (The SDK's client closes the server's
	// standard input, then sends SIGTERM after 2 s: either ends the session;
	// TestMCP_DisconnectClosesTheSandbox tells them apart.)
	waitGone(t, "sandboxio.session_id="+session)
	checkClosedRecord(t, audit, "closed", "cancelled")
}

// refereeStdioSteps are the referee's steps this build answers.
// run-timeout is last: on a loaded host the backend may kill the whole
// sandbox when it cannot stop the timed-out command's processes one by one
// (SandboxGone afterwards), and the blocked and approval calls are decided
// before anything would run.
var refereeStdioSteps = []string{"run-exit", "run-long", "run-code", "upload-text", "upload-binary", "read-text", "read-binary",
	"read-part", "read-missing", "bad-args", "blocked", "approval", "run-timeout"}

// recipePolicy is the recipe's team exec policy, which makes the built-in
// exec rules mandatory.
func recipePolicy(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", "mcp", "policy"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRefereeSteps checks what the official client received at each step.
func checkRefereeSteps(t *testing.T, steps map[string]map[string]any) {
	t.Helper()
	get := func(step string, keys ...string) any {
		var v any = steps[step]
		for _, k := range keys {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		return v
	}
	want := func(step string, got, w any) {
		t.Helper()
		if !reflect.DeepEqual(got, w) {
			t.Errorf("step %s: got %.300s, want %.300s", step, fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", w))
		}
	}
	want("connect", get("connect", "server", "name"), "sandboxio")
	if !strings.Contains(fmt.Sprint(get("connect", "instructions")), `tenant "acme"`) {
		t.Errorf("instructions do not name the tenant: %v", get("connect", "instructions"))
	}
	want("tools", get("tools", "names"), []any{"read_file", "run", "run_code", "upload"})
	want("tools", get("tools", "readOnly"), []any{"read_file"})
	if langs := fmt.Sprint(get("tools", "languages")); !strings.Contains(langs, "sh") || !strings.Contains(langs, "python") {
		t.Errorf("run_code's language enum: %s", langs)
	}

	want("run-exit", get("run-exit", "isError"), false)
	want("run-exit", get("run-exit", "sc", "exit_code"), 3.0)
	want("run-exit", get("run-exit", "sc", "stdout", "head"), "hello\n")
	want("run-exit", get("run-exit", "sc", "stderr", "head"), "oops\n")
	if !strings.HasPrefix(fmt.Sprint(get("run-exit", "text")), "exit code 3 ") {
		t.Errorf("run-exit text: %q", get("run-exit", "text"))
	}

	long := longOutput()
	want("run-long", get("run-long", "sc", "stdout", "bytes"), float64(len(long)))
	want("run-long", get("run-long", "sc", "stdout", "head"), long[:2048])
	if tl := fmt.Sprint(get("run-long", "sc", "stdout", "tail")); !strings.HasSuffix(long, tl) || len(tl) != 2048 {
		t.Errorf("run-long tail (%d bytes) is not the last 2048 bytes of the output", len(tl))
	}
	want("run-long", get("run-long", "sc", "stdout", "omitted_bytes"), float64(len(long)-4096))
	if p := fmt.Sprint(get("run-long", "sc", "stdout", "path")); !regexp.MustCompile(`^/tmp/sandboxio-mcp/\d{4}-run\.stdout$`).MatchString(p) {
		t.Errorf("run-long: the kept stream's path %q", p)
	}
	if !strings.Contains(fmt.Sprint(get("run-long", "text")), "the full output is in /tmp/sandboxio-mcp/") {
		t.Errorf("run-long text does not name the kept file: %.300s", get("run-long", "text"))
	}
	if errs, _ := get("read-kept", "errors").([]any); len(errs) > 0 {
		t.Errorf("read-kept: read_file of the kept stream failed: %v", errs)
	}
	want("read-kept", get("read-kept", "joined"), long)
	want("read-kept", get("read-kept", "size"), float64(len(long)))
	want("read-kept", []any{get("read-kept", "eof1"), get("read-kept", "eof2")}, []any{false, true})

	want("run-code", get("run-code", "sc", "stdout", "head"), "key=[REDACTED]\n")
	want("run-code", get("run-code", "sc", "stderr", "head"), "err=[REDACTED]\n")
	want("upload-text", []any{get("upload-text", "isError"), get("upload-text", "sc", "bytes")}, []any{false, 23.0})
	want("upload-binary", get("upload-binary", "isError"), false)
	want("read-text", []any{get("read-text", "sc", "content"), get("read-text", "sc", "encoding"), get("read-text", "sc", "size"), get("read-text", "sc", "eof")},
		[]any{"hello from the referee\n", "utf-8", 23.0, true})
	want("read-binary", []any{get("read-binary", "sc", "content"), get("read-binary", "sc", "encoding")},
		[]any{base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255, 254, 10, 0}), "base64"})
	want("read-part", []any{get("read-part", "sc", "content"), get("read-part", "sc", "offset"), get("read-part", "sc", "eof")}, []any{"from", 6.0, false})
	want("read-missing", []any{get("read-missing", "isError"), get("read-missing", "class")}, []any{true, "ConfigurationError"})
	if !strings.Contains(fmt.Sprint(get("read-missing", "text")), "no such file: /work/ref/none") {
		t.Errorf("read-missing text: %v", get("read-missing", "text"))
	}
	want("run-timeout", []any{get("run-timeout", "isError"), get("run-timeout", "class")}, []any{true, "ExecutionTimeout"})
	if !strings.HasPrefix(fmt.Sprint(get("run-timeout", "text")), "ExecutionTimeout") {
		t.Errorf("run-timeout text does not start with the class: %v", get("run-timeout", "text"))
	}
	want("bad-args", get("bad-args", "isError"), true)
	want("blocked", []any{get("blocked", "isError"), get("blocked", "class"), get("blocked", "rule")}, []any{true, "ExecutionBlocked", "SBX-EXE-001"})
	want("approval", []any{get("approval", "isError"), get("approval", "class"), get("approval", "rule")}, []any{true, "ApprovalRequired", "SBX-EXE-005"})
	for _, step := range []string{"blocked", "approval"} {
		if text := fmt.Sprint(get(step, "text")); !strings.HasPrefix(text, fmt.Sprint(get(step, "class"))) || !strings.Contains(text, "SBX-EXE-00") {
			t.Errorf("step %s: the text a model reads does not start with the class and name the rule: %s", step, text)
		}
	}
}

// With --approve-by-elicitation, a call that needs approval is put to the
// client's user (the referee answers through the SDK's elicitation
// handler): accepted, it runs; declined, it is ApprovalRequired and nothing
// ran.
func TestMCPReferee_Elicitation(t *testing.T) {
	needMCPReferee(t)
	needDocker(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{"accept", "decline"} {
		t.Run(answer, func(t *testing.T) {
			session := "mcp-elicit-" + answer + "-" + runID
			spec, sum := specFile(t, "acme", session)
			server, _ := json.Marshal(map[string]any{"command": exe, "env": serverEnv("unused-secret-value"),
				"args": []string{"mcp", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--quiet",
					"--policy", recipePolicy(t), "--approve-by-elicitation"}})
			steps, _ := refereeSteps(t, []string{"REFEREE_MODE=stdio", "REFEREE_SERVER=" + string(server), "REFEREE_ELICIT=" + answer,
				"REFEREE_STEPS=approval"})
			asked := fmt.Sprint(steps["elicited"]["messages"])
			if !strings.Contains(asked, "Rule SBX-EXE-005") || !strings.Contains(asked, "tenant acme session "+session) {
				t.Errorf("the user was asked %s", asked)
			}
			got := steps["approval"]
			sc, _ := got["sc"].(map[string]any)
			stdout, _ := sc["stdout"].(map[string]any)
			switch answer {
			case "accept":
				if got["isError"] != false || stdout["head"] != "approved-and-ran\n" {
					t.Errorf("approved, the call did not run: %v", got)
				}
			default:
				if got["isError"] != true || got["class"] != "ApprovalRequired" || got["rule"] != "SBX-EXE-005" {
					t.Errorf("declined, the call was not refused with ApprovalRequired: %v", got)
				}
			}
			waitGone(t, "sandboxio.session_id="+session)
		})
	}
}

// waitGone fails unless no container with the label is left within 30 s
// (the kill is confirmed at once; the removal of the stopped container may
// follow).
func waitGone(t *testing.T, label string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for countLabelled(t, label) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a container labelled %s is still there 30 s after the client disconnected", label)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkClosedRecord fails unless the audit log has one record of the
// sandbox's close, with one of the reasons.
func checkClosedRecord(t *testing.T, audit string, reasons ...string) {
	t.Helper()
	var events []string
	n := 0
	for _, r := range auditLines(t, audit) {
		events = append(events, fmt.Sprint(r["event"], "/", r["op"], "/", r["reason"]))
		if r["event"] == "killed" && r["op"] == "close" {
			n++
			if !slices.Contains(reasons, fmt.Sprint(r["reason"])) {
				t.Errorf("the sandbox was closed for %v, want one of %v", r["reason"], reasons)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d audit records of the sandbox's close, want 1: %v", n, events)
	}
}

var httpURL = regexp.MustCompile(`over streamable HTTP at (http://127\.0\.0\.1:\d+/)`)

// Over streamable HTTP on loopback: the official client's session is the
// server's one session; a second client is refused while it is held; when
// the client ends its session, the sandbox is removed and the server exits 0.
func TestMCPReferee_HTTP(t *testing.T) {
	needMCPReferee(t)
	needDocker(t)
	canary := "CANARY-mcp-http-" + runID
	session := "mcp-http-" + runID
	spec, sum := specFile(t, "acme", session, func(x *inputs.Template) { x.SecretNames = []string{"REFEREE_SECRET"} })
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	tokPath, tok := newTokenFile(t)
	url, p := startHTTPMCP(t, []string{"REFEREE_SECRET=" + canary}, "--spec", spec, "--spec-sha256", sum,
		"--tenant", "acme", "--session", session, "--audit", audit, "--token-file", tokPath)
	steps, everything := refereeSteps(t, []string{"REFEREE_MODE=http", "REFEREE_URL=" + url, "REFEREE_TOKEN=" + tok, "REFEREE_STEPS=run-exit,run-code"})
	if got := fmt.Sprint(steps["run-exit"]["sc"].(map[string]any)["exit_code"]); got != "3" {
		t.Errorf("run-exit over HTTP: exit code %s", got)
	}
	if got := fmt.Sprint(steps["run-code"]["text"]); !strings.Contains(got, "key=[REDACTED]") {
		t.Errorf("run-code over HTTP: %s", got)
	}
	if c, _ := steps["no-token-client"]["connected"].(bool); c || steps["no-token-client"]["code"] != 401.0 || !strings.Contains(fmt.Sprint(steps["no-token-client"]["error"]), "requires its bearer token") {
		t.Errorf("a client without the token: %v", steps["no-token-client"])
	}
	if c, _ := steps["second-client"]["connected"].(bool); c || steps["second-client"]["code"] != 409.0 || !strings.Contains(fmt.Sprint(steps["second-client"]["error"]), "serves one MCP session") {
		t.Errorf("a second client while the session is held: %v", steps["second-client"])
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("the server did not exit when the client ended its session:\n%s", p.stderrText())
	}
	if p.code != exitOK || !strings.Contains(p.stderrText(), "the client disconnected; the sandbox was removed") {
		t.Errorf("exit %d:\n%s", p.code, p.stderrText())
	}
	waitGone(t, "sandboxio.session_id="+session)
	checkClosedRecord(t, audit, "closed")
	if strings.Contains(everything+p.stderrText(), canary) {
		t.Error("the secret's value is in the referee's output or the server's stderr")
	}
	if strings.Contains(p.stderrText(), tok) || strings.Contains(everything, "Bearer "+tok) {
		t.Error("the bearer token is in the server's stderr or the referee's output")
	}
}
