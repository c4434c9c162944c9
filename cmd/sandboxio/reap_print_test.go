package main

import (
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// A claimed warm sandbox listed without its tenant has neither tenant nor
// session in its labels: reap says they are unknown and how to see them,
// never prints a blank or a dash as if there were none. Listed by tenant,
// both are printed.
func TestPrintReaped_ClaimedSandboxSession(t *testing.T) {
	bound := map[string]string{bindingLabel: "name", model.LabelTemplate: "agents"}
	var b strings.Builder
	printReaped(&b, []sandbox.Reaped{
		{ID: "0123456789abcdef", Backend: "docker", Template: "agents", Labels: bound, Reason: "owner gone"},
		{ID: "fedcba9876543210", Backend: "docker", TenantID: "acme", SessionID: "s-42", Template: "agents", Labels: bound, Reason: "expired"},
		{ID: "aaaaaaaaaaaaaaaa", Backend: "docker", TenantID: "acme", SessionID: "s-7", Template: "agents", Labels: map[string]string{}, Reason: "expired"},
	}, true)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s", b.String())
	}
	for i, want := range []string{
		"would remove 0123456789ab backend=docker tenant=unknown session=unknown template=agents (owner gone; bound by its name: sweep with --label sandboxio.tenant_id=ID to see its tenant and session)",
		"would remove fedcba987654 backend=docker tenant=acme session=s-42 template=agents (expired)",
		"would remove aaaaaaaaaaaa backend=docker tenant=acme session=s-7 template=agents (expired)",
	} {
		if lines[i] != want {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want)
		}
	}
}

// A sandbox reap left (not one sandboxio created) is printed as left with
// why, never as removed, and the JSON says it was not removed.
func TestPrintReaped_Left(t *testing.T) {
	left := sandbox.Reaped{ID: "0123456789abcdef", Backend: "docker", TenantID: "acme", SessionID: "s-1", Labels: map[string]string{},
		Reason: "expired", Left: "not ours, left: it carries no sandboxio mark"}
	var b strings.Builder
	printReaped(&b, []sandbox.Reaped{left}, false)
	if want := "left 0123456789ab backend=docker tenant=acme session=s-1 template=- (expired; not ours, left: it carries no sandboxio mark)\n"; b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
	b.Reset()
	printReapedJSON(&b, []sandbox.Reaped{left}, false)
	if !strings.Contains(b.String(), `"removed": false`) || !strings.Contains(b.String(), `"left": "not ours, left: it carries no sandboxio mark"`) {
		t.Errorf("JSON:\n%s", b.String())
	}
}
