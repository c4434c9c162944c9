package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// EgressNetwork is the bridge network that sandboxes with open egress join.
// Docker's default bridge lets every container on it reach every other one,
// so two tenants' open-egress sandboxes could talk to each other there. On
// this network inter-container traffic is disabled: each sandbox reaches out
// through the host's NAT, never another sandbox.
const EgressNetwork = "sandboxio-egress"

// optionICC is the bridge driver option that allows traffic between the
// containers of one network.
const optionICC = "com.docker.network.bridge.enable_icc"

// egressMu serialises finding or creating EgressNetwork in this process; a
// lock file does it between processes on this host.
var egressMu sync.Mutex

// egressNetwork returns the id of EgressNetwork, creating it on first use and
// leaving it for the next sandbox. Docker 20.10 checks network names without a
// lock, and two networks of one name make a container fail to start, so
// creates are serialised (in process and by a lock file) and every process
// uses the oldest network of the name, removing younger unused ones.
func (b *dockerBackend) egressNetwork(ctx context.Context) (string, error) {
	b.netMu.Lock()
	id := b.egressNet
	b.netMu.Unlock()
	if id != "" {
		return id, nil
	}
	egressMu.Lock()
	defer egressMu.Unlock()
	defer lockFile(filepath.Join(os.TempDir(), "sandboxio-"+EgressNetwork+".lock"))()
	n, found, err := b.findEgressNetwork(ctx)
	if err != nil {
		return "", err
	}
	if !found {
		_, err := b.cli.NetworkCreate(ctx, EgressNetwork, network.CreateOptions{
			Driver:  "bridge",
			Options: map[string]string{optionICC: "false"},
			Labels:  map[string]string{model.LabelManaged: "true"},
		})
		if err != nil && !cerrdefs.IsConflict(err) {
			return "", fmt.Errorf("network create %s: %w", EgressNetwork, err)
		}
		if n, found, err = b.findEgressNetwork(ctx); err != nil {
			return "", err
		}
		if !found {
			return "", fmt.Errorf("network create %s: the daemon does not list it", EgressNetwork)
		}
	}
	if err := checkEgressNetwork(n); err != nil {
		return "", err
	}
	b.netMu.Lock()
	b.egressNet = n.ID
	b.netMu.Unlock()
	return n.ID, nil
}

// findEgressNetwork returns the oldest network named EgressNetwork and
// removes younger ones that no container uses.
func (b *dockerBackend) findEgressNetwork(ctx context.Context) (network.Summary, bool, error) {
	list, err := b.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", EgressNetwork))})
	if err != nil {
		return network.Summary{}, false, fmt.Errorf("network list: %w", err)
	}
	list = slices.DeleteFunc(list, func(n network.Summary) bool { return n.Name != EgressNetwork }) // the filter matches substrings
	if len(list) == 0 {
		return network.Summary{}, false, nil
	}
	slices.SortFunc(list, func(x, y network.Summary) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	for _, dup := range list[1:] {
		// Refused by the daemon while a container is attached: then it
		// stays until a later call, and never takes a new sandbox.
		_ = b.cli.NetworkRemove(context.WithoutCancel(ctx), dup.ID)
	}
	return list[0], true, nil
}

// checkEgressNetwork refuses a network of that name that does not keep
// sandboxes apart (made by someone else, with inter-container traffic
// allowed) rather than join it.
func checkEgressNetwork(n network.Summary) error {
	if n.Driver == "bridge" && n.Options[optionICC] == "false" && !n.Internal {
		return nil
	}
	return &model.Error{Class: model.ErrConfiguration, Attribute: "network.egress",
		Message: fmt.Sprintf("the Docker network %s exists but is not a bridge with inter-container traffic disabled (driver %q, %s=%q, internal %t), so open-egress sandboxes of different tenants could reach each other on it",
			EgressNetwork, n.Driver, optionICC, n.Options[optionICC], n.Internal),
		Fix: fmt.Sprintf("remove it (docker network rm %s) and sandboxio creates it again with %s=false", EgressNetwork, optionICC)}
}

// forgetEgressNetwork drops the cached id after the daemon said the network
// is gone (removed by hand while this process ran).
func (b *dockerBackend) forgetEgressNetwork() {
	b.netMu.Lock()
	b.egressNet = ""
	b.netMu.Unlock()
}
