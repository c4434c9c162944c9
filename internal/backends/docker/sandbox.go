package docker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Budgets of the clean-up after a timeout. cleanupBudget bounds all of it, so
// that a timeout is reported within one second: the look at the process ceiling
// gets what the killer left, and the rest of the second is left for scheduling
// on a loaded host (docs/design/docker-backend.md).
const (
	killBudget      = 500 * time.Millisecond // waiting for the in-sandbox killer
	killLimit       = 10 * time.Second       // a slow killer, which goes on after the wait
	ceilingBudget   = time.Second            // asking whether the sandbox is at its process ceiling
	hardKillBudget  = 200 * time.Millisecond // waiting for the kill of the whole container
	cleanupBudget   = 800 * time.Millisecond // all of the above, after a timeout
	hardKillLimit   = 10 * time.Second       // the kill itself, which goes on after the wait
	inspectBudget   = 2 * time.Second        // looking closer at a command that failed
	oomEventLatency = 300 * time.Millisecond // how long an OOM event may trail the exit
)

// tracef traces the classification of commands; tests set it.
var tracef = func(string, ...any) {}

type sandbox struct {
	b           *dockerBackend
	id, name    string
	runtime     string
	tier        model.Tier
	caps        model.Caps
	callTimeout time.Duration
	created     time.Time
	expires     time.Time
	labels      map[string]string
	secrets     []string // NAME=value, passed to each exec only
	shell       bool
	onWarning   func(model.Warning)
	diskCap     string
	pidsCap     string

	mu       sync.Mutex
	gone     error         // set once the sandbox is known gone
	killing  chan struct{} // closed when a slow killer has ended (stopSession)
	killWait time.Duration // killBudget; tests shorten it to make the killer slow
	lastOOM  int64         // memory cgroup oom_kill count already attributed
	lastMax  int64         // pids cgroup "max" event count already attributed
	oomSeen  int           // daemon OOM events already attributed to a command

	trailed atomic.Bool // the watcher holds an audit trail for it (trail.go)

	// egress observes what the sandbox tries to send under deny (nil where
	// it is not observed: open egress, gVisor). See package egress.
	egress *egress.Observer
	// gw forwards what the allow list permits (nil without the egress
	// gateway); it records refusals as the observer does. See gateway.go.
	gw *egress.Gateway
	// hostPids is the sandbox's host pids cgroup, watched under gVisor (nil
	// where this process cannot see it). See hostpids.go.
	hostPids *hostPids
}

// String and GoString keep secrets out of any formatted output.
func (s *sandbox) String() string   { return "docker sandbox " + s.id }
func (s *sandbox) GoString() string { return s.String() }

func (s *sandbox) ID() string { return s.id }

// Info describes the sandbox as of its last operation; it makes no API call.
func (s *sandbox) Info() backends.Info {
	s.mu.Lock()
	gone := s.gone != nil
	s.mu.Unlock()
	in := backends.Info{
		ID:              s.id,
		Backend:         Name,
		Tier:            s.tier,
		Labels:          maps.Clone(s.labels),
		Created:         s.created,
		Expires:         s.expires,
		DiskCapStrategy: s.diskCap,
		PidsCapStrategy: s.pidsCap,
		Running:         !gone && time.Now().Before(s.expires),
	}
	if s.egress != nil {
		n, dests := s.egress.Record().Snapshot()
		in.BlockedEgress, in.BlockedEgressDestinations = &n, dests
	}
	if s.gw != nil {
		n, dests := s.gw.Record().Snapshot()
		in.BlockedEgress, in.BlockedEgressDestinations = &n, dests
		a := s.gw.Allowed()
		to := make([]model.BlockedDestination, len(a.Destinations))
		for i, d := range a.Destinations {
			to[i] = model.BlockedDestination{Kind: d.Kind, Name: d.Name, Address: d.Address, Port: d.Port, Protocol: d.Protocol, Count: d.Count}
		}
		in.AllowedEgress, in.AllowedEgressDestinations = &a.Total, to
	}
	return in
}

