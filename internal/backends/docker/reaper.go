package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/nodump"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Reap removes sandboxio containers whose lifetime has passed or whose owner
// process is verifiably gone (see backends.Owner.Judge: an owner in another
// PID namespace, on another machine, or with labels that say too little
// counts as alive). It removes only containers this backend created, as
// their mark under this host's reap key shows (see markValid); any other
// that would be reaped is returned with Left saying why it was left. A
// container of this very process is never reaped for its owner.
func (b *dockerBackend) Reap(ctx context.Context, opts backends.ReapOptions) ([]backends.Reaped, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	cs, err := b.list(ctx, opts.Labels)
	if err != nil {
		return nil, err
	}
	key, keyErr := reapKey()
	var out []backends.Reaped
	var firstErr error
	for _, c := range cs {
		reason := ""
		if t, err := time.Parse(time.RFC3339, c.Labels[labelExpires]); err == nil && now.After(t) {
			reason = "expired"
		} else if b.owner.Gone(c.Labels) {
			reason = "owner gone"
		}
		if reason == "" {
			continue
		}
		if ok, why := markValid(key, c.Labels); !ok {
			if keyErr != nil {
				why += " (" + keyErr.Error() + ")"
			}
			out = append(out, backends.Reaped{Info: infoFromSummary(c), Reason: reason, Left: "not ours, left: " + why})
			continue
		}
		if !opts.DryRun {
			if err := b.removeContainer(ctx, c.ID); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
		}
		out = append(out, backends.Reaped{Info: infoFromSummary(c), Reason: reason})
	}
	return out, firstErr
}

// The watcher is this package's Ryuk: a process that outlives its owner just
// long enough to remove the owner's containers.
const (
	// reaperEnv, when set to an owner id, turns any binary that links this
	// package into the watcher for that owner (see init).
	reaperEnv = "SANDBOXIO_DOCKER_REAPER"
	// reaperGraceEnv overrides the watcher's grace (a Go duration).
	reaperGraceEnv = "SANDBOXIO_DOCKER_REAPER_GRACE"
	// reaperLogEnv names a file the watcher logs to; by default it is silent.
	reaperLogEnv = "SANDBOXIO_DOCKER_REAPER_LOG"
	// defaultReaperGrace is how long the watcher waits after its owner is
	// gone before sweeping: long enough for a create the owner had in flight
	// to land on the daemon, so that the sweep sees it.
	defaultReaperGrace = 2 * time.Second
)

// The package's init hands the process to the watcher before main runs, so
// that the watcher can be the very binary that created the sandboxes (a
// test binary, the CLI, the provider) with no separate executable or image.
func init() {
	if id := os.Getenv(reaperEnv); id != "" {
		os.Exit(watcherMain(id))
	}
}

var (
	watcherOnce sync.Once
	watcherErr  error
	// watcherPipe is the write end the owner holds for its whole life; it
	// writes only the audit trails of its sandboxes to it (see trail.go). It
	// is close-on-exec, so children the owner starts do not keep the watcher
	// waiting after the owner is gone. It must stay reachable, or its
	// finalizer would close it and the watcher would reap the sandboxes of a
	// live owner.
	watcherPipe *os.File
)

// ensureWatcher starts the watcher for this process once. Failing to start it
// does not stop a create: leftovers are then bounded by their lifetime and
// Reap; the error is kept for tests and diagnostics.
func ensureWatcher() {
	watcherOnce.Do(func() { watcherErr = startWatcher(processOwner().ID) })
}

func startWatcher(ownerID string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("reaper pipe: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = watcherEnv(os.Environ(), ownerID)
	cmd.ExtraFiles = []*os.File{r} // fd 3 in the watcher
	// Its standard streams stay on /dev/null, so it never holds a pipe the
	// owner's caller waits on (go test waits for every holder of the test's
	// stdout).
	detach(cmd)
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return fmt.Errorf("reaper start: %w", err)
	}
	_ = r.Close()
	watcherSendMu.Lock()
	watcherPipe = w
	watcherSendMu.Unlock()
	go func() { _ = cmd.Wait() }()
	return nil
}

