package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// TestFiftyTenants opens, runs in and closes 50 sandboxes for 50 tenants at
// once, and wants no warning and nothing left behind: every close confirms
// its kill within the teardown grace, and every container is removed
// shortly after (by the daemon's AutoRemove and the close's background
// removal). It runs in `make stress` (SANDBOXIO_STRESS=1), on a busy host.
func TestFiftyTenants(t *testing.T) {
	if os.Getenv("SANDBOXIO_STRESS") == "" {
		t.Skip("50 concurrent sandboxes: run by `make stress` (SANDBOXIO_STRESS=1)")
	}
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) { fiftyTenants(t, rt) })
	}
}

func fiftyTenants(t *testing.T, runtime string) {
	cli := needDocker(t)
	ctx := context.WithoutCancel(t.Context())
	const n = 50
	// The create bound (timeout_seconds) is raised well above the tests'
	// usual one. This test is about teardown: no warning, nothing left. How
	// fast 50 sandboxes start at once is BenchmarkFiftyTenants' question; a
	// tight bound here asserted a loaded host's speed, not a property.
	timeout, lifetime := int64(300), int64(900)
	tpl := template(t, func(x *inputs.Template) {
		x.Runtime = runtime
		x.TimeoutSeconds, x.LifetimeSeconds = &timeout, &lifetime
	})
	var mu sync.Mutex
	var warnings []model.Warning
	c, err := New(ctx, Config{OnWarning: func(w model.Warning) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, w)
	}})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		tenant := fmt.Sprintf("stress-%02d", i)
		spec, sum := tenantSpec(t, tpl, tenant, "fifty")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = helperOpenRunClose(ctx, c, spec, sum, tenant, "fifty")
		}()
	}
	wg.Wait()
	t.Logf("50 tenants opened, ran and closed in %s", time.Since(start).Round(time.Millisecond))
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("tenant %d: %v", i, err)
		}
	}
	mu.Lock()
	for _, w := range warnings {
		if w.Class == model.OrphanedSandboxWarning {
			t.Errorf("warning: %s", w)
		}
	}
	mu.Unlock()

	// Nothing is left: removal may finish after a close returns, shortly.
	f := filters.NewArgs(filters.Arg("label", "test="+labelSafe(t.Name())), filters.Arg("label", "test_run="+runID))
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var running int
		for _, c := range cs {
			if c.State == "running" {
				running++
			}
		}
		if running > 0 {
			t.Fatalf("%d sandboxes still run after their close returned", running)
		}
		if len(cs) == 0 {
			t.Logf("no leftovers %s after the last close", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d stopped sandboxes not removed a minute after their close", len(cs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
