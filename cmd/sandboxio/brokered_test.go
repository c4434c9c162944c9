//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	dockertest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// brokerHost is api.test, an echoing HTTPS host in a lab namespace, whose
// certificate the host's trust store (the returned file, for
// SSL_CERT_FILE) trusts; other.test is listed and not the secret's.
func brokerHost(t *testing.T) (api, other *netns.Echo, roots string, dns netip.Addr) {
	t.Helper()
	apiAddr, otherAddr := netip.MustParseAddr("198.18.1.140"), netip.MustParseAddr("198.18.1.141")
	dns = netip.MustParseAddr("198.18.1.154")
	lab := netns.New(t, apiAddr, otherAddr, dns)
	ca := netns.NewCA(t, "api.test", "other.test")
	api, other = lab.EchoHost(t, apiAddr, ca), lab.EchoHost(t, otherAddr, ca)
	d := lab.DNSServer(t, dns)
	d.Set("api.test", netns.Static(apiAddr))
	d.Set("other.test", netns.Static(otherAddr))
	roots = filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return api, other, roots, dns
}

func brokeredTemplate(t *testing.T, dns netip.Addr) func(*inputs.Template) {
	image := dockertest.ProbeImage(t)
	return func(x *inputs.Template) {
		x.Image = image
		x.Backend = "docker://?egress=gateway&resolver=" + netip.AddrPortFrom(dns, 53).String()
		x.Egress, x.Allow = model.EgressDeny, []string{"api.test", "other.test"}
		x.BrokeredSecrets = map[string]model.BrokeredSecret{"API_KEY": {Hosts: []string{"api.test"}, Header: "Authorization", Format: "Bearer %s"}}
	}
}

// brokeredScript sends the variable to the secret's host and to another
// listed host with a client that verifies both against the sandbox's
// bundle (SSL_CERT_FILE), and prints the variable itself.
const brokeredScript = `/bin/egressprobe "h2:GET|https://api.test/echo|Authorization=Bearer $API_KEY|" "h1:GET|https://other.test/echo|Authorization=Bearer $API_KEY|"; echo "API_KEY=$API_KEY"`

// checkBrokered checks what the sandbox printed (out: the placeholder
// echoed by both hosts and held by the variable) and what the hosts got
// (the value at api.test only), and that the audit has the brokered
// request and no value.
func checkBrokered(t *testing.T, canary, out string, api, other *netns.Echo, audit string) {
	t.Helper()
	placeholder := out[strings.LastIndex(out, "API_KEY=")+len("API_KEY="):]
	placeholder, _, _ = strings.Cut(placeholder, "\n")
	if len(placeholder) < 40 || strings.Count(out, "Authorization: Bearer "+placeholder) != 2 {
		t.Fatalf("the sandbox printed:\n%s\nwant the placeholder echoed by both hosts and held by the variable", out)
	}
	seen := api.Requests()
	if len(seen) != 1 || seen[0].Header.Get("Authorization") != "Bearer "+canary {
		t.Fatalf("api.test got %+v, want one request with the real value", seen)
	}
	if o := other.Requests(); len(o) != 1 || o[0].Header.Get("Authorization") != "Bearer "+placeholder {
		t.Fatalf("other.test got %+v, want the placeholder as sent", o)
	}
	text, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text)+out, canary) {
		t.Fatal("the value is in the audit log or the output")
	}
	var got []string
	for _, r := range auditLines(t, audit) {
		if r["event"] == "brokered" {
			got = append(got, fmt.Sprint(r["brokered"]))
		}
	}
	if len(got) != 1 || got[0] != "map[host:api.test method:GET secret:API_KEY status:200]" {
		t.Fatalf("brokered audit records %v", got)
	}
}

// TestRunCLI_BrokeredSecret: `sandboxio run` reads a brokered secret from
// its environment like any, and only the broker holds it.
func TestRunCLI_BrokeredSecret(t *testing.T) {
	needDocker(t)
	api, other, roots, dns := brokerHost(t)
	canary := "sk-cli-brokered-" + runID + "-canary"
	t.Setenv("SSL_CERT_FILE", roots)
	t.Setenv("API_KEY", canary)
	session := "brokered-cli-" + runID
	spec, sum := specFile(t, "acme", session, brokeredTemplate(t, dns))
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, out, errOut := cli(t, "", "run", "--quiet", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit,
		"--", "sh", "-c", brokeredScript)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if strings.Contains(errOut, canary) {
		t.Fatal("the value is in stderr")
	}
	checkBrokered(t, canary, out, api, other, audit)
}

// TestMCP_BrokeredSecret: the same through `sandboxio mcp`, whose tool
// results, stderr and audit never hold the value.
func TestMCP_BrokeredSecret(t *testing.T) {
	needDocker(t)
	api, other, roots, dns := brokerHost(t)
	canary := "sk-mcp-brokered-" + runID + "-canary"
	session := "brokered-mcp-" + runID
	spec, sum := specFile(t, "acme", session, brokeredTemplate(t, dns))
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cs, _, stderr := startMCP(t, []string{"SSL_CERT_FILE=" + roots, "API_KEY=" + canary},
		"--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit)
	res, text := callText(t, cs, "run", map[string]any{"command": []string{"sh", "-c", brokeredScript}})
	if res.IsError {
		t.Fatalf("run: %s\n%s", text, stderr)
	}
	_ = cs.Close()
	if strings.Contains(stderr.String()+fmt.Sprint(res.StructuredContent), canary) {
		t.Fatal("the value is in stderr or the structured result")
	}
	checkBrokered(t, canary, text, api, other, audit)
}

// The CLI holds a brokered value in its memory only: it re-executes itself
// without it, so its /proc environ (and cmdline) lack the value while the
// sandbox uses the secret.
func TestRunCLI_BrokeredValueLeavesTheCLIEnvironment(t *testing.T) {
	needDocker(t)
	api, other, roots, dns := brokerHost(t)
	canary := "sk-cli-environ-" + runID + "-canary"
	session := "brokered-environ-" + runID
	spec, sum := specFile(t, "acme", session, brokeredTemplate(t, dns))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	cmd := exec.Command(exe, "run", "--quiet", "--spec", spec, "--spec-sha256", sum, "--tenant", "acme", "--session", session, "--audit", audit,
		"--", "sh", "-c", brokeredScript+"; sleep 3")
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "SANDBOXIO_TEST_RUN_ID="+runID, "SSL_CERT_FILE="+roots, "API_KEY="+canary)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Read the process while the sandbox runs: after the first request
	// (the re-execution happened long before).
	deadline := time.Now().Add(60 * time.Second)
	for len(api.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	proc := ""
	for _, f := range []string{"environ", "cmdline"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", cmd.Process.Pid, f))
		if err != nil {
			t.Fatalf("reading the CLI's %s: %v", f, err)
		}
		proc += string(b)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	entries := strings.Split(proc, "\x00")
	if !slices.Contains(entries, "SSL_CERT_FILE="+roots) || strings.Contains(proc, canary) || slices.ContainsFunc(entries, func(e string) bool { return strings.HasPrefix(e, "API_KEY=") }) {
		t.Fatal("the CLI's environ or cmdline holds the brokered variable, or was not read")
	}
	if strings.Contains(stderr.String(), canary) || strings.Contains(stderr.String(), "could not re-execute") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	checkBrokered(t, canary, stdout.String(), api, other, audit)
}
