package e2bserver

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// TemplateImage is the local image of the server's base template: a static
// busybox with what an E2B template offers the SDK, /bin/bash (busybox's
// shell under that name: the SDK runs every command as /bin/bash -l -c)
// and the user's home, /home/user.
const TemplateImage = "sandboxio/e2b-base:local"

// bashWrapper stands in for bash: the SDK passes -l -c CMD, which busybox sh
// takes as they are.
const bashWrapper = "#!/bin/sh\nexec /bin/sh \"$@\"\n"

// EnsureTemplateImage builds TemplateImage on the daemon the environment
// points at (DOCKER_HOST) when it is missing, from the static busybox at
// busybox. Idempotent; needs no registry.
func EnsureTemplateImage(ctx context.Context, busybox string) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, TemplateImage); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("image inspect: %w", err)
	}
	rootfs, err := templateRootfs(busybox)
	if err != nil {
		return err
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, TemplateImage,
		image.ImportOptions{Message: "sandboxio E2B conformance server base template", Changes: []string{"ENV PATH=/bin", `CMD ["/bin/sh"]`}})
	if err != nil {
		return fmt.Errorf("image import: %w", err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("image import: %w", err)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("image import: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

func templateRootfs(busybox string) ([]byte, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox: %w (install Debian's busybox-static)", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	hdr := func(h *tar.Header, data []byte) {
		h.ModTime = now
		h.Size = int64(len(data))
		if err == nil {
			err = tw.WriteHeader(h)
		}
		if err == nil && len(data) > 0 {
			_, err = tw.Write(data)
		}
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"etc", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}, {"tmp", 0o1777},
		{"work", 0o1777}, {"home", 0o755}, {"root", 0o700}, {"var", 0o755}, {"var/tmp", 0o1777}} {
		hdr(&tar.Header{Typeflag: tar.TypeDir, Name: d.name + "/", Mode: d.mode}, nil)
	}
	hdr(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, bin)
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			hdr(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
		}
	}
	hdr(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/bash", Mode: 0o755}, []byte(bashWrapper))
	hdr(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644},
		[]byte("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	hdr(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644}, []byte("root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"))
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("rootfs tar: %w", err)
	}
	return buf.Bytes(), nil
}
