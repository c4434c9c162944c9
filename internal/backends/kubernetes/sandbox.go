package kubernetes

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const (
	killBudget    = 2 * time.Second  // the wait for the in-sandbox killer after a timeout
	killLimit     = 15 * time.Second // a slow killer, which goes on after the wait
	inspectBudget = 2 * time.Second
)

type sandbox struct {
	b           *k8sBackend
	name        string
	tier        model.Tier
	caps        model.Caps
	callTimeout time.Duration
	created     time.Time
	expires     time.Time
	labels      map[string]string
	env         []string
	secrets     []string // NAME=value, sent in each exec's block only
	onWarning   func(model.Warning)
	diskCap     string
	pidsCap     string
	swap        string
	// podUID is set with ?api=agent-sandbox: the controller makes a new
	// pod of the same name when the pod is deleted, which is not this
	// sandbox (nothing of it survives, and it was never probed).
	podUID types.UID
	// createdUID is the uid of the pod probed at create, whatever the api.
	createdUID types.UID

	// killWait, when set (a test), replaces killBudget.
	killWait time.Duration

	mu      sync.Mutex
	gone    error
	lastOOM string
	// killing is closed when a slow killer (interrupted) has ended.
	killing chan struct{}
}

// settle waits for a killer still at work on an earlier command's processes
// (bounded by killLimit and the pod's removal after it): no command starts
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

// String and GoString keep secrets out of any formatted output.
func (s *sandbox) String() string   { return "kubernetes sandbox " + s.name }
func (s *sandbox) GoString() string { return s.String() }

func (s *sandbox) ID() string { return s.name }

func (s *sandbox) Info() backends.Info {
	s.mu.Lock()
	gone := s.gone != nil
	s.mu.Unlock()
	return backends.Info{ID: s.name, Backend: Name, Tier: s.tier, Labels: maps.Clone(s.labels), Created: s.created,
		Expires: s.expires, DiskCapStrategy: s.diskCap, PidsCapStrategy: s.pidsCap, Running: !gone && time.Now().Before(s.expires)}
}

func (s *sandbox) markGone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = err
	}
}

func (s *sandbox) goneError(why, fix string) *model.Error {
	return &model.Error{Class: model.ErrSandboxGone, Message: fmt.Sprintf("sandbox %s is gone: %s", s.name, why), Fix: fix}
}

func (s *sandbox) expiredError() *model.Error {
	return s.goneError(fmt.Sprintf("its lifetime ended at %s (activeDeadlineSeconds)", s.expires.UTC().Format(time.RFC3339)),
		"open a new sandbox; raise lifetime_seconds if the work needs longer")
}

// startTimeSlack is how much earlier than expires the kubelet may end the
// pod: it counts activeDeadlineSeconds from the pod's start time as the API
// server keeps it, in whole seconds, so from as early as the second the
// create began in.
const startTimeSlack = time.Second

// lifetimeEnding reports whether the kubelet may already have ended the pod
// for its lifetime, though expires has not passed yet.
func (s *sandbox) lifetimeEnding() bool {
	return !time.Now().Add(startTimeSlack).Before(s.expires)
}

func (s *sandbox) usable() error {
	s.mu.Lock()
	g := s.gone
	s.mu.Unlock()
	if g != nil {
		return g
	}
	if !time.Now().Before(s.expires) {
		err := s.expiredError()
		s.markGone(err)
		return err
	}
	return nil
}

// whyGone asks the API server what became of the pod; nil if it still runs.
// An exec that failed (cause) in the last second before expires is taken as
// cut by the lifetime: the kubelet kills the containers before it records
// the reason, so the pod read back may still look running.
func (s *sandbox) whyGone(ctx context.Context, cause error) error {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBudget)
	defer cancel()
	pod, err := s.b.cs.CoreV1().Pods(s.b.namespace).Get(ictx, s.name, metav1.GetOptions{})
	var gone *model.Error
	switch {
	case (apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil) ||
		(err == nil && s.podUID != "" && pod.UID != s.podUID)) && time.Now().Before(s.expires):
		gone = s.goneError("its pod was deleted", "open a new sandbox; this one was deleted from outside before its lifetime ended (by an operator, `sandboxio reap`, or the cluster evicting it)")
	case !time.Now().Before(s.expires) || (cause != nil && s.lifetimeEnding()) || (err == nil && pod.Status.Reason == "DeadlineExceeded"):
		gone = s.expiredError()
	case err != nil:
		return nil
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded || !anyRunning(pod):
		why := strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
		if why == "" {
			why = "its container is not running"
		}
		gone = s.goneError("its pod ended: "+why, "open a new sandbox; this one was stopped from outside before its lifetime ended (eviction, node failure, or an operator)")
	default:
		return nil
	}
	gone.Err = cause
	s.markGone(gone)
	return gone
}

