package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The host backstop: one container per daemon, made by the backend the
// first time it creates a sandbox there, that removes every sandbox past
// its expiry label (plus backstopGrace). It runs this binary from an image
// imported from a tar holding just that binary, with the daemon's socket,
// no network, a read-only root and no capabilities, and Docker restarts it
// with the daemon (unless-stopped). It depends on no CLI or owner being
// alive. It is needed where the sandbox's init can be stopped from inside
// (gVisor delivers SIGSTOP to a sandbox's PID 1; Linux does not), and is a
// second line everywhere else. See docs/design/docker-lifetime.md.
const (
	// BackstopName is the backstop container's name on every daemon.
	BackstopName = "sandboxio-backstop"
	// backstopImage is its image's repository; the tag is the binary's digest.
	backstopImage = "sandboxio/backstop"
	// labelBackstop marks the backstop container with its protocol. It
	// never carries model.LabelManaged: it is no sandbox.
	labelBackstop   = model.ReservedLabelPrefix + "backstop"
	backstopVersion = "v1"
	// backstopLoopEnv, set in the backstop container only, hands its PID 1
	// to the sweep loop (see init).
	backstopLoopEnv = "SANDBOXIO_DOCKER_BACKSTOP_LOOP"
	// backstopGrace is how long after its expiry label a sandbox is left to
	// its own init before the backstop removes it; backstopInterval is how
	// often it looks. A sandbox is gone within its lifetime plus their sum
	// plus the removal.
	backstopGrace    = 5 * time.Second
	backstopInterval = 2 * time.Second
	// labelLifetime is a sandbox's lifetime in seconds: with the claim's
	// time, the end of a claimed warm sandbox.
	labelLifetime = model.ReservedLabelPrefix + "lifetime_seconds"
	// backstopSocket is where the daemon's socket is mounted in it.
	backstopSocket = "/docker.sock"
	// backstopCheckTTL bounds how long a running backstop is trusted
	// without looking again.
	backstopCheckTTL = 10 * time.Second
)

func init() {
	if os.Getpid() == 1 && os.Getenv(backstopLoopEnv) == backstopVersion {
		os.Exit(backstopMain())
	}
}

// backstopMain is the backstop's loop; it ends only with its container.
func backstopMain() int {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxio backstop:", err)
		return 1
	}
	sw := &sweeper{cli: cli, grace: backstopGrace, claims: map[string]time.Time{}}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, _ = sw.sweep(ctx, time.Now())
		cancel()
		time.Sleep(backstopInterval)
	}
}

// sweeper is the backstop's state between sweeps.
type sweeper struct {
	cli    *client.Client
	grace  time.Duration
	claims map[string]time.Time // claimed warm sandbox -> its claim (rename) on the daemon's clock
	labels map[string]string    // tests only: sweep just the containers that also carry these
}

// sweep removes (kills and deletes) every sandboxio container whose end is
// more than grace before now, and returns the ids removed. The end is the
// expiry label; for a warm sandbox not yet claimed (the claim renames it),
// its idle bound; for a claimed one, its claim, as the daemon's rename
// event dates it, plus its lifetime, when the daemon still has that event.
// A sandbox without an end it can read is removed (fail closed: each is
// given one at create).
func (sw *sweeper) sweep(ctx context.Context, now time.Time) ([]string, error) {
	f := filters.NewArgs(filters.Arg("label", model.LabelManaged+"=true"))
	for k, v := range sw.labels {
		f.Add("label", k+"="+v)
	}
	cs, err := sw.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("container list: %w", err)
	}
	var removed []string
	var firstErr error
	seen := map[string]bool{}
	for _, c := range cs {
		seen[c.ID] = true
		if end, ok := sw.end(ctx, c); ok && !now.After(end.Add(sw.grace)) {
			continue
		}
		err = sw.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "in progress") {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		removed = append(removed, c.ID)
		delete(sw.claims, c.ID)
	}
	for id := range sw.claims {
		if !seen[id] {
			delete(sw.claims, id)
		}
	}
	return removed, firstErr
}

// end is when a listed sandbox must be gone.
func (sw *sweeper) end(ctx context.Context, c container.Summary) (time.Time, bool) {
	exp, err := time.Parse(time.RFC3339, c.Labels[labelExpires])
	if err != nil {
		return time.Time{}, false
	}
	if c.Labels[labelPool] != poolWarm || len(c.Names) == 0 {
		return exp, true
	}
	if strings.HasPrefix(strings.TrimPrefix(c.Names[0], "/"), warmPrefix) {
		idle, err := time.Parse(time.RFC3339, c.Labels[labelIdleUntil])
		return idle, err == nil
	}
	secs, err := strconv.ParseInt(c.Labels[labelLifetime], 10, 64)
	if err != nil {
		return exp, true
	}
	at, ok := sw.claims[c.ID]
	if !ok {
		if at, ok = renamedAt(ctx, sw.cli, c.ID, time.Unix(c.Created, 0)); !ok {
			return exp, true
		}
		sw.claims[c.ID] = at
	}
	return minTime(exp, at.Add(time.Duration(secs)*time.Second)), true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// renamedAt is the time of a container's first rename event since it was
// created, as the daemon's event log has it.
func renamedAt(ctx context.Context, cli *client.Client, id string, since time.Time) (time.Time, bool) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msgs, errs := cli.Events(qctx, events.ListOptions{
		Since: eventTime(since.Add(-time.Second)), Until: eventTime(time.Now()), Filters: watchFilters(id, events.ActionRename),
	})
	select {
	case m := <-msgs:
		return time.Unix(0, m.TimeNano), true
	case err := <-errs:
		// The log ended (io.EOF) or failed: either way no rename is known,
		// and the caller treats the claim time as unreadable.
		_ = err
		return time.Time{}, false
	case <-qctx.Done():
		return time.Time{}, false
	}
}

