package kubernetes

import (
	"maps"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// The owner of a pod is the process that created it (backends.Owner): its id
// is a label (labelOwner), so that an owner's pods can be selected, and the
// rest of its record are annotations.

func processOwner() backends.Owner { return backends.ProcessOwner() }

// ownerAnnotations is the owner's record without its id.
func ownerAnnotations(o backends.Owner) map[string]string {
	ann := o.Labels()
	delete(ann, backends.LabelOwner)
	return ann
}

// ownerGone reports whether the owner that a pod's annotations and labels
// record is verifiably dead (see backends.Owner.Judge).
func ownerGone(ann, lbl map[string]string, self backends.Owner) bool {
	rec := maps.Clone(ann)
	if rec == nil {
		rec = map[string]string{}
	}
	rec[backends.LabelOwner] = lbl[labelOwner]
	return self.Gone(rec)
}

func randomHex(n int) string { return backends.RandomHex(n) }
