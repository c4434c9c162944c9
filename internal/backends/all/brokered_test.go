package all_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Every backend without a broker refuses a spec with brokered secrets before
// any call, with CapabilityNotSupported under SBX-SEC-005, even given the
// value: a hand-written spec that skipped the plan never runs with the value
// in the environment. (Docker through the gateway brokers them: its tests
// are in package docker.) The credentials and endpoints point nowhere, so a
// backend that called out would fail another way.
func TestEveryBackendRefusesBrokeredSecretsItCannotBroker(t *testing.T) {
	nowhere := "http://127.0.0.1:1"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"DOCKER_HOST", "unix:///nonexistent.sock"},
		{"E2B_API_KEY", "e2b_0000000000000000000000000000"}, {"E2B_API_URL", nowhere}, {"SANDBOXIO_E2B_API_URL", nowhere},
		{"MODAL_TOKEN_ID", "ak-00000000000000000000"}, {"MODAL_TOKEN_SECRET", "as-00000000000000000000"}, {"MODAL_SERVER_URL", nowhere},
		{"VERCEL_TOKEN", "not-a-real-token-0000"}, {"SANDBOXIO_VERCEL_API_URL", nowhere},
		{"DAYTONA_API_KEY", "dtn_00000000000000000000"}, {"DAYTONA_API_URL", nowhere}, {"SANDBOXIO_DAYTONA_API_URL", nowhere},
		{"KUBECONFIG", kubeconfig},
	} {
		t.Setenv(kv[0], kv[1])
	}
	brokered := map[string]model.BrokeredSecret{"GITHUB_TOKEN": {Hosts: []string{"api.github.com"}, Header: "Authorization", Format: "Bearer %s"}}
	for _, tc := range []struct{ dsn, image string }{
		{"docker://", "img"},
		{"docker://?runtime=runsc", "img"},
		{"docker://?egress=gateway&runtime=runsc", "img"},
		{"e2b://", "base"},
		{"modal://agents", "python:3.12-slim"},
		{"vercel://acme/agents", "python3.13"},
		{"daytona://", "python:3.12-slim"},
		{"kubernetes://ctx/ns", "python:3.12-slim"},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			d, err := backends.ParseDSN(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			reg, ok := backends.Registered(d.Scheme)
			if !ok {
				t.Fatalf("no backend registered for %s", d.Scheme)
			}
			b, err := reg.Open(d)
			if err != nil {
				t.Fatalf("open %s: %v", tc.dsn, err)
			}
			defer func() { _ = b.Close() }()
			caps := model.DefaultCaps()
			if d.Scheme == "vercel" {
				caps.MemoryMB = 2048
			}
			spec := model.Spec{SpecVersion: model.SpecVersion, Name: "t", Backend: tc.dsn, Image: tc.image,
				Network: model.NetworkPolicy{Allow: []string{"api.github.com"}}.Normalized(), Resources: caps,
				TimeoutSeconds: 60, LifetimeSeconds: 60, BrokeredSecrets: brokered, TenantID: "acme", SessionID: "s-1"}
			if d.CapabilityKey("") != "docker/runc+gateway" && d.Scheme != "e2b" && d.Scheme != "vercel" {
				// a domain allow list is refused there on its own
				spec.Network.Allow = nil
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			sb, err := b.Create(ctx, backends.CreateRequest{Spec: spec, Brokered: map[string]string{"GITHUB_TOKEN": "value-never-placed"}})
			if err == nil {
				_ = sb.Close(ctx)
				t.Fatal("created a sandbox with a brokered secret")
			}
			var me *model.Error
			if !errors.As(err, &me) || me.Rule != rules.SecNoBroker || me.Class != model.ErrCapabilityNotSupported || me.Attribute != "brokered_secrets" {
				t.Fatalf("got %v (%+v), want CapabilityNotSupported %s on brokered_secrets", err, me, rules.SecNoBroker)
			}
		})
	}
}
