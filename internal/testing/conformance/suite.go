package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Labels the suite sets on every sandbox it opens.
const (
	// LabelRun carries the run id, shared by every sandbox of one Run.
	LabelRun = "sandboxio-conformance"
	// LabelCase carries the behaviour and a counter, one per sandbox.
	LabelCase = "sandboxio-conformance-case"
)

// callTimeout bounds every call the suite makes that is not itself timed.
const callTimeout = 60 * time.Second

// createTimeout bounds the creates of behaviours that open a sandbox.
const createTimeout = 30 * time.Second

// goneWithin is how long a sandbox may still be listed after it was killed,
// closed or expired (removal of a stopped container, a vendor's list lag).
const goneWithin = 15 * time.Second

type behaviour struct {
	name Behaviour
	fn   func(t *testing.T, e *env)
}

// table is the suite: every behaviour every backend must show.
var table = []behaviour{
	{OpenLabels, openLabels},
	{RunStreams, runStreams},
	{RunCodeB, runCode},
	{UploadB, upload},
	{ExecTimeoutB, execTimeout},
	{LifetimeB, lifetime},
	{LifetimeLockedB, lifetimeLocked},
	{KillIdempotent, killIdempotent},
	{CloseIdempotent, closeIdempotent},
	{Secrets, secrets},
	{NetworkDeny, networkDeny},
	{NetworkAllow, networkAllow},
	{CapsB, caps},
	{TypedErrors, typedErrors},
	{FaultAuth, faultAuth},
	{FaultNotFound, faultNotFound},
	{FaultConflict, faultConflict},
	{FaultRetryAfter, faultRetryAfter},
	{FaultRetry5xx, faultRetry5xx},
	{FaultPersistent, faultPersistent},
	{FaultCreateRefused, faultCreateRefused},
	{FaultCreateUnknown, faultCreateAmbiguous},
	{FaultCreateStalled, faultCreateStalled},
}

// isFault says b needs Harness.Faults.
func isFault(b Behaviour) bool { return strings.HasPrefix(string(b), "fault-") }

// Behaviours lists every behaviour of the suite, in order.
func Behaviours() []Behaviour {
	out := make([]Behaviour, len(table))
	for i, b := range table {
		out[i] = b.name
	}
	return out
}

// env is one Run's state, shared by its behaviours.
type env struct {
	h     Harness
	runID string
	cases chan int // a counter, safe for parallel behaviours
}

// Run runs every behaviour against the harness's backend.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Backend == nil || h.Spec == nil {
		t.Fatal("backendtest: Harness.Backend and Harness.Spec are required")
	}
	e := &env{h: h, runID: "r" + randomHex(6), cases: make(chan int, 1)}
	e.cases <- 0
	if h.Name == "" {
		e.h.Name = h.Backend.Name()
	}
	t.Run("behaviours", func(t *testing.T) {
		for _, b := range table {
			if !isFault(b.name) {
				e.runOne(t, b, !h.Serial)
			}
		}
	})
	// The fault behaviours arm the server's one fault, which would hit any
	// other behaviour's calls: they run one at a time, after the others.
	t.Run("faults", func(t *testing.T) {
		for _, b := range table {
			if isFault(b.name) {
				e.runOne(t, b, false)
			}
		}
	})
	t.Run("no-leftovers", func(t *testing.T) {
		if h.Faults != nil {
			h.Faults.Clear()
		}
		e.waitNone(t, map[string]string{LabelRun: e.runID}, "every sandbox this run opened")
	})
}

func (e *env) runOne(t *testing.T, b behaviour, parallel bool) {
	t.Run(string(b.name), func(t *testing.T) {
		if len(e.h.Only) > 0 && !slices.Contains(e.h.Only, b.name) {
			t.Skipf("SKIP: %s runs only %v", e.h.Name, e.h.Only)
		}
		if why, ok := e.h.Skip[b.name]; ok {
			t.Skipf("SKIP: %s cannot show %s: %s", e.h.Name, b.name, why)
		}
		if isFault(b.name) && e.h.Faults == nil {
			t.Skipf("SKIP: %s has no fault injection (Harness.Faults); the fault behaviours run against a conformance server", e.h.Name)
		}
		if parallel {
			t.Parallel()
		}
		b.fn(t, e)
	})
}

// opened is a sandbox a behaviour opened and the labels that find it.
type opened struct {
	sb     backends.Sandbox
	spec   model.Spec
	labels map[string]string // the case's labels: List with them finds only it
}

// spec returns a per-tenant spec of the harness's spec, with the run's
// labels and a case label of its own.
func (e *env) spec(t *testing.T, mods ...func(*model.Spec)) (model.Spec, map[string]string) {
	t.Helper()
	n := <-e.cases
	e.cases <- n + 1
	caseID := fmt.Sprintf("%s-%s-%d", e.runID, strings.ReplaceAll(strings.TrimPrefix(t.Name(), "Test"), "/", "."), n)
	caseID = labelValue(caseID)
	labels := map[string]string{LabelRun: e.runID, LabelCase: caseID}
	s := e.h.Spec().ForTenant("conf-"+e.runID, fmt.Sprintf("s%d", n), labels)
	for _, m := range mods {
		m(&s)
	}
	return s, labels
}

