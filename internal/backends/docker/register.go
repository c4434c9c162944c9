package docker

import (
	"context"
	"fmt"
	"net/netip"

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
				"egress":        backends.OneOf(egressGateway),
				"resolver":      resolverOption,
			},
		},
		Variants:    []string{"egress"},
		Open:        func(backends.DSN) (backends.Backend, error) { return New() },
		LiveCheck:   liveCheck,
		Unreachable: "start the daemon (or point DOCKER_HOST at it) before apply; plan needs no daemon, apply does",
		Lists:       true,
	})
}

// resolverOption is the DNS server the egress gateway resolves listed names
// with: an IP address and port (198.18.1.53:53, [2001:db8::53]:53). Without
// it the gateway takes the host's /etc/resolv.conf.
var resolverOption = backends.DSNOption{
	Help: "an IP address and port, as 198.18.1.53:53 or [2001:db8::53]:53",
	Check: func(v string) (string, bool) {
		ap, err := netip.ParseAddrPort(v)
		if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
			return "", false
		}
		return ap.String(), true
	},
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
