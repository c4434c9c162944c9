// Package rawapi is the Engine API baseline of the benchmarks: the calls a
// sandbox's open -> run -> close comes down to, made directly. It imports
// nothing of the project, so the Docker backend's own tests can use it too.
package rawapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// OpenRunClose creates and starts a container with the given configuration,
// runs `true` in it and removes it: create, start, exec (create, attach,
// inspect), remove.
func OpenRunClose(ctx context.Context, cli *client.Client, cfg *container.Config, hc *container.HostConfig) error {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	resp, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, "sandboxio-raw-"+hex.EncodeToString(suffix))
	if err != nil {
		return err
	}
	if err = cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err == nil {
		err = Exec(ctx, cli, resp.ID, []string{"true"})
	}
	if rerr := cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true}); err == nil {
		err = rerr
	}
	return err
}

// Exec runs cmd in a running container and waits for it; a non-zero exit is
// an error.
func Exec(ctx context.Context, cli *client.Client, id string, cmd []string) error {
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{AttachStdout: true, AttachStderr: true, Cmd: cmd})
	if err != nil {
		return err
	}
	hj, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return err
	}
	_, err = stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
	hj.Close()
	if err != nil {
		return err
	}
	for {
		ins, err := cli.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return err
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return fmt.Errorf("exit %d", ins.ExitCode)
			}
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}
