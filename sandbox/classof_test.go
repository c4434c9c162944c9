package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// ClassOf gives an error's own (outermost) class, the one its text starts
// with and the audit records, whatever it wraps: a ResourceLimitExceeded
// whose sandbox died of it is not SandboxGone (the gVisor fork bomb and
// OOM kill), a cap hit past a timeout is not ExecutionTimeout.
func TestClassOfIsTheOutermostClass(t *testing.T) {
	gone := &model.Error{Class: model.ErrSandboxGone, Message: "sandbox x is gone"}
	timeout := &model.Error{Class: model.ErrExecutionTimeout, Message: "did not finish"}
	pids := func(cause error) error {
		return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: model.LimitPids, Message: "fork bomb", Err: cause}
	}
	for name, c := range map[string]struct {
		err  error
		want model.ErrorClass
	}{
		"pids limit that ended the sandbox": {pids(gone), model.ErrResourceLimitExceeded},
		"pids limit past a timeout":         {pids(timeout), model.ErrResourceLimitExceeded},
		"wrapped on the way":                {fmt.Errorf("run: %w", pids(gone)), model.ErrResourceLimitExceeded},
		"gone with its cause inside":        {&model.Error{Class: model.ErrSandboxGone, Message: "gone", Err: timeout}, model.ErrSandboxGone},
		"cancellation first":                {errors.Join(context.Canceled, gone), model.ErrSandboxGone},
		"a bare class":                      {fmt.Errorf("x: %w", model.ErrCreateTimeout), model.ErrCreateTimeout},
		"no class":                          {errors.New("daemon down"), ""},
	} {
		if got := ClassOf(c.err); got != c.want {
			t.Errorf("%s: ClassOf(%v) = %q, want %q", name, c.err, got, c.want)
		}
	}
}
