package docker

import (
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Labels this backend sets under the reserved prefix, besides the tenant,
// session, template and managed labels that model defines, and the owner's
// record (backends.Owner.Labels).
const (
	labelExpires    = model.ReservedLabelPrefix + "expires"
	labelOwner      = backends.LabelOwner
	labelOwnerPID   = backends.LabelOwnerPID
	labelOwnerStart = backends.LabelOwnerStart
	labelRuntime    = model.ReservedLabelPrefix + "runtime"
	labelTier       = model.ReservedLabelPrefix + "tier"
	labelDiskCap    = model.ReservedLabelPrefix + "disk_cap"
	labelPidsCap    = model.ReservedLabelPrefix + "pids_cap"
	labelProbe      = model.ReservedLabelPrefix + "probe"
)

// processOwner is this process: the owner its sandboxes record, and the
// judge of the owners other sandboxes record (see backends.Owner.Judge).
func processOwner() backends.Owner { return backends.ProcessOwner() }

func randomHex(n int) string { return backends.RandomHex(n) }
