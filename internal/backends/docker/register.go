package docker

import (
	"context"
	"fmt"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The Docker backend's one registration: its DSN, its runtimes (the
// capability data's docker/RUNTIME entries), the backend itself, its live
// checks and its reaper.
func init() {
	backends.Register(backends.Registration{
		Scheme: Name, Order: 10, DefaultRuntime: "runc",
		DSN: backends.DSNSyntax{
			Form: "docker://", Target: backends.TargetNone,
			Env:     []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"},
			EnvHelp: "DOCKER_HOST (with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH for TLS)",
			NoHost:  "the daemon address goes in DOCKER_HOST",
			Options: map[string]backends.DSNOption{
				"disk_strategy": backends.OneOf(DiskAuto, DiskStorageOpt, DiskTmpfs),
			},
		},
		Open:        func(backends.DSN) (backends.Backend, error) { return New() },
		LiveCheck:   liveCheck,
		Unreachable: "start the daemon (or point DOCKER_HOST at it) before apply; plan needs no daemon, apply does",
		Lists:       true,
	})
}

// liveCheck runs Preflight on a client of its own, without a watcher:
// nothing is created.
func liveCheck(ctx context.Context, spec model.Spec) (backends.Preflight, error) {
	b, err := newBackend(WithoutWatcher())
	if err != nil {
		return backends.Preflight{}, fmt.Errorf("docker client: %w", err)
	}
	defer b.Close()
	return b.Preflight(ctx, spec)
}