// stopObserver ends the egress observer, once the sandbox is over; what it
// recorded stays in Info.
func (s *sandbox) stopObserver() {
	if s.egress != nil {
		s.egress.Close()
	}
	if s.gw != nil {
		s.gw.Close()
	}
	if s.hostPids != nil {
		s.hostPids.close()
	}
}

// goneError's fix does not speak of the lifetime: this client knows the
// expiry, so expiredError says when the lifetime was the cause.
func (s *sandbox) goneError(why string) *model.Error {
	return &model.Error{Class: model.ErrSandboxGone, Message: fmt.Sprintf("sandbox %s is gone: %s", short(s.id), why),
		Fix: "open a new sandbox"}
}

func (s *sandbox) markGone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = err
	}
}

func (s *sandbox) expired() bool { return !time.Now().Before(s.expires) }

func (s *sandbox) expiredError() *model.Error {
	e := s.goneError(fmt.Sprintf("its lifetime ended at %s", s.expires.UTC().Format(time.RFC3339)))
	e.Fix = "open a new sandbox; raise lifetime_seconds if the work needs longer"
	return e
}

// settle waits for a killer still at work on an earlier command's processes
// (bounded by killLimit and the hard kill after it): no command starts
// beside processes that were meant to be gone.
func (s *sandbox) settle(ctx context.Context) error {
	s.mu.Lock()
	k := s.killing
	s.mu.Unlock()
	if k == nil {
		return nil
	}
	select {
	case <-k:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("exec: waiting for an earlier command's processes to be killed: %w", ctx.Err())
	}
}

// usable refuses a sandbox known to be gone without asking the daemon.
func (s *sandbox) usable() error {
	s.mu.Lock()
	g := s.gone
	s.mu.Unlock()
	if g != nil {
		return g
	}
	if s.expired() {
		err := s.expiredError()
		s.markGone(err)
		return err
	}
	return s.gatewayUp()
}

func (s *sandbox) execEnv(extra map[string]string) []string {
	env := make([]string, 0, len(extra)+len(s.secrets))
	for _, k := range sortedKeys(extra) {
		env = append(env, k+"="+extra[k])
	}
	return append(env, s.secrets...)
}

// Run runs a command to completion within its timeout.
func (s *sandbox) Run(ctx context.Context, cmd []string, opts backends.RunOptions) (backends.Result, error) {
	if len(cmd) == 0 {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Message: "empty command", Fix: "pass the command and its arguments"}
	}
	for k := range opts.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "env",
				Message: fmt.Sprintf("%q is not an environment variable name", k), Fix: "use names without '=' or NUL"}
		}
	}
	return s.run(ctx, cmd, opts.Stdin, s.execEnv(opts.Env), opts.Workdir, opts.Timeout, execOut{stdout: opts.Stdout, stderr: opts.Stderr})
}

func (s *sandbox) run(ctx context.Context, cmd []string, stdin []byte, env []string, workdir string, timeout time.Duration, out execOut) (backends.Result, error) {
	if err := s.settle(ctx); err != nil {
		return backends.Result{}, err
	}
	if err := s.usable(); err != nil {
		return backends.Result{}, err
	}
	if ctx.Err() != nil {
		return backends.Result{}, fmt.Errorf("exec: %w", ctx.Err())
	}
	timeout = model.EffectiveTimeout(timeout, s.callTimeout)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	started := time.Now()
	res, err := s.exec(rctx, cmd, stdin, env, workdir, s.shell, out)
	elapsed := time.Since(started)
	if err != nil {
		return backends.Result{}, s.execFailed(ctx, err, started, res.errSeen)
	}
	if res.stopped != nil {
		return backends.Result{}, s.interrupted(ctx, res, timeout, started)
	}
	return s.completed(ctx, res, started, elapsed)
}

// execFailed explains an exec the daemon could not create or start.
func (s *sandbox) execFailed(ctx context.Context, err error, started time.Time, stderr []byte) error {
	tracef("exec failed after %s: %v", time.Since(started), err)
	switch {
	case isContainerGone(err):
		return s.died(ctx, started, err, stderr, false)
	case isExhausted(err):
		return s.pidsError("no process could be started: the sandbox is at its process ceiling", err)
	}
	return err
}

