package kubernetes

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// A pod's owner record is split between its label (the id) and its
// annotations (the rest); the reaper judges the two together with the
// backends' one judgement: an owner of another PID namespace is alive, a
// gone process of this one is dead.
func TestOwnerGoneReadsLabelAndAnnotations(t *testing.T) {
	self := processOwner()
	ann := ownerAnnotations(self)
	if _, ok := ann[backends.LabelOwner]; ok || ann[backends.LabelOwnerPIDNS] != self.PIDNS {
		t.Fatalf("annotations: %v", ann)
	}
	other := map[string]string{labelOwner: "another-process"}
	if ownerGone(ann, other, self) {
		t.Fatal("a live owner (this process's pid) was judged gone")
	}
	if ownerGone(ann, map[string]string{labelOwner: self.ID}, self) {
		t.Fatal("this process was judged gone")
	}
	if self.PIDNS == "" {
		t.Skip("no PID namespace identity here")
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	gone := ownerAnnotations(self)
	gone[backends.LabelOwnerPID] = strconv.Itoa(exited.ProcessState.Pid())
	if !ownerGone(gone, other, self) {
		t.Fatal("an exited owner of this namespace was not judged gone")
	}
	gone[backends.LabelOwnerPIDNS] = "4:4026532999"
	if ownerGone(gone, other, self) {
		t.Fatal("an owner of another PID namespace was judged gone")
	}
	if ownerGone(nil, other, self) {
		t.Fatal("a pod without annotations was judged gone")
	}
}