// samePod shows that the pod the exec reached is still the one created: a
// replacement the agent-sandbox controller made is refused, and this
// sandbox is removed.
func (s *sandbox) samePod(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBudget)
	defer cancel()
	pod, err := s.b.cs.CoreV1().Pods(s.b.namespace).Get(ictx, s.name, metav1.GetOptions{})
	if err == nil && pod.UID == s.podUID {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError("pod get", err)
	}
	g := s.goneError("its pod was deleted (the agent-sandbox controller made a new one, which is not this sandbox and was removed)",
		"open a new sandbox; this one was deleted from outside before its lifetime ended")
	s.markGone(g)
	_ = s.b.removeSandbox(ictx, s.name)
	return g
}

// Run runs a command to completion within its timeout.
func (s *sandbox) Run(ctx context.Context, cmd []string, opts backends.RunOptions) (backends.Result, error) {
	if len(cmd) == 0 {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Message: "empty command", Fix: "pass the command and its arguments"}
	}
	env := slices.Clone(s.env)
	for _, k := range sortedKeys(opts.Env) {
		if !validEnvName(k) || strings.Contains(opts.Env[k], "\x00") {
			return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "env",
				Message: fmt.Sprintf("%q is not an environment variable name (or its value holds NUL)", k), Fix: "use names without '=' or NUL"}
		}
		env = append(env, k+"="+opts.Env[k])
	}
	env = append(env, s.secrets...)
	return s.run(ctx, cmd, opts.Stdin, execBlock(opts.Workdir, env), opts.Timeout, execOut{stdout: opts.Stdout, stderr: opts.Stderr})
}

func (s *sandbox) run(ctx context.Context, cmd []string, stdin, block []byte, timeout time.Duration, out execOut) (backends.Result, error) {
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
	res, err := s.b.exec(rctx, s.name, cmd, stdin, block, out)
	elapsed := time.Since(started)
	if err == nil && res.stopped == nil && s.podUID != "" {
		err = s.samePod(ctx)
	}
	if err == nil && res.stopped == nil && s.lifetimeEnding() {
		// A command that ends as the lifetime does may have been cut by the
		// pod's end, its exit status lost on the way (a proxy or load
		// balancer in front of the API server can close the stream
		// cleanly): the pod says which.
		if g := s.whyGone(ctx, nil); g != nil {
			return backends.Result{}, g
		}
	}
	if err != nil {
		if g := s.whyGone(ctx, err); g != nil {
			return backends.Result{}, g
		}
		if apierrors.IsNotFound(err) {
			// The exec's own path answered 404: whatever a read of the
			// pod says, commands cannot reach it any more.
			g := s.goneError("the API server answers that its pod is not found (exec: 404)", "open a new sandbox")
			g.Err = err
			s.markGone(g)
			return backends.Result{}, g
		}
		return backends.Result{}, err
	}
	if res.stopped != nil {
		return backends.Result{}, s.interrupted(ctx, res, timeout)
	}
	return s.completed(ctx, res, elapsed)
}

// interrupted ends an exec cut short: its session is killed from inside
// (or the whole pod, when that fails), then the error says why.
func (s *sandbox) interrupted(ctx context.Context, res execResult, timeout time.Duration) error {
	var cause error
	switch {
	case errors.Is(res.stopped, errOverflow):
		cause = &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitOutput,
			Message: fmt.Sprintf("the command printed more than %d MiB on one stream (the output cap); it was stopped and its processes were killed", maxOutput>>20),
			Fix:     "print less: write bulky results to a file in the sandbox and print a summary, or split the work over several commands"}
	case ctx.Err() != nil:
		cause = fmt.Errorf("exec: %w", ctx.Err())
	case !time.Now().Before(s.expires):
		cause = s.expiredError()
	case !errors.Is(res.stopped, context.DeadlineExceeded):
		cause = fmt.Errorf("exec: %w; the command was stopped", res.stopped)
	default:
		cause = &model.Error{Class: model.ErrExecutionTimeout,
			Message: fmt.Sprintf("the command did not finish within %s; its processes were killed", timeout),
			Fix:     "raise timeout_seconds, or pass a longer timeout to this call"}
	}
	// A killer that is merely slow (a loaded node can take longer than
	// killBudget to start an exec) is not a failure: it goes on, up to
	// killLimit, while the caller gets its error in time, and the
	// sandbox's next command waits for it (settle). Only a killer that
	// fails, or outlasts killLimit, costs the whole sandbox.
	killer := s.startKiller(ctx, res.pid)
	select {
	case ok := <-killer:
		if !ok {
			if g := s.whyGone(ctx, cause); g != nil {
				return g
			}
			s.killWhole(ctx)
		}
	case <-time.After(cmp.Or(s.killWait, killBudget)):
		s.awaitKiller(killer)
		var me *model.Error
		if errors.As(cause, &me) && me.Class == model.ErrExecutionTimeout {
			me.Message = fmt.Sprintf("the command did not finish within %s; its processes are being killed, and the sandbox's next command waits until they are", timeout)
		}
	}
	return cause
}