// died explains a container found gone in the middle of a command: an OOM
// kill of the whole sandbox (gVisor), its lifetime, or a kill. stderr is what
// the command printed, if anything; oom says an OOM kill was already seen.
func (s *sandbox) died(ctx context.Context, started time.Time, cause error, stderr []byte, oom bool) error {
	tracef("died after %s: %v", time.Since(started), cause)
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBudget)
	defer cancel()
	// The OOM event that explains a death usually comes just before the die
	// event, but nothing orders them and the subscription may miss one. So it is
	// waited for a little, then looked up in the daemon's event log, even once the
	// die event is in; only a sandbox this process ended itself (Close, Kill) has a
	// known cause and no wait.
	s.mu.Lock()
	endedHere := s.gone != nil
	s.mu.Unlock()
	wait := oomEventLatency
	if endedHere {
		wait = 0
	}
	if !oom {
		oom = s.takeOOM(ictx, wait)
	}
	if !oom {
		if ins, err := s.b.cli.ContainerInspect(ictx, s.id); err == nil && ins.State != nil && ins.State.OOMKilled {
			oom = true
		}
	}
	// Read before the watch stops with the observers below.
	var hostRefused int64
	if s.hostPids != nil {
		hostRefused = s.hostPids.refusals()
	}
	var gone *model.Error
	switch {
	case s.expired():
		gone = s.expiredError()
	default:
		gone = s.goneError("it ended during the command")
		gone.Fix = "open a new sandbox; this one was stopped or removed from outside before its lifetime ended (by an operator, `sandboxio reap`, or a Docker daemon shutting down)"
	}
	gone.Err = cause
	s.markGone(gone)
	s.b.events.forget(s.id)
	s.stopObserver()
	switch {
	case oom:
		return s.memoryError("the sandbox was killed for running out of memory", gone)
	case hostRefused > 0:
		// A fork bomb that drives gVisor's own threads to the host
		// backstop takes gVisor down: the host's count of the forks it
		// refused there is the evidence.
		return s.pidsError(fmt.Sprintf("the sandbox died at its host pids backstop: the host refused gVisor %d forks at pids.max %d", hostRefused, s.hostPids.limit), gone)
	case s.hostPids == nil && s.tier == model.TierGVisor && forkRefused(stderr):
		// Where the host cgroup cannot be seen from this process (a remote
		// daemon), the forks the command saw refused at its own ceiling
		// are the only evidence there is.
		return s.pidsError("the sandbox died filling its process ceiling (the command's forks were refused; the host pids cgroup is not visible from here)", gone)
	}
	return gone
}

// running asks the daemon whether the container still runs.
func (s *sandbox) running(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, inspectBudget)
	defer cancel()
	ins, err := s.b.cli.ContainerInspect(ctx, s.id)
	return err == nil && ins.State != nil && ins.State.Running
}

// full asks the daemon whether the sandbox is at its process ceiling right
// now, when nothing could be looked at from inside. Under runc that is the
// pids cgroup (atCeiling). Under gVisor the host cgroup holds gVisor's own
// threads and says nothing; the runtime's own process list of the sandbox
// (`docker top`, which runsc answers from its kernel, not from inside the
// sandbox) counts the guest processes that RLIMIT_NPROC bounds. It costs a
// call to the runtime, so it is asked only when the probe failed.
func (s *sandbox) full(ctx context.Context) bool {
	if s.tier != model.TierGVisor {
		return s.atCeiling(ctx)
	}
	top, err := s.b.cli.ContainerTop(ctx, s.id, nil)
	// The exec being set up may hold a slot of its own.
	return err == nil && int64(len(top.Processes))+2 >= s.caps.Pids
}

// atCeiling asks the daemon whether the container's pids cgroup is full
// right now. That is the evidence that still works when no process can be
// started inside (runc then blocks new execs until a slot frees up). Under
// gVisor the host cgroup holds gVisor's own threads, so this says nothing
// there (see full).
func (s *sandbox) atCeiling(ctx context.Context) bool {
	if s.tier == model.TierGVisor {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, inspectBudget)
	defer cancel()
	st, err := s.b.cli.ContainerStatsOneShot(ctx, s.id)
	if err != nil {
		return false
	}
	defer st.Body.Close()
	var v container.StatsResponse
	if err := json.NewDecoder(st.Body).Decode(&v); err != nil {
		return false
	}
	// The exec being set up may hold a slot of its own.
	return v.PidsStats.Limit > 0 && v.PidsStats.Current+2 >= v.PidsStats.Limit
}

