package all_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// throwaway is a backend that exists only in this test: adding a backend
// is one package with one registration, and every part of sandboxio sees
// it without being told.
type throwaway struct{ reapLabels map[string]string }

func (*throwaway) Name() string { return "throwaway" }
func (*throwaway) Capabilities(string) (backends.Capabilities, bool) {
	return backends.Capabilities{}, false
}
func (*throwaway) Create(context.Context, backends.CreateRequest) (backends.Sandbox, error) {
	return nil, errors.New("throwaway creates nothing")
}
func (*throwaway) List(context.Context, map[string]string) ([]backends.Info, error) { return nil, nil }
func (*throwaway) Close() error                                                     { return nil }
func (t *throwaway) Reap(_ context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	t.reapLabels = opts.Labels
	return []backends.Reaped{{Info: backends.Info{ID: "tw-1", Backend: "throwaway", Labels: opts.Labels}, Reason: "expired"}}, nil
}

var thrown = &throwaway{}

func init() {
	backends.Register(backends.Registration{
		Scheme: "throwaway", Order: 99,
		DSN: backends.DSNSyntax{
			Form: "throwaway://", Target: backends.TargetNone,
			Env: []string{"THROWAWAY_TOKEN"}, EnvHelp: "THROWAWAY_TOKEN",
			NoHost:  "the address goes in THROWAWAY_URL",
			Options: map[string]backends.DSNOption{"zone": backends.OneOf("a", "b")},
		},
		Open:  func(backends.DSN) (backends.Backend, error) { return thrown, nil },
		Lists: true,
	})
}

func TestRegisteredBackendReachesEveryPart(t *testing.T) {
	// The DSN parser: its form, options and credential variables.
	d, err := backends.ParseDSN("throwaway://?zone=b")
	if err != nil || d.Scheme != "throwaway" || d.Options["zone"] != "b" {
		t.Fatalf("ParseDSN: %+v, %v", d, err)
	}
	if _, err := backends.ParseDSN("throwaway://?zone=c"); err == nil || !strings.Contains(err.Error(), "one of a, b") {
		t.Errorf("a zone outside the option's values: %v", err)
	}
	if _, err := backends.ParseDSN("throwaway://?token=x"); err == nil || !strings.Contains(err.Error(), "THROWAWAY_TOKEN") {
		t.Errorf("a credential in the DSN: %v", err)
	}
	if _, err := backends.ParseDSN("nope://"); err == nil || !strings.Contains(err.Error(), "kubernetes://CONTEXT/NAMESPACE, throwaway://") {
		t.Errorf("an unknown scheme's fix lists the registered forms in order: %v", err)
	}

	// The input builder, and the policy, which decides: the throwaway has
	// no capability data in the bundle, so the rules refuse it.
	ref, dsn, err := inputs.Backend("throwaway://?zone=b", "", "")
	if err != nil || ref.Scheme != "throwaway" || ref.Key != "throwaway" || ref.Runtime != "" || dsn != "throwaway://?zone=b" {
		t.Fatalf("inputs.Backend: %+v %q %v", ref, dsn, err)
	}
	spec, in, err := inputs.Template{Name: "t", Backend: "throwaway://?zone=b", Image: "img"}.Build("")
	if err != nil || spec.Backend != "throwaway://?zone=b" || in.Backend == nil || in.Backend.Scheme != "throwaway" {
		t.Fatalf("inputs.Template.Build: %+v %+v %v", spec, in, err)
	}
	eng, err := policy.Shared(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := eng.Evaluate(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(dec.Denies, func(f policy.Finding) bool { return f.ID == "SBX-ISO-005" && f.Attribute == "backend" }) {
		t.Errorf("a backend without capability data is not refused by SBX-ISO-005: %+v", dec.Denies)
	}

	// The run-time helper and reap: the throwaway provisions and lists.
	if !slices.Contains(sandbox.Backends(), "throwaway") || !slices.Contains(backends.Listable(), "throwaway") {
		t.Errorf("Backends %v, Listable %v", sandbox.Backends(), backends.Listable())
	}
	c, err := sandbox.New(t.Context(), sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"sandboxio.test": "registry-" + strings.ReplaceAll(t.Name(), "/", "-")}
	got, err := c.Reap(t.Context(), sandbox.ReapOptions{DryRun: true, Labels: labels})
	if err != nil {
		// The sweep covers Docker too; it needs the daemon.
		if os.Getenv("SANDBOXIO_REQUIRE_DOCKER") == "1" {
			t.Errorf("reap: %v", err)
		} else {
			t.Logf("reap (Docker not required): %v", err)
		}
	}
	if !slices.ContainsFunc(got, func(r sandbox.Reaped) bool {
		return r.ID == "tw-1" && r.Backend == "throwaway" && r.Reason == "expired"
	}) ||
		thrown.reapLabels["sandboxio.test"] != labels["sandboxio.test"] {
		t.Errorf("reap of every listing backend: %+v (labels seen %v)", got, thrown.reapLabels)
	}
	one, err := c.Reap(t.Context(), sandbox.ReapOptions{Backend: "throwaway://", DryRun: true, Labels: labels})
	if err != nil || len(one) != 1 || one[0].ID != "tw-1" {
		t.Errorf("reap of throwaway://: %+v, %v", one, err)
	}
}

// Every registered backend of this build is described by the capability
// data the rules read, and every descriptor belongs to a registered backend.
func TestRegistryMatchesCapabilityData(t *testing.T) {
	covered := map[string]bool{}
	for _, r := range backends.All() {
		if r.Scheme == "throwaway" {
			continue
		}
		keys := []string{r.CapabilityKey("")}
		for _, rt := range r.Runtimes() {
			keys = append(keys, r.CapabilityKey(rt))
		}
		for _, k := range keys {
			if _, ok := backends.Lookup(k); !ok {
				t.Errorf("%s: no capability data under %s", r.Scheme, k)
			}
			covered[k] = true
			// A variant row (docker/runc+gateway) is covered when one of
			// the backend's variant options takes its value.
			for _, vk := range backends.Keys() {
				c, _ := backends.Lookup(vk)
				if c.Variant == "" || vk != k+"+"+c.Variant {
					continue
				}
				for _, o := range r.Variants {
					if opt, ok := r.DSN.Options[o]; ok && opt.Check != nil {
						if _, ok := opt.Check(c.Variant); ok {
							covered[vk] = true
						}
					}
				}
			}
		}
		if r.LiveCheck != nil && r.Open == nil {
			t.Errorf("%s: live checks but no backend", r.Scheme)
		}
	}
	for _, k := range backends.Keys() {
		if !covered[k] {
			t.Errorf("capability data %s belongs to no registered backend", k)
		}
	}
	if got := strings.Join(backends.Schemes()[:5], " "); got != "docker e2b modal vercel daytona" {
		t.Errorf("schemes in order: %s", got)
	}
}
