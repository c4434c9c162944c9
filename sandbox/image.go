package sandbox

import (
	"context"
	"errors"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// LocalImage is the small image the demo and the tests use, built locally
// from a static busybox binary: no registry is needed.
//
// Deprecated: use LocalImage of package sandbox/docker.
const LocalImage = docker.LocalImage

// PrepareDockerImage makes sure image is on the Docker daemon the
// environment points at (DOCKER_HOST).
//
// Deprecated: use PrepareImage of package sandbox/docker.
func PrepareDockerImage(ctx context.Context, image, busybox string, progress func(string)) (bool, error) {
	return prepareDockerImage(ctx, image, busybox, progress)
}

// prepareDockerImage is sandbox/docker's PrepareImage, for Open's
// PrepareLocalImage: a failure of the daemon is a *BackendError of op image.
func prepareDockerImage(ctx context.Context, image, busybox string, progress func(string)) (bool, error) {
	built, err := docker.PrepareImage(ctx, image, busybox, progress)
	var me *model.Error
	if err != nil && !errors.As(err, &me) {
		err = &BackendError{Backend: docker.Name, Op: "image", Err: err}
	}
	return built, err
}
