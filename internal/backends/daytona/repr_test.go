package daytona

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The key is in no repr of the backend, its HTTP client or its
// credential (%v, %+v, %#v, at every level a careless log line could
// reach), nor in the error of a create the backend refuses before calling.
func TestReprsHoldNoKey(t *testing.T) {
	const key = "dtn_repr_canary_1e2d3c4b5a69788796a5"
	t.Setenv(EnvAPIKey, key)
	t.Setenv(EnvAPIURL, "http://127.0.0.1:1/api") // nothing is called
	bb, err := New(backends.DSN{Scheme: Name})
	if err != nil {
		t.Fatal(err)
	}
	b := bb.(*backend)
	var all strings.Builder
	for _, v := range []any{bb, b, *b, b.api, *b.api, b.api.Credential, struct{ c any }{b.api.Credential}, []any{*b}} {
		fmt.Fprintf(&all, "%v\n%+v\n%#v\n%s\n", v, v, v, v)
	}
	s := model.Spec{SpecVersion: model.SpecVersion, Name: "r", Backend: "daytona://", Image: "img",
		Network: model.NetworkPolicy{Allow: []string{"10.0.0.0/8"}}.Normalized(), Resources: model.DefaultCaps(), TimeoutSeconds: 5, LifetimeSeconds: 60}
	_, err = b.Create(t.Context(), backends.CreateRequest{Spec: s.ForTenant("acme", "s", nil)})
	if !backends.IsPolicyGap(err) {
		t.Fatalf("an allow list reached the adapter: %v, want the policy-gap backstop", err)
	}
	fmt.Fprintf(&all, "%v\n%+v\n%#v\n", err, err, err)
	if strings.Contains(all.String(), key) {
		t.Fatalf("the key is in a repr:\n%s", all.String())
	}
	if !strings.Contains(all.String(), "127.0.0.1:1") {
		t.Fatalf("the reprs did not print the client (nothing was checked):\n%s", all.String())
	}
}

// What the policy refuses (SBX-NET-003, SBX-NET-002, SBX-RES-008) the
// adapter refuses again, as a policy gap naming the rule, before any call.
func TestBackstops(t *testing.T) {
	b := &backend{}
	base := model.Spec{Image: "python:3.12-slim", Network: model.NetworkPolicy{}.Normalized(), Resources: model.DefaultCaps()}
	for name, tc := range map[string]struct {
		edit func(*model.Spec)
		rule string
	}{
		"allow list":                          {func(s *model.Spec) { s.Network.Allow = []string{"pypi.org"} }, "SBX-NET-003"},
		"learn mode":                          {func(s *model.Spec) { s.Network.Egress = "learn" }, "SBX-NET-002"},
		"open egress":                         {func(s *model.Spec) { s.Network.Egress = "allow" }, "open"},
		"1536 MB":                             {func(s *model.Spec) { s.Resources.MemoryMB = 1536 }, "SBX-RES-008"},
		"half a core":                         {func(s *model.Spec) { s.Resources.CPU = 1.5 }, "SBX-RES-008"},
		"disk 1000 MB":                        {func(s *model.Spec) { s.Resources.DiskMB = 1000 }, "SBX-RES-008"},
		"default memory":                      {func(s *model.Spec) {}, ""},
		"image with a second Dockerfile line": {func(s *model.Spec) { s.Image = "alpine\nRUN wget evil" }, "image"},
	} {
		s := base
		s.Network.Allow = nil
		tc.edit(&s)
		body, err := b.body(s, nil, "n")
		var me *model.Error
		switch {
		case tc.rule == "" && (err != nil || body.Memory != 1 || !body.NetworkBlockAll || body.BuildInfo.DockerfileContent != "FROM python:3.12-slim\n"):
			t.Errorf("%s: %v, %+v; want the image as a build, sent as 1 GiB, blocked", name, err, body)
		case tc.rule == "open" && (err != nil || body.NetworkBlockAll):
			t.Errorf("%s: %v, networkBlockAll %v; want open egress sent as networkBlockAll false", name, err, body.NetworkBlockAll)
		case tc.rule == "image" && (!asModel(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "image"):
			t.Errorf("%s: %v, want a ConfigurationError of the image", name, err)
		case tc.rule != "" && tc.rule != "image" && tc.rule != "open" && (!backends.IsPolicyGap(err) || !asModel(err, &me) || me.Rule != tc.rule):
			t.Errorf("%s: %v, want the backstop of %s", name, err, tc.rule)
		}
	}
}

func asModel(err error, me **model.Error) bool { return errors.As(err, me) }
