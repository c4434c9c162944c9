package docker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox/docker"
)

// With no daemon at DOCKER_HOST, PrepareImage fails as a backend failure of
// op image that says the daemon does not answer.
func TestPrepareImageWithoutADaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/sandboxio-test.sock")
	built, err := docker.PrepareImage(t.Context(), docker.LocalImage, "", nil)
	var be *sandbox.BackendError
	if built || !errors.Is(err, sandbox.ErrBackend) || !errors.As(err, &be) || be.Op != "image" ||
		!strings.Contains(err.Error(), "the Docker daemon does not answer") {
		t.Fatalf("built %v, err %v", built, err)
	}
}
