package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// LocalImage is the small image the tests and the demo use. No registry is
// reachable from this project's machines, so it is built locally from
// Debian's static busybox (scripts/build-image.sh builds the same).
const LocalImage = "sandboxio/busybox:local"

// DefaultBusybox is where Debian's busybox-static puts its binary.
const DefaultBusybox = "/bin/busybox"

// fallbackApplets are linked when the binary cannot list its own applets.
var fallbackApplets = []string{
	"sh", "ash", "cat", "ls", "sleep", "dd", "head", "tail", "echo", "true", "false", "kill", "ps",
	"mkdir", "rm", "cp", "mv", "chmod", "grep", "sed", "wc", "env", "id", "df", "du", "seq", "yes", "tr",
	"printf", "test", "[", "touch", "ln", "stat", "sync", "date", "uname", "hostname", "which",
}

// EnsureLocalImage makes sure the image tag exists on the daemon the
// environment points at, building it from a static busybox binary when it
// does not. It is idempotent and needs no registry.
func EnsureLocalImage(ctx context.Context, tag, busybox string) error {
	return EnsureImageWithFiles(ctx, tag, busybox, nil)
}

// PrepareImage makes sure ref is on the daemon the environment points at:
// LocalImage is built when missing, from the static busybox at busybox (""
// means DefaultBusybox), with one line to progress first; any other missing
// image is a ConfigurationError, since pulling is the daemon host's business
// (it happens outside every sandbox, so no sandbox's egress policy governs
// it). It reports whether it built. An error other than the *model.Error is
// the daemon's, unwrapped: the caller says which operation failed.
func PrepareImage(ctx context.Context, ref, busybox string, progress func(string)) (bool, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return false, err
	}
	defer cli.Close()
	_, err = cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return false, nil
	case !cerrdefs.IsNotFound(err):
		return false, err
	case ref != LocalImage:
		return false, &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: fmt.Sprintf("image %s is not on the Docker daemon", ref),
			Fix:     "pull or load it on the daemon host (docker pull, docker load); only " + LocalImage + " is built here"}
	}
	if busybox == "" {
		busybox = DefaultBusybox
	}
	if progress != nil {
		progress(fmt.Sprintf("preparing image %s: building it from %s, no registry needed …", ref, busybox))
	}
	return true, EnsureLocalImage(ctx, ref, busybox)
}

// EnsureImageWithFiles is EnsureLocalImage with extra files (path in the
// image: content, mode 0755) added to the root filesystem: the tests bake
// their own static helpers into an image this way, since a sandbox's
// writable paths are noexec.
func EnsureImageWithFiles(ctx context.Context, tag, busybox string, extra map[string][]byte) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, tag); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("image inspect: %w", err)
	}
	rootfs, err := busyboxRootfs(busybox, extra)
	if err != nil {
		return err
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, tag,
		image.ImportOptions{Message: "sandboxio local image: static busybox", Changes: []string{"ENV PATH=/bin", `CMD ["/bin/sh"]`}})
	if err != nil {
		return fmt.Errorf("image import: %w", err)
	}
	defer rc.Close()
	// The import completes when its progress stream ends; an error inside
	// the stream shows up as an "error" field.
	out, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("image import: %w", err)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("image import: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// busyboxRootfs builds the root filesystem tar: the binary, a link for
// every applet, the mount points and writable directories a sandbox uses.
func busyboxRootfs(busybox string, extra map[string][]byte) ([]byte, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox: %w (install Debian's busybox-static)", err)
	}
	if f, err := elf.NewFile(bytes.NewReader(bin)); err != nil {
		return nil, fmt.Errorf("busybox: %s is not an ELF binary: %w", busybox, err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return nil, fmt.Errorf("busybox: %s is dynamically linked; install Debian's busybox-static", busybox)
			}
		}
	}
	applets := fallbackApplets
	if out, err := exec.Command(busybox, "--list").Output(); err == nil {
		applets = strings.Fields(string(out))
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{
		{"bin", 0o755}, {"sbin", 0o755}, {"etc", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755},
		{"tmp", 0o1777}, {"work", 0o1777}, {"home", 0o755}, {"root", 0o700}, {"var", 0o755}, {"var/tmp", 0o1777},
	} {
		if err := dir(d.name, d.mode); err != nil {
			return nil, fmt.Errorf("rootfs tar: %w", err)
		}
	}
	if err := file("bin/busybox", 0o755, bin); err != nil {
		return nil, fmt.Errorf("rootfs tar: %w", err)
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: now}); err != nil {
			return nil, fmt.Errorf("rootfs tar: %w", err)
		}
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")); err != nil {
		return nil, fmt.Errorf("rootfs tar: %w", err)
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")); err != nil {
		return nil, fmt.Errorf("rootfs tar: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		if err := file(name, 0o755, extra[name]); err != nil {
			return nil, fmt.Errorf("rootfs tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("rootfs tar: %w", err)
	}
	return buf.Bytes(), nil
}
