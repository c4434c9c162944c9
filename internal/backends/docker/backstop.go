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
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
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
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, _ = backstopSweep(ctx, cli, time.Now(), backstopGrace)
		cancel()
		time.Sleep(backstopInterval)
	}
}

// backstopSweep removes (kills and deletes) every sandboxio container whose
// expiry label is more than grace before now, or that has no expiry label
// it can read (fail closed: every sandbox is given one at create). It
// returns the ids removed.
func backstopSweep(ctx context.Context, cli *client.Client, now time.Time, grace time.Duration) ([]string, error) {
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", model.LabelManaged+"=true"))})
	if err != nil {
		return nil, fmt.Errorf("container list: %w", err)
	}
	var removed []string
	var firstErr error
	for _, c := range cs {
		exp, err := time.Parse(time.RFC3339, c.Labels[labelExpires])
		if err == nil && !now.After(exp.Add(grace)) {
			continue
		}
		err = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "in progress") {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		removed = append(removed, c.ID)
	}
	return removed, firstErr
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

// startBackstop makes the backstop container of that name run.
func (b *dockerBackend) startBackstop(ctx context.Context, name, arch string) error {
	for try := 0; try < 3; try++ {
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
	return fmt.Errorf("backstop: %s is not running after three attempts", name)
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
	return &model.Error{Class: model.ConfigurationError, Attribute: "runtime",
		Message: fmt.Sprintf("the %s sandbox's lifetime needs the host backstop container %s, which could not be made to run: %v", tier, BackstopName, err),
		Fix:     "reach the Docker daemon over its unix socket on this host (DOCKER_HOST=unix://...), let sandboxio create " + BackstopName + " (docker ps -a shows why it stopped), or use runtime runc", Err: err}
}
