package docker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// ScopeEnv names the scope of the one-sandbox-per-tenant-and-session rule on
// a daemon. Unset (the default), every process that reaches the daemon shares
// one scope: a second sandbox for a tenant and session is refused whichever
// process, on whichever host, asks for it. Two deployments (or test runs)
// that share a daemon but not their tenants can set different scopes.
const ScopeEnv = "SANDBOXIO_DOCKER_SCOPE"

// sessionName is the container name of a tenant's session, derived from scope,
// tenant and session alone, so that the daemon refuses a second container for
// the session (409 Conflict) whoever creates it, cold or by a warm claim. It is
// the tenant's prefix (tenantNamePrefix), a digest of all three, then the
// session id when the policy accepts it (so a claimed sandbox shows it:
// sessionOfName); the tenant id never appears. "" when there is no tenant or
// session: such a sandbox gets a random name.
func sessionName(scope, tenant, session string) string {
	if tenant == "" || session == "" {
		return ""
	}
	name := tenantNamePrefix(scope, tenant) + nameHash("sandboxio tenant session v1", scope, tenant, session)[:32]
	if sessionInName.MatchString(session) {
		name += "-" + session
	}
	return name
}

// sessionInName is the policy's rule for a session id (SBX-TEN-002), which
// is within Docker's rule for a name.
var sessionInName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// sessionOfName returns the session of a container named for one of the
// tenant's sessions, read from its name and accepted only when the name is
// exactly the one sessionName derives for the tenant and that session: a
// name is chosen by the process that creates or claims the sandbox, never
// by the code in it, and a session that does not hash to the name's digest
// under this tenant (and scope) is not believed. "" when the name does not
// say.
func sessionOfName(scope, tenant, name string) string {
	prefix := tenantNamePrefix(scope, tenant)
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || len(rest) < 34 || rest[32] != '-' {
		return ""
	}
	session := rest[33:]
	if sessionName(scope, tenant, session) != name {
		return ""
	}
	return session
}

// tenantNamePrefix is the start of the names of every sandbox of a tenant.
func tenantNamePrefix(scope, tenant string) string {
	return "sandboxio-s-" + nameHash("sandboxio tenant v1", scope, tenant)[:12] + "-"
}

// nameHash hashes its parts, each prefixed with its length so that no two
// lists of parts hash alike.
func nameHash(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// freeName looks at what holds a sandbox's name after a create was refused
// with a conflict. It returns nil when the name is free again: nothing holds
// it any more, or a container that is no sandbox any more held it and was
// removed. A live sandbox holding it is the busy error.
func (b *dockerBackend) freeName(ctx context.Context, name string, p createPlan) error {
	ins, err := b.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		// Removed since, or not yet created: the daemon reserves the name
		// before the container can be inspected.
		return errNameInFlight
	}
	if err != nil {
		return fmt.Errorf("container inspect: %w", err)
	}
	var labels map[string]string
	if ins.Config != nil {
		labels = ins.Config.Labels
	}
	status := ""
	if ins.State != nil {
		status = ins.State.Status
	}
	expires, _ := time.Parse(time.RFC3339, labels[labelExpires])
	expired := !expires.IsZero() && time.Now().After(expires)
	owner := b.owner.Judge(labels)
	stale := false
	switch status {
	case container.StateExited, container.StateDead, container.StateRemoving:
		// Its sleep ended (the lifetime) or it was killed: no sandbox any
		// more, only a name that AutoRemove is releasing or failed to.
		stale = true
	default:
		// Running, paused, restarting, or created and not yet started
		// (another process is between its create and its start): a live
		// sandbox, unless it is what `sandboxio reap` removes, a sandbox
		// past its lifetime or whose owner process on this host is gone
		// (a created one never starts without its owner, and AutoRemove
		// never removes a container that did not run). An owner whose
		// liveness cannot be verified from here counts as alive.
		stale = expired || owner.Dead
	}
	if stale {
		return b.removeContainer(ctx, ins.ID)
	}
	return busyError(p, ins.ID, labels, expires, owner)
}

// errNameInFlight: the name is held, but by no container that can be
// inspected yet (or any more).
var errNameInFlight = errors.New("the name is held by a create in flight")

// busyError refuses a second sandbox for a tenant and session, naming the one
// that holds it.
func busyError(p createPlan, id string, labels map[string]string, expires time.Time, owner backends.Verdict) error {
	who := ""
	if labels[labelOwner] != "" {
		who = fmt.Sprintf(", opened by %s; %s", backends.Describe(labels), owner.Why)
	}
	until := ""
	if !expires.IsZero() {
		until = fmt.Sprintf(" (its lifetime ends at %s)", expires.UTC().Format(time.RFC3339))
	}
	holder := "being created by another process"
	if id != "" {
		holder = "container " + shortID(id) + who
	}
	return &model.Error{Class: model.ErrConfiguration, Rule: rules.OneSandbox, Attribute: "session_id",
		Message: fmt.Sprintf("a sandbox is already open for tenant %q session %q (%s): one sandbox per tenant and session, on this Docker daemon",
			clip(p.spec.TenantID), clip(p.spec.SessionID), holder),
		Fix: "use the open sandbox, or close it first" + until +
			", or open the new sandbox under another session id; if the process that opened it was killed, its watcher removes it within seconds, and `sandboxio reap` removes it once that process is verifiably gone (run it on the same host and in the same PID namespace as that process); a sandbox whose owner cannot be judged from here is never removed before its lifetime ends"}
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// removeOwn removes the container of a name only while it is this process's
// own: a sandbox's name is its tenant's and session's, so once this process
// gave up on its create the name may already be another process's sandbox.
func (b *dockerBackend) removeOwn(ctx context.Context, name string) error {
	ins, err := b.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container inspect: %w", err)
	}
	if ins.Config == nil || ins.Config.Labels[labelOwner] != b.owner.ID {
		return nil
	}
	return b.removeContainer(ctx, ins.ID)
}

func scopeFromEnv() string { return os.Getenv(ScopeEnv) }