// backstopState is what the backend last found of the backstop.
type backstopState struct {
	mu  sync.Mutex
	at  time.Time
	err error // nil: running when last looked at
}

// ensureBackstop makes sure the daemon's backstop runs, creating or starting
// it as needed, and says why not when it cannot. It looks at most once per
// backstopCheckTTL.
func (b *dockerBackend) ensureBackstop(ctx context.Context, arch string) error {
	b.backstop.mu.Lock()
	defer b.backstop.mu.Unlock()
	if !b.backstop.at.IsZero() && time.Since(b.backstop.at) < backstopCheckTTL {
		return b.backstop.err
	}
	err := b.startBackstop(ctx, BackstopName, arch)
	if err != nil && ctx.Err() != nil {
		return err // not remembered: the caller gave up, the daemon did not answer no
	}
	b.backstop.at, b.backstop.err = time.Now(), err
	return err
}

// backstopTries bounds the looks at the backstop (about 5 s in all).
const backstopTries = 6

// startBackstop makes the backstop container of that name run.
//
// A backstop that was just started, or that the daemon is restarting (its
// restart policy), is given a few seconds to be seen running: under load
// three looks in a row can all come before that.
func (b *dockerBackend) startBackstop(ctx context.Context, name, arch string) error {
	for try := 0; try < backstopTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(100*time.Millisecond<<try, 2*time.Second)):
			}
		}
		ins, err := b.cli.ContainerInspect(ctx, name)
		switch {
		case err == nil && ins.Config != nil && ins.Config.Labels[labelBackstop] == backstopVersion:
			if ins.State != nil && ins.State.Running {
				return nil
			}
			if err := b.cli.ContainerStart(ctx, ins.ID, container.StartOptions{}); err != nil && !cerrdefs.IsConflict(err) {
				return fmt.Errorf("backstop start: %w", err)
			}
			continue // looked at again: started, or started by another process
		case err == nil:
			// Another protocol's backstop (an older sandboxio): replaced.
			if err := b.cli.ContainerRemove(ctx, ins.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				return fmt.Errorf("backstop remove: %w", err)
			}
		case !cerrdefs.IsNotFound(err):
			return fmt.Errorf("backstop inspect: %w", err)
		}
		if err := b.createBackstop(ctx, name, arch); err != nil && !cerrdefs.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("backstop: %s is not running after %d attempts", name, backstopTries)
}

// createBackstop creates and starts the backstop container.
func (b *dockerBackend) createBackstop(ctx context.Context, name, arch string) error {
	socket, ok := strings.CutPrefix(b.cli.DaemonHost(), "unix://")
	if !ok {
		return fmt.Errorf("the daemon is reached at %s, not a unix socket of this host, so its socket cannot be mounted into the backstop", b.cli.DaemonHost())
	}
	ref, err := b.backstopImage(ctx, arch)
	if err != nil {
		return err
	}
	pids, mem := int64(64), int64(64<<20)
	cfg := &container.Config{
		Image:      ref,
		Entrypoint: []string{"/sandboxio"},
		Env:        []string{backstopLoopEnv + "=" + backstopVersion, client.EnvOverrideHost + "=unix://" + backstopSocket},
		Labels:     map[string]string{labelBackstop: backstopVersion},
	}
	no := false
	hc := &container.HostConfig{
		NetworkMode:    "none",
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		Init:           &no,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		LogConfig:      container.LogConfig{Type: "none"},
		Resources:      container.Resources{Memory: mem, MemorySwap: mem, PidsLimit: &pids},
		Mounts: []mount.Mount{{Type: mount.TypeBind, Source: socket, Target: backstopSocket,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}}},
	}
	resp, err := b.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return fmt.Errorf("backstop create: %w", err)
	}
	if err := b.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("backstop start: %w", err)
	}
	return nil
}

// backstopImage returns the backstop's image, importing it when the daemon
// does not have it: a tar holding the init binary (static) as /sandboxio,
// tagged with its digest.
func (b *dockerBackend) backstopImage(ctx context.Context, arch string) (string, error) {
	exe, err := initBinary(arch)
	if err != nil {
		return "", err
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		return "", fmt.Errorf("backstop binary: %w", err)
	}
	sum := sha256.Sum256(bin)
	ref := backstopImage + ":" + hex.EncodeToString(sum[:8])
	if _, err := b.cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("backstop image inspect: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "sandboxio", Mode: 0o755, Size: int64(len(bin)), ModTime: time.Unix(0, 0)}); err != nil {
		return "", err
	}
	if _, err := tw.Write(bin); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	rc, err := b.cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, ref,
		image.ImportOptions{Message: "sandboxio host backstop: the static sandboxio binary"})
	if err != nil {
		return "", fmt.Errorf("backstop image import: %w", err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		return "", fmt.Errorf("backstop image import: %w", err)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return "", fmt.Errorf("backstop image import: %s", strings.TrimSpace(string(out)))
	}
	return ref, nil
}

// backstopError is the refusal of a sandbox whose lifetime needs the
// backstop (its init can be stopped from inside) when it does not run.
func backstopError(tier model.Tier, err error) error {
	return &model.Error{Class: model.ErrConfiguration, Attribute: "runtime",
		Message: fmt.Sprintf("the %s sandbox's lifetime needs the host backstop container %s, which could not be made to run: %v", tier, BackstopName, err),
		Fix:     "reach the Docker daemon over its unix socket on this host (DOCKER_HOST=unix://...), let sandboxio create " + BackstopName + " (docker ps -a shows why it stopped), or use runtime runc", Err: err}
}