// watcherEnvNames are the variables the watcher is given from its owner's
// environment: what the Docker client reads to reach the same daemon
// (client.FromEnv, and the proxy and CA settings of a TCP daemon), the
// watcher's own settings, and what a process needs to run at all. Nothing
// else: a library user's environment may hold secrets, and the watcher
// outlives its owner. (The test helpers' variables are not passed either:
// the package's init hands the process to the watcher before any of them
// is read.)
var watcherEnvNames = []string{
	client.EnvOverrideHost, client.EnvTLSVerify, client.EnvOverrideCertPath, client.EnvOverrideAPIVersion,
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
	reaperGraceEnv, reaperLogEnv,
	"PATH", "HOME", "TMPDIR", "GODEBUG", "GOCOVERDIR",
	"SYSTEMROOT", "TEMP", "TMP", "USERPROFILE", // Windows
}

// watcherEnv builds the watcher's environment from its owner's: the
// variables of watcherEnvNames (matched ignoring case, as Windows does and
// as the proxy variables are written) and reaperEnv naming the owner.
func watcherEnv(environ []string, ownerID string) []string {
	out := make([]string, 0, len(watcherEnvNames)+1)
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		for _, keep := range watcherEnvNames {
			if strings.EqualFold(name, keep) {
				out = append(out, kv)
				break
			}
		}
	}
	return append(out, reaperEnv+"="+ownerID)
}

// watcherMain waits for the owner to go, then removes the owner's containers.
func watcherMain(ownerID string) int {
	logf := func(string, ...any) {}
	if p := os.Getenv(reaperLogEnv); p != "" {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			logf = func(format string, args ...any) {
				fmt.Fprintf(f, time.Now().Format(time.RFC3339Nano)+" reaper "+ownerID+": "+format+"\n", args...)
			}
		}
	}
	// The watcher holds its owner's environment (Docker credentials) and
	// audit trails: no core dump, no /proc reading by the same user. It
	// reaps even if that fails.
	if err := nodump.Apply(); err != nil {
		logf("%v", err)
	}
	grace := defaultReaperGrace
	if d, err := time.ParseDuration(os.Getenv(reaperGraceEnv)); err == nil && d >= 0 {
		grace = d
	}
	owner := os.NewFile(3, "owner")
	if owner == nil {
		logf("no owner pipe")
		return 2
	}
	// Blocks until every write end is closed: the owner has exited, however.
	// Meanwhile the owner says which sandboxes get a final audit record.
	trails := readTrails(owner, logf)
	logf("owner gone; sweeping in %s (%d audit trails)", grace, len(trails))
	time.Sleep(grace)

	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		logf("client: %v", err)
		return 1
	}
	defer cli.Close()
	b := &dockerBackend{cli: cli, cfg: config{teardownGrace: model.TeardownGrace}}
	// A second sweep catches a create that landed after the first.
	removed := map[string]bool{} // by id: true removed, false not
	for i, wait := range []time.Duration{0, 3 * time.Second} {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := b.list(ctx, map[string]string{labelOwner: ownerID})
		if err != nil {
			logf("sweep %d: %v", i, err)
		}
		for _, c := range cs {
			err := b.removeContainer(ctx, c.ID)
			logf("sweep %d: removed %s: %v", i, c.ID[:12], err)
			removed[c.ID] = err == nil
			if t, ok := trails[c.ID]; ok && err == nil {
				writeTrail(t, t.Removed, time.Now(), logf)
				delete(trails, c.ID)
			}
		}
		cancel()
	}
	// The sandboxes the owner left open that were not removed here: it
	// could not be, or they had ended already.
	for id, t := range trails {
		line := t.Gone
		switch ok, seen := removed[id]; {
		case seen && !ok:
			line = t.Unremoved
		case !t.Expires.IsZero() && !time.Now().Before(t.Expires):
			line = t.Expired
		}
		writeTrail(t, line, time.Now(), logf)
	}
	return 0
}