func (s *sandbox) memoryError(msg string, cause error) error {
	return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitMemory,
		Message: fmt.Sprintf("%s (memory_mb = %d, swap included)", msg, s.caps.MemoryMB),
		Fix:     "raise memory_mb, or make the code use less memory", Err: cause}
}

func (s *sandbox) pidsError(msg string, cause error) error {
	return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitPids,
		Message: fmt.Sprintf("%s (pids = %d)", msg, s.caps.Pids),
		Fix:     "raise pids, or make the code start fewer processes", Err: cause}
}

// interrupted ends an exec cut short by its timeout, the caller's context or
// an output overflow: its processes are killed first, then the error says
// which. No output is returned.
func (s *sandbox) interrupted(ctx context.Context, res execResult, timeout time.Duration, started time.Time) error {
	tracef("interrupted after %s: %v (pid %d)", time.Since(started), res.stopped, res.pid)
	// Under gVisor, forks the command saw refused are the evidence of a
	// sandbox at its ceiling (no look beside the killer there).
	suspected := s.tier == model.TierGVisor && forkRefused(res.errSeen)
	st := s.stopSession(ctx, res.pid, cmp.Or(s.killWait, killBudget), cleanupBudget, suspected)
	tracef("session stopped after %s: probe %+v gone=%v full=%v hard=%v; killer: %v", time.Since(started), st.probe, st.gone, st.full, st.hard, st.err)

	killed := "its processes were killed"
	if st.slow {
		killed = "its processes are being killed, and the sandbox's next command waits until they are"
	}
	var cause error
	var se sinkError
	var stErr streamError
	switch {
	case errors.Is(res.stopped, errOverflow):
		cause = &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitOutput,
			Message: fmt.Sprintf("the command printed more than %d MiB on one stream (the output cap); it was stopped and %s", maxOutput>>20, killed),
			Fix:     "print less: write bulky results to a file in the sandbox and print a summary, or split the work over several commands"}
	case errors.As(res.stopped, &se):
		cause = fmt.Errorf("exec: %w; the command was stopped", se)
	case errors.As(res.stopped, &stErr):
		cause = fmt.Errorf("exec: %w; the command was stopped and %s", stErr, killed)
	case ctx.Err() != nil:
		cause = fmt.Errorf("exec: %w", ctx.Err())
	case s.expired():
		cause = s.expiredError()
	default:
		cause = &model.Error{Class: model.ErrExecutionTimeout,
			Message: fmt.Sprintf("the command did not finish within %s; %s", timeout, killed),
			Fix:     "raise timeout_seconds, or pass a longer timeout to this call"}
	}
	switch {
	case st.gone:
		return s.died(ctx, started, cause, res.errSeen, false)
	case st.full, st.hard && s.tier == model.TierGVisor && forkRefused(res.errSeen):
		// Under gVisor a sandbox at its ceiling may not even run the
		// killer; the forks the command saw refused are the evidence.
		return s.pidsError("the command filled the process ceiling and was stopped by killing the sandbox", cause)
	case !st.hard && !st.slow && s.pidsHit(st.probe):
		return s.pidsError("the command hit the process ceiling", cause)
	}
	return cause
}

// stopped is what stopSession did.
type stopped struct {
	probe probeResult
	err   error // why the processes could not be killed from inside
	gone  bool  // the container was already gone
	full  bool  // the sandbox was at its process ceiling
	hard  bool  // the whole sandbox was killed instead
	slow  bool  // the killer goes on after budget; the sandbox waits for it
}

