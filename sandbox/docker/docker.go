// Package docker holds what the sandbox package offers for its Docker
// backend only: the local image the demo and tests use, and preparing an
// image on the daemon.
package docker

import (
	"context"
	"errors"

	dockerbackend "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// LocalImage is the small image the demo and the tests use, built locally
// from a static busybox binary: no registry is needed.
const LocalImage = dockerbackend.LocalImage

// PrepareImage makes sure image is on the Docker daemon the environment
// points at (DOCKER_HOST). LocalImage is built when missing, from the static
// busybox at busybox ("" means /bin/busybox), with one line to progress
// first; any other missing image is a sandbox.ErrConfiguration, since pulling
// is the daemon host's business (it happens outside every sandbox, so no
// sandbox's egress policy governs it). A failure of the daemon is a
// *sandbox.BackendError. It reports whether it built.
func PrepareImage(ctx context.Context, image, busybox string, progress func(string)) (bool, error) {
	built, err := dockerbackend.PrepareImage(ctx, image, busybox, progress)
	var me *model.Error
	if err != nil && !errors.As(err, &me) {
		err = &sandbox.BackendError{Backend: dockerbackend.Name, Op: "image", Err: err}
	}
	return built, err
}
