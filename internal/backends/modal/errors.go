package modal

import (
	"errors"
	"fmt"
	"strings"

	modalsdk "github.com/modal-labs/libmodal/modal-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// classify turns an error of the SDK or of Modal's API into a typed error
// saying what to do. Idempotent calls have been retried by the SDK already
// (it retries Unavailable, Internal and the like with backoff); a create is
// never retried blindly (see create).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		return err
	}
	var nf modalsdk.NotFoundError
	var ae modalsdk.AlreadyExistsError
	var inv modalsdk.InvalidError
	var re modalsdk.RemoteError
	code := status.Code(unwrapStatus(err))
	msg := statusMessage(err)
	switch {
	case code == codes.Unauthenticated:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: errors.New(msg),
			Message: op + ": Modal refused the credentials (unauthenticated)",
			Fix:     "check MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (a token of this workspace, not expired); MODAL_SERVER_URL must point at Modal"}
	case code == codes.PermissionDenied:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: errors.New(msg),
			Message: op + ": the Modal token may not do this (permission denied)", Fix: "use a token of a workspace role that may create sandboxes in this app and environment"}
	case errors.As(err, &nf) || code == codes.NotFound:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: errors.New(msg),
			Message: op + ": not found on Modal", Fix: "check the app name in modal://APP and the environment option; create the app in Modal first"}
	case errors.As(err, &ae) || code == codes.AlreadyExists:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: errors.New(msg),
			Message: op + ": already exists on Modal", Fix: "close the sandbox that holds it, or use another session id"}
	case code == codes.ResourceExhausted:
		return &model.Error{Class: model.ErrResourceLimitExceeded, Limit: "quota", Err: errors.New(msg),
			Message: op + ": Modal refused for a quota or rate limit (resource exhausted)", Fix: "wait and retry, or raise the workspace's limits with Modal"}
	case errors.As(err, &inv) || code == codes.InvalidArgument || code == codes.FailedPrecondition:
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend", Err: errors.New(msg),
			Message: op + ": Modal refused the request as invalid", Fix: "check the template's values against Modal's limits (see the Modal backend guide)"}
	case errors.As(err, &re):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "image", Err: errors.New(msg),
			Message: op + ": Modal could not build or find the image", Fix: "check the image reference; Modal pulls it from its registry"}
	case code == codes.Unavailable || code == codes.Internal || code == codes.Unknown || code == codes.DeadlineExceeded:
		return fmt.Errorf("%s: Modal is unavailable (%s) after retries: %s", op, code, msg)
	}
	return fmt.Errorf("%s: %s", op, msg)
}

// unwrapStatus finds the innermost error that carries a gRPC status.
func unwrapStatus(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := status.FromError(e); ok {
			return e
		}
	}
	return err
}

func statusMessage(err error) string {
	if st, ok := status.FromError(unwrapStatus(err)); ok && st.Code() != codes.Unknown {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

func isNotFound(err error) bool {
	var nf modalsdk.NotFoundError
	return err != nil && (errors.As(err, &nf) || status.Code(unwrapStatus(err)) == codes.NotFound)
}

// retryable: the call may have reached Modal and its answer been lost.
func retryable(err error) bool {
	switch status.Code(unwrapStatus(err)) {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded:
		return true
	}
	return false
}

// redact replaces secret values in an error's text.
func redact(err error, secrets map[string]string) error {
	msg := err.Error()
	hit := false
	for _, v := range secrets {
		if v != "" && strings.Contains(msg, v) {
			msg = strings.ReplaceAll(msg, v, "[REDACTED]")
			hit = true
		}
	}
	if !hit {
		return err
	}
	return errors.New(msg)
}