// stopSession kills the processes of a command's session from inside the
// sandbox, else kills the whole sandbox rather than leave them running. The
// killer is waited for up to budget, the whole by total, past the caller's
// cancellation. A merely slow killer goes on, up to killLimit, while the
// caller gets its error in time and the sandbox takes no command until it ends
// (settle); one that fails or outlasts killLimit, or is slow at the process
// ceiling (where it will get no process), kills the whole sandbox.
func (s *sandbox) stopSession(ctx context.Context, pid int, budget, total time.Duration, ceilingSuspected bool) stopped {
	var st stopped
	// The look at the ceiling must leave the hard kill its share of total.
	lookEnd := time.Now().Add(total - hardKillBudget)
	// The look at the ceiling starts at once, beside the killer, so that a
	// killer that fails leaves it time within total on a busy host (the
	// killer's failure is when the look counts). Under gVisor that look is
	// the runtime's process list, asked beside the killer only when no
	// killer can be started (the session is unknown): `runsc ps` during a
	// busy exec is suspected of stalling the sandbox's later execs (make
	// stress: TestOutputCap/runsc timed out in 2 of 7 rounds while it was).
	var guestFull <-chan bool
	stopLook := func() {}
	if s.tier != model.TierGVisor || pid <= 0 {
		ch := make(chan bool, 1)
		gctx, gcancel := context.WithDeadline(context.WithoutCancel(ctx), earliest(time.Now().Add(budget+ceilingBudget), lookEnd))
		go func() { defer gcancel(); ch <- s.full(gctx) }()
		guestFull, stopLook = ch, gcancel
	}
	killer := s.startKiller(ctx, pid)
	select {
	case k := <-killer:
		st.probe, st.err = k.probe, k.err
	case <-time.After(budget):
		if !ceilingSuspected {
			full := false
			if guestFull != nil {
				full, guestFull = <-guestFull, nil
			}
			if !full {
				s.awaitKiller(killer)
				stopLook()
				st.slow = true
				return st
			}
			st.full = true // the killer will not get a process
		}
		st.err = fmt.Errorf("the killer did not finish within %s", budget)
	}
	if st.err == nil && st.probe.left == 0 {
		stopLook() // not needed: the killer did its work
		return st
	}
	if isContainerGone(st.err) {
		st.gone = true
		return st
	}
	st.full = st.full || isExhausted(st.err)
	if !st.full && guestFull != nil {
		st.full = <-guestFull // bounded by lookEnd
	} else if !st.full && time.Until(lookEnd) > 0 {
		cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), earliest(time.Now().Add(ceilingBudget), lookEnd))
		st.full = s.full(cctx)
		cancel()
	}
	s.hardKill(ctx)
	s.markGone(s.goneError("it was killed because a command's processes could not be stopped one by one"))
	st.hard = true
	return st
}

// killed is what the in-sandbox killer reported.
type killed struct {
	probe probeResult
	err   error
}

// startKiller runs the killer of session pid, bounded by killLimit.
func (s *sandbox) startKiller(ctx context.Context, pid int) <-chan killed {
	ch := make(chan killed, 1)
	if pid <= 0 {
		ch <- killed{err: errors.New("the command's session is unknown")}
		return ch
	}
	go func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killLimit)
		defer cancel()
		pr, err := s.probe(kctx, pid, true)
		ch <- killed{pr, err}
	}()
	return ch
}

// awaitKiller lets a slow killer finish in the background: the sandbox
// takes no command until it has, and is killed whole if the killer fails.
func (s *sandbox) awaitKiller(killer <-chan killed) {
	done := make(chan struct{})
	s.mu.Lock()
	s.killing = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		k := <-killer
		tracef("slow killer ended: %+v %v", k.probe, k.err)
		if k.err == nil && k.probe.left == 0 || isContainerGone(k.err) {
			return
		}
		s.hardKill(context.Background())
		s.markGone(s.goneError("it was killed because a command's processes could not be stopped one by one"))
	}()
}

