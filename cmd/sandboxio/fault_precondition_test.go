package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// recordTB records what a precondition helper does instead of doing it.
type recordTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordTB) Helper()                        {}
func (r *recordTB) Fatalf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }
func (r *recordTB) Fatal(a ...any)                 { r.fatal = fmt.Sprint(a...) }
func (r *recordTB) Skipf(format string, a ...any)  { r.skip = fmt.Sprintf(format, a...) }
func (r *recordTB) Skip(a ...any)                  { r.skip = fmt.Sprint(a...) }
func (r *recordTB) SkipNow()                       { r.skip = "SkipNow" }

// With the fault tests asked for, a daemon this project did not start makes
// the test fail, saying why; it never skips (which would pass silently).
// This checks the precondition alone: the fault test itself stops the daemon.
func TestRequireDaemonOwned_FailsRatherThanSkips(t *testing.T) {
	t.Setenv("SANDBOXIO_DOCKERD_MARKER", filepath.Join(t.TempDir(), "no-such-marker"))
	rec := &recordTB{TB: t}
	requireDaemonOwned(rec)
	if rec.skip != "" || rec.fatal == "" {
		t.Fatalf("skip %q, fatal %q: want a failure", rec.skip, rec.fatal)
	}
	if !strings.Contains(rec.fatal, "no-such-marker") || !strings.Contains(rec.fatal, faultTestsEnv) {
		t.Fatalf("the failure does not say why: %s", rec.fatal)
	}
	t.Setenv("SANDBOXIO_DOCKERD_MARKER", t.TempDir()) // exists
	rec = &recordTB{TB: t}
	requireDaemonOwned(rec)
	if rec.skip != "" || rec.fatal != "" {
		t.Fatalf("with the marker: skip %q, fatal %q", rec.skip, rec.fatal)
	}
}
