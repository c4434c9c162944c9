package sandbox

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// LocalImage is the small image the demo and the tests use, built locally
// from a static busybox binary: no registry is needed.
const LocalImage = docker.LocalImage

// PrepareDockerImage makes sure image is on the Docker daemon the
// environment points at (DOCKER_HOST). LocalImage is built when missing,
// from the static busybox at busybox ("" means /bin/busybox), with one line
// to progress first; any other missing image is a ConfigurationError, since
// pulling is the daemon host's business (it happens outside every sandbox,
// so no sandbox's egress policy governs it). It reports whether it built.
func PrepareDockerImage(ctx context.Context, image, busybox string, progress func(string)) (bool, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return false, &BackendError{Backend: docker.Name, Op: "image", Err: err}
	}
	defer cli.Close()
	_, err = cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return false, nil
	case !cerrdefs.IsNotFound(err):
		return false, &BackendError{Backend: docker.Name, Op: "image", Err: err}
	case image != LocalImage:
		return false, &model.Error{Class: model.ErrConfiguration, Attribute: "image",
			Message: fmt.Sprintf("image %s is not on the Docker daemon", image),
			Fix:     "pull or load it on the daemon host (docker pull, docker load); only " + LocalImage + " is built here"}
	}
	if busybox == "" {
		busybox = docker.DefaultBusybox
	}
	if progress != nil {
		progress(fmt.Sprintf("preparing image %s: building it from %s, no registry needed …", image, busybox))
	}
	if err := docker.EnsureLocalImage(ctx, image, busybox); err != nil {
		return false, &BackendError{Backend: docker.Name, Op: "image", Err: err}
	}
	return true, nil
}