// hardKill kills the whole container, waiting at most hardKillBudget: a
// kill the daemon is slow to confirm goes on in the background, up to
// hardKillLimit, rather than be abandoned.
func (s *sandbox) hardKill(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hardKillLimit)
		defer cancel()
		// Its error is not traced: this may outlive the call.
		_ = s.b.cli.ContainerKill(kctx, s.id, "KILL")
	}()
	select {
	case <-done:
	case <-time.After(hardKillBudget):
		tracef("hard kill of %s not confirmed within %s; it goes on", short(s.id), hardKillBudget)
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// pidsHit reports whether the probe shows the process ceiling reached since
// the last look: a new "max" event in the pids cgroup (runc), or, where that
// counter is not visible (gVisor counts RLIMIT_NPROC failures nowhere), the
// sandbox having been full when the probe started (before it killed
// anything; the probe itself holds one slot).
func (s *sandbox) pidsHit(pr probeResult) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr.pidsMax >= 0 {
		hit := pr.pidsMax > s.lastMax
		s.lastMax = pr.pidsMax
		return hit
	}
	return int64(max(pr.peak, pr.procs))+1 >= s.caps.Pids
}

// hostPidsHit reports whether the host's count of forks refused at a runc
// sandbox's pids.max grew since the last look: the counter the probe reads
// inside, read from the host when the probe could not run (a command that
// hit the ceiling and gave up at once leaves the probe nothing to see but
// that count, and a busy host may not start the probe in time).
func (s *sandbox) hostPidsHit() bool {
	if s.hostPids == nil || s.tier == model.TierGVisor {
		return false
	}
	n, err := readPidsMaxEvents(s.hostPids.dir)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := n > s.lastMax
	s.lastMax = max(s.lastMax, n)
	return hit
}

// takeOOM reports whether the daemon has reported an OOM kill in the sandbox
// that no earlier command was blamed for, waiting up to d for one, and marks
// it as accounted for.
func (s *sandbox) takeOOM(ctx context.Context, d time.Duration) bool {
	s.mu.Lock()
	want := s.oomSeen + 1
	s.mu.Unlock()
	if s.b.events.count(s.id) < want && (d <= 0 || !s.b.events.wait(ctx, s.id, s.created, want, d)) {
		return false
	}
	n := s.b.events.count(s.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= s.oomSeen {
		return false
	}
	s.oomSeen = n
	return true
}

func (s *sandbox) oomHit(pr probeResult) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr.oomKil < 0 {
		return false
	}
	hit := pr.oomKil > s.lastOOM
	s.lastOOM = pr.oomKil
	return hit
}

