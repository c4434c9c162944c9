// Package probeimage builds the test image that carries egressprobe, the
// static client the egress and broker tests run inside real sandboxes. It
// imports no backend, so that package docker's own tests can use it.
package probeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Ensure makes an image tag from the local busybox image's root filesystem
// plus files (path in the image: content): docker.EnsureImageWithFiles.
type Ensure func(ctx context.Context, tag string, files map[string][]byte) error

var built struct {
	once sync.Once
	bin  []byte
	err  error
}

// Image builds egressprobe (static: CGO off) once per process and bakes it
// into an image at /bin/egressprobe, tagged by the binary's hash. Uploading
// it instead would not do: a sandbox's writable paths are noexec.
func Image(ensure Ensure) (string, error) {
	built.once.Do(func() { built.bin, built.err = build() })
	if built.err != nil {
		return "", built.err
	}
	sum := sha256.Sum256(built.bin)
	tag := "sandboxio/egressprobe:" + hex.EncodeToString(sum[:6])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return tag, ensure(ctx, tag, map[string][]byte{"bin/egressprobe": built.bin})
}

func build() ([]byte, error) {
	dir, err := os.MkdirTemp("", "egressprobe")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "egressprobe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/docker/probeimage/egressprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build egressprobe: %w: %s", err, b)
	}
	return os.ReadFile(out)
}