// startKiller runs the in-sandbox killer of session sid, bounded by
// killLimit; it reports whether the session was shown gone.
func (s *sandbox) startKiller(ctx context.Context, sid int) <-chan bool {
	ch := make(chan bool, 1)
	go func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killLimit)
		defer cancel()
		ch <- s.killSessionWithin(kctx, sid)
	}()
	return ch
}

// awaitKiller lets a slow killer finish in the background: the sandbox
// takes no command until it has, and is removed whole if the killer fails.
func (s *sandbox) awaitKiller(killer <-chan bool) {
	done := make(chan struct{})
	s.mu.Lock()
	s.killing = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		if ok := <-killer; !ok {
			s.killWhole(context.Background())
		}
	}()
}

// killWhole removes the sandbox whose processes could not be stopped one
// by one, rather than leave them running.
func (s *sandbox) killWhole(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.b.grace)
	defer cancel()
	_ = s.b.removeSandbox(dctx, s.name)
	s.markGone(s.goneError("it was killed because a command's processes could not be stopped one by one", "open a new sandbox"))
}

// killSession kills the command's session from inside, as far as it can
// within killBudget.
func (s *sandbox) killSession(ctx context.Context, sid int) {
	if sid <= 1 {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killBudget)
	defer cancel()
	s.killSessionWithin(kctx, sid)
}

// killSessionWithin runs the killer within ctx.
func (s *sandbox) killSessionWithin(ctx context.Context, sid int) bool {
	if sid <= 1 {
		return false
	}
	res, err := s.b.exec(ctx, s.name, []string{wrapBin, "kill", fmt.Sprint(sid)}, nil, nil, execOut{})
	return err == nil && res.stopped == nil && bytes.Contains(res.stdout, []byte("\x1esandboxio-kill\x1e left=0"))
}

// exitSIGKILL is the exit status of a process killed by SIGKILL, as the
// container runtime reports it: what every process in the pod gets when the
// kubelet ends it.
const exitSIGKILL = 128 + 9

// completed classifies a command that ended: a nonzero exit is looked at
// for a cap that was hit (the memory cgroup's OOM kills, refused forks, a
// full disk).
func (s *sandbox) completed(ctx context.Context, res execResult, elapsed time.Duration) (backends.Result, error) {
	result := backends.Result{ExitCode: res.exitCode, Stdout: res.stdout, Stderr: res.stderr, Duration: elapsed}
	if res.exitCode == 0 {
		return result, nil
	}
	if res.exitCode == 126 && res.pid == 0 && bytes.Contains(res.errSeen, []byte("sandboxio wrap:")) {
		return backends.Result{}, fmt.Errorf("exec: the wrapper did not start the command: %s", strings.TrimSpace(string(res.errSeen)))
	}
	if res.exitCode == exitSIGKILL {
		// Killed: by the pod's end, when the pod says so or the lifetime
		// may already have ended it (its status can lag the kill).
		var cause error
		if s.lifetimeEnding() {
			cause = fmt.Errorf("exec: the command was killed (exit %d) as the lifetime ended", res.exitCode)
		}
		if g := s.whyGone(ctx, cause); g != nil {
			return backends.Result{}, g
		}
	}
	if s.oomHit(ctx) {
		s.killSession(ctx, res.pid)
		return backends.Result{}, &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitMemory,
			Message: fmt.Sprintf("a process in the sandbox was killed for running out of memory (memory_mb = %d, swap included)", s.caps.MemoryMB),
			Fix:     "raise memory_mb, or make the code use less memory"}
	}
	if forkRefused(res.errSeen) {
		s.killSession(ctx, res.pid)
		return backends.Result{}, &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitPids,
			Message: "a process in the sandbox could not fork: the process ceiling was reached (" + s.pidsCap + ")",
			Fix:     "make the code start fewer processes"}
	}
	if bytes.Contains(res.errSeen, []byte("No space left on device")) {
		return backends.Result{}, &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitDisk,
			Message: fmt.Sprintf("a write failed with no space left (disk_mb = %d; %s)", s.caps.DiskMB, s.diskCap), Fix: "raise disk_mb, or write less"}
	}
	return result, nil
}