// labelValue keeps a label value short and plain (vendors limit both).
func labelValue(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 63 {
		out = out[len(out)-63:]
	}
	return out
}

// open creates a sandbox that is closed when the test ends.
func (e *env) open(t *testing.T, mods ...func(*model.Spec)) opened {
	t.Helper()
	return e.openWith(t, nil, mods...)
}

func (e *env) openWith(t *testing.T, secrets map[string]string, mods ...func(*model.Spec)) opened {
	t.Helper()
	spec, labels := e.spec(t, mods...)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	// The create has its own bound, not the spec's timeout_seconds, which
	// the lifetime behaviour makes short.
	sb, err := e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec, Secrets: secrets, Timeout: createTimeout})
	if err != nil {
		e.noLeak(t, "create error", err.Error())
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("close %s: %v", sb.ID(), err)
		}
	})
	return opened{sb: sb, spec: spec, labels: labels}
}

// run runs a shell script and fails the test on an error.
func run(t *testing.T, sb backends.Sandbox, script string, args ...string) backends.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := sb.Run(ctx, append([]string{"sh", "-c", script, "sh"}, args...), backends.RunOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return res
}

// sh runs a shell script and wants exit 0; it returns stdout, trimmed.
func sh(t *testing.T, sb backends.Sandbox, script string, args ...string) string {
	t.Helper()
	res := run(t, sb, script, args...)
	if res.ExitCode != 0 {
		t.Fatalf("run %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// list lists by labels, failing the test on an error.
func (e *env) list(t *testing.T, labels map[string]string) []backends.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	infos, err := e.h.Backend.List(ctx, labels)
	if err != nil {
		e.noLeak(t, "list error", err.Error())
		t.Fatalf("list %v: %v", labels, err)
	}
	return infos
}

// running is the listed sandboxes that still run.
func running(infos []backends.Info) []backends.Info {
	var out []backends.Info
	for _, in := range infos {
		if in.Running {
			out = append(out, in)
		}
	}
	return out
}

// waitNone polls until List finds no sandbox with the labels.
func (e *env) waitNone(t *testing.T, labels map[string]string, what string) {
	t.Helper()
	within := goneWithin
	if e.h.GoneWithin > 0 {
		within = e.h.GoneWithin
	}
	deadline := time.Now().Add(within)
	for {
		infos := e.list(t, labels)
		if len(infos) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ids := make([]string, len(infos))
			for i, in := range infos {
				ids[i] = fmt.Sprintf("%s(running=%v)", in.ID, in.Running)
			}
			t.Fatalf("%s: still listed %s later: %v", what, within, ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// observe calls the harness's Observe, or skips with a reason.
func (e *env) observe(t *testing.T, id string) (Observed, bool) {
	t.Helper()
	if e.h.Observe == nil {
		return Observed{}, false
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	o, err := e.h.Observe(ctx, id)
	if err != nil {
		t.Fatalf("observe %s: %v", id, err)
	}
	return o, true
}

// noLeak fails when text holds the harness's credential.
func (e *env) noLeak(t *testing.T, where, text string) {
	t.Helper()
	if e.h.Credential != "" && strings.Contains(text, e.h.Credential) {
		t.Errorf("%s holds the API credential: %q", where, text)
	}
}

// wantClass fails unless err is a *model.Error of class c (errors.Is) and
// holds no credential.
func (e *env) wantClass(t *testing.T, err error, c model.ErrorClass, what string) {
	t.Helper()
	_ = e.classError(t, err, c, what)
}

// classError is wantClass returning the first *model.Error of class c.
func (e *env) classError(t *testing.T, err error, c model.ErrorClass, what string) *model.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: want %s, got no error", what, c)
	}
	e.noLeak(t, what, err.Error())
	if !errors.Is(err, c) {
		t.Fatalf("%s: want %s, got %v", what, c, err)
	}
	for cur := err; cur != nil; {
		var me *model.Error
		if !errors.As(cur, &me) {
			break
		}
		if me.Class == c {
			return me
		}
		cur = me.Err
	}
	t.Fatalf("%s: want a *model.Error of class %s in %v", what, c, err)
	return nil
}

// classOf is err's model class, or "" when it has none.
func classOf(err error) model.ErrorClass {
	for _, c := range model.ErrorClasses {
		if errors.Is(err, c) {
			return c
		}
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *env) execTimeout() time.Duration {
	if e.h.ExecTimeout > 0 {
		return e.h.ExecTimeout
	}
	return 2 * time.Second
}

func (e *env) lifetimeEarly() time.Duration {
	if e.h.LifetimeEarly > 0 {
		return e.h.LifetimeEarly
	}
	return 100 * time.Millisecond
}

func (e *env) lifetime() time.Duration {
	if e.h.Lifetime > 0 {
		return e.h.Lifetime
	}
	return 4 * time.Second
}