// completed classifies a command that ended. A clean exit with no OOM event
// is the fast path, with no further API call. Anything else is looked at
// from inside the sandbox so that a cap that was hit is reported as such; a
// command that hit a cap has whatever it left running stopped.
func (s *sandbox) completed(ctx context.Context, res execResult, started time.Time, elapsed time.Duration) (backends.Result, error) {
	result := backends.Result{ExitCode: res.exitCode, Stdout: res.stdout, Stderr: res.stderr, Duration: elapsed}
	tracef("completed after %s: exit %d (pid %d)", elapsed, res.exitCode, res.pid)
	oom := s.takeOOM(ctx, 0)
	if res.exitCode == 0 && !oom {
		return result, nil
	}
	if !res.ran && s.shell && isExhausted(errors.New(string(res.stdout))) {
		// The wrapper never ran: the daemon wrote why into the stream.
		return backends.Result{}, s.pidsError("no process could be started: the sandbox is at its process ceiling", nil)
	}
	if s.expired() {
		// Killed as the lifetime ran out: the container ends a moment after
		// the expiry this client computed, never before.
		return backends.Result{}, s.died(ctx, started, nil, res.errSeen, oom)
	}
	// A command that hit a cap is over: what it left running is stopped. No
	// timeout is running here, so the killer gets a generous budget.
	sessionLeft := -1 // unknown
	stopLeft := func() {
		if sessionLeft == 0 {
			return
		}
		if st := s.stopSession(ctx, res.pid, inspectBudget, inspectBudget+ceilingBudget+hardKillBudget, true); st.gone {
			s.markGone(s.goneError("it ended during the command"))
			s.b.events.forget(s.id)
		}
	}
	capErr := func(err error) (backends.Result, error) {
		stopLeft()
		return backends.Result{}, err
	}

	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBudget)
	defer cancel()
	if s.atCeiling(ictx) {
		// Checked first: runc blocks new processes, the probe included, in
		// a full sandbox.
		return capErr(s.pidsError("the command left the sandbox at its process ceiling", nil))
	}
	pr, perr := s.probe(ictx, res.pid, false)
	tracef("probe after %s: %+v %v", time.Since(started), pr, perr)
	if perr == nil && res.pid > 0 {
		sessionLeft = pr.left
	}
	switch {
	case isContainerGone(perr):
		return backends.Result{}, s.died(ctx, started, nil, res.errSeen, oom)
	case isExhausted(perr):
		return capErr(s.pidsError("the command left the sandbox at its process ceiling", nil))
	case perr != nil && !s.running(context.WithoutCancel(ctx)):
		return backends.Result{}, s.died(ctx, started, perr, res.errSeen, oom)
	case perr != nil && !oom:
		// The sandbox runs but could not be looked into in time: a fork
		// bomb that keeps the ceiling full leaves no room for the probe.
		// The command's own report of refused forks, or a full ceiling, is
		// the evidence then; never a plain result. Either way what the
		// command left running is stopped.
		if forkRefused(res.errSeen) || s.full(ictx) || s.hostPidsHit() {
			return capErr(s.pidsError("a process in the sandbox could not fork: the process ceiling was reached", nil))
		}
		stopLeft()
		return result, nil
	}
	if perr == nil && s.oomHit(pr) {
		oom = true
		// Consume the daemon's event for this kill too, so that it is not
		// blamed on the next command when it arrives.
		s.takeOOM(ictx, oomEventLatency)
	}
	if !oom && res.exitCode == 137 {
		// SIGKILL: where the cgroup counter is not visible, the daemon's OOM
		// event is the evidence; it may trail the exit a little.
		oom = s.takeOOM(ictx, oomEventLatency)
	}
	switch {
	case oom:
		return capErr(s.memoryError("a process in the sandbox was killed for running out of memory", nil))
	case perr == nil && s.pidsHit(pr):
		return capErr(s.pidsError("a process in the sandbox could not fork: the process ceiling was reached", nil))
	case s.tier == model.TierGVisor && res.exitCode != 0 && forkRefused(res.errSeen):
		// gVisor counts refused forks nowhere; the command's own report of
		// EAGAIN from fork is the only evidence there is.
		return capErr(s.pidsError("a process in the sandbox could not fork (RLIMIT_NPROC)", nil))
	case res.exitCode != 0 && bytes.Contains(res.errSeen, []byte("No space left on device")):
		return capErr(&model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitDisk,
			Message: fmt.Sprintf("a write failed with no space left (disk_mb = %d; %s)", s.caps.DiskMB, s.diskCap),
			Fix:     "raise disk_mb, or write less"})
	}
	return result, nil
}

// forkRefused recognizes the messages shells and runtimes print when fork or
// thread creation fails with EAGAIN.
func forkRefused(stderr []byte) bool {
	s := strings.ToLower(string(stderr))
	if strings.Contains(s, "can't fork") || strings.Contains(s, "cannot fork") || strings.Contains(s, "fork: retry") {
		return true
	}
	forkish := strings.Contains(s, "fork") || strings.Contains(s, "clone") || strings.Contains(s, "thread")
	again := strings.Contains(s, "resource temporarily unavailable") || strings.Contains(s, "errno=11") || strings.Contains(s, "eagain")
	return forkish && again
}

// interpreters maps RunCode languages to a command that reads the program
// from standard input.
var interpreters = map[string][]string{
	"python":     {"python3", "-"},
	"python3":    {"python3", "-"},
	"sh":         {"sh", "-s"},
	"shell":      {"sh", "-s"},
	"bash":       {"bash", "-s"},
	"node":       {"node", "-"},
	"javascript": {"node", "-"},
	"js":         {"node", "-"},
	"ruby":       {"ruby", "-"},
}

// Languages lists the lang values RunCode accepts, sorted.
func Languages() []string { return slices.Sorted(maps.Keys(interpreters)) }

var codeExt = map[string]string{"python3": ".py", "sh": ".sh", "bash": ".sh", "node": ".js", "ruby": ".rb"}

