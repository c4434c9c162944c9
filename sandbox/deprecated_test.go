package sandbox

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The names the error classes had before the Err prefix still match the same
// errors, in both packages, for callers not yet moved.
func TestDeprecatedClassNamesMatchTheSameErrors(t *testing.T) {
	//nolint:staticcheck // the deprecated names are what this test checks
	cases := []struct{ cur, modelOld, sandboxOld model.ErrorClass }{
		{ErrCapabilityNotSupported, model.CapabilityNotSupported, CapabilityNotSupported},
		{ErrConfiguration, model.ConfigurationError, ConfigurationError},
		{ErrCreateTimeout, model.CreateTimeout, CreateTimeout},
		{ErrExecutionTimeout, model.ExecutionTimeout, ExecutionTimeout},
		{ErrSandboxGone, model.SandboxGone, SandboxGone},
		{ErrResourceLimitExceeded, model.ResourceLimitExceeded, ResourceLimitExceeded},
		{ErrExecutionBlocked, model.ExecutionBlocked, ExecutionBlocked},
		{ErrApprovalRequired, model.ApprovalRequired, ApprovalRequired},
	}
	if len(cases) != len(model.ErrorClasses) {
		t.Fatalf("%d classes checked, model has %d", len(cases), len(model.ErrorClasses))
	}
	for _, c := range cases {
		err := fmt.Errorf("open: %w", &model.Error{Class: c.cur, Message: "m"})
		for _, target := range []model.ErrorClass{c.cur, c.modelOld, c.sandboxOld} {
			if !errors.Is(err, target) {
				t.Errorf("errors.Is(%v, %s) = false", err, target)
			}
			if !errors.Is(c.cur, target) {
				t.Errorf("errors.Is(%s, %s) = false", c.cur, target)
			}
		}
		for _, other := range model.ErrorClasses {
			if other != c.cur && (errors.Is(err, other) || errors.Is(err, c.modelOld) != errors.Is(err, c.cur)) {
				t.Errorf("%v matches %s too", err, other)
			}
		}
		if ClassOf(err) != c.sandboxOld {
			t.Errorf("ClassOf = %q, want %q", ClassOf(err), c.sandboxOld)
		}
	}
}