// oomHit reads the container memory cgroup's OOM kill count from inside
// and reports whether it grew since the last look.
func (s *sandbox) oomHit(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectBudget)
	defer cancel()
	res, err := s.b.exec(ictx, s.name, []string{wrapBin, "stat"}, nil, nil, execOut{})
	if err != nil || res.stopped != nil {
		return false
	}
	_, v, ok := strings.Cut(string(res.stdout), "oom_kill=")
	if !ok {
		return false
	}
	v = strings.TrimSpace(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := v != "-" && v != "0" && v != s.lastOOM
	s.lastOOM = v
	return hit
}

func forkRefused(stderr []byte) bool {
	s := strings.ToLower(string(stderr))
	if strings.Contains(s, "can't fork") || strings.Contains(s, "cannot fork") || strings.Contains(s, "fork: retry") {
		return true
	}
	forkish := strings.Contains(s, "fork") || strings.Contains(s, "clone") || strings.Contains(s, "thread")
	again := strings.Contains(s, "resource temporarily unavailable") || strings.Contains(s, "errno=11") || strings.Contains(s, "eagain")
	return forkish && again
}

var interpreters = map[string][]string{
	"python": {"python3", "-"}, "python3": {"python3", "-"}, "sh": {"sh", "-s"}, "shell": {"sh", "-s"},
	"bash": {"bash", "-s"}, "node": {"node", "-"}, "javascript": {"node", "-"}, "js": {"node", "-"}, "ruby": {"ruby", "-"},
}

// RunCode runs a program in an interpreter of the image, the program on
// standard input (or in a file under /tmp when the caller needs stdin).
func (s *sandbox) RunCode(ctx context.Context, lang string, code string, opts backends.RunOptions) (backends.Result, error) {
	argv, ok := interpreters[strings.ToLower(lang)]
	if !ok {
		return backends.Result{}, &model.Error{Class: model.ErrConfiguration, Attribute: "lang",
			Message: fmt.Sprintf("language %q is not supported", lang), Fix: "use one of " + strings.Join(slices.Sorted(maps.Keys(interpreters)), ", ")}
	}
	if opts.Stdin == nil {
		opts.Stdin = []byte(code)
		return s.Run(ctx, argv, opts)
	}
	file := "/tmp/sandboxio-code-" + randomHex(6)
	if err := s.Upload(ctx, file, []byte(code), 0o600); err != nil {
		return backends.Result{}, err
	}
	return s.Run(ctx, []string{argv[0], file}, opts)
}

// Upload writes a file into the sandbox through the wrapper (no shell is
// needed in the image); it lands on the sandbox's size-limited volumes.
func (s *sandbox) Upload(ctx context.Context, p string, content []byte, mode int64) error {
	if !path.IsAbs(p) || strings.HasSuffix(p, "/") {
		return &model.Error{Class: model.ErrConfiguration, Attribute: "path",
			Message: fmt.Sprintf("%q is not an absolute file path", p), Fix: "upload to an absolute path such as /work/data.csv"}
	}
	if mode <= 0 {
		mode = 0o644
	}
	if content == nil {
		content = []byte{}
	}
	res, err := s.run(ctx, []string{wrapBin, "put", path.Clean(p), fmt.Sprintf("%o", mode&0o7777)}, content, execBlock("/", nil), 0, execOut{})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("upload: %s", strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Kill removes the sandbox; gone already is success.
func (s *sandbox) Kill(ctx context.Context) error {
	s.markGone(s.goneError("it was killed", "open a new sandbox"))
	return s.b.removeSandbox(ctx, s.name)
}

// Close deletes the pod in a scope shielded from ctx and bounded by the
// teardown grace, and confirms that no container of it runs any more; when
// that cannot be confirmed in time it warns (OrphanedSandboxWarning).
func (s *sandbox) Close(ctx context.Context) error {
	orphan := model.Warning{
		Message:   fmt.Sprintf("the sandbox pod could not be confirmed killed within the teardown grace of %s", s.b.grace),
		Fix:       "run `sandboxio reap`, or delete the pod carrying these labels; activeDeadlineSeconds ends it at " + s.expires.UTC().Format(time.RFC3339),
		SandboxID: s.name,
		Labels:    s.labels,
	}
	return backends.CloseWithin(ctx, s.b.grace, func(sctx context.Context) error {
		s.markGone(s.goneError("it was killed", "open a new sandbox"))
		err := s.b.removeSandbox(sctx, s.name)
		if err == nil {
			err = s.b.stopped(sctx, s.name)
		}
		return err
	}, orphan, s.onWarning)
}