// RunCode runs a program in an interpreter of the image. The program goes on
// standard input, so it is never limited by argument size or visible in the
// process list; when the caller needs standard input for the program's own
// use, the program is uploaded to a file under /tmp instead.
func (s *sandbox) RunCode(ctx context.Context, lang string, code string, opts backends.RunOptions) (backends.Result, error) {
	argv, ok := interpreters[strings.ToLower(lang)]
	if !ok {
		langs := slices.Sorted(maps.Keys(interpreters))
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "lang",
			Message: fmt.Sprintf("language %q is not supported", lang), Fix: "use one of " + strings.Join(langs, ", ")}
	}
	if opts.Stdin == nil {
		opts.Stdin = []byte(code)
		return s.Run(ctx, argv, opts)
	}
	file := "/tmp/sandboxio-code-" + randomHex(6) + codeExt[argv[0]]
	if err := s.Upload(ctx, file, []byte(code), 0o600); err != nil {
		return backends.Result{}, err
	}
	return s.Run(ctx, []string{argv[0], file}, opts)
}

// uploadScript writes standard input to $1 with mode $2, creating the
// directory. It runs inside the sandbox so that the write lands where the
// sandbox sees it (tmpfs mounts are invisible to the daemon's copy API) and
// counts against the disk cap.
const uploadScript = `d=${1%/*}; if [ -n "$d" ]; then mkdir -p "$d" || exit 1; fi; cat >"$1" && chmod "$2" "$1"`

// Upload writes a file into the sandbox, within the sandbox's timeout.
func (s *sandbox) Upload(ctx context.Context, p string, content []byte, mode int64) error {
	if !path.IsAbs(p) || strings.HasSuffix(p, "/") {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path",
			Message: fmt.Sprintf("%q is not an absolute file path", p), Fix: "upload to an absolute path such as /work/data.csv"}
	}
	if !s.shell {
		return &model.Error{Class: model.ErrCapabilityNotSupported, Attribute: "image",
			Message: "upload needs /bin/sh and cat in the image", Fix: "use an image with a shell, or bake the files into the image"}
	}
	if mode <= 0 {
		mode = 0o644
	}
	if content == nil {
		content = []byte{}
	}
	res, err := s.run(ctx, []string{"/bin/sh", "-c", uploadScript, "sandboxio-upload", path.Clean(p), fmt.Sprintf("%o", mode&0o7777)},
		content, nil, "/", 0, execOut{})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("upload: %s", strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Kill removes the sandbox. It is idempotent: a sandbox already gone, by
// Kill, lifetime or reaper, is success.
func (s *sandbox) Kill(ctx context.Context) error {
	s.markGone(s.goneError("it was killed"))
	err := s.b.removeContainer(ctx, s.id)
	// Whether or not the removal is confirmed: a sandbox left without its
	// observer has no route at all, which denies as much.
	s.stopObserver()
	if err != nil {
		return err
	}
	s.b.events.forget(s.id)
	return nil
}

// Close kills the sandbox, shielded from ctx's cancellation and bounded by the
// teardown grace. Within the grace it confirms the kill (container stopped or
// gone); the removal may finish after it returns (AutoRemove, a background
// removal, the watcher, reap). Only an unconfirmed kill warns
// (OrphanedSandboxWarning), with the id and labels to reap it by.
func (s *sandbox) Close(ctx context.Context) error {
	orphan := model.Warning{
		Message:   fmt.Sprintf("the sandbox could not be confirmed killed within the teardown grace of %s", s.b.cfg.teardownGrace),
		Fix:       "run `sandboxio reap`, or remove the container carrying these labels; its lifetime ends it at " + s.expires.UTC().Format(time.RFC3339),
		SandboxID: s.id,
		Labels:    s.labels,
	}
	return backends.CloseWithin(ctx, s.b.cfg.teardownGrace, func(sctx context.Context) error {
		s.markGone(s.goneError("it was killed"))
		err := s.b.stopContainer(sctx, s.id)
		if err == nil {
			if rerr := s.b.removeContainer(sctx, s.id); rerr != nil {
				tracef("close: %s stopped; removal continues after the grace: %v", short(s.id), rerr)
				s.b.removeStopped(s.id)
			}
			s.b.events.forget(s.id)
		}
		s.stopObserver()
		s.forgetTrail() // the caller audits the close, whatever its outcome
		return err
	}, orphan, s.onWarning)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
