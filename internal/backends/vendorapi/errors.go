package vendorapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// maxMessage clips the vendor's message in an error.
const maxMessage = 512

// StatusError is a non-2xx answer. Its text names the vendor, the
// operation, the status and the vendor's message (clipped, the credential
// scrubbed); never a request header.
type StatusError struct {
	Vendor     string
	Op         string // what was attempted, e.g. "create sandbox"
	Method     string
	Path       string // the request path, without query
	Status     int
	Message    string // the vendor's message, clipped and scrubbed
	RequestID  string
	RetryAfter time.Duration // what Retry-After said; 0 when absent
	Attempts   int           // requests sent, retries included
	Fix        string
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s %s answered %d %s", e.Vendor, e.Op, e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Fix != "" {
		fmt.Fprintf(&b, "; fix: %s", e.Fix)
	}
	return b.String()
}

// Retryable reports whether the status is one an idempotent call retries.
func Retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500 && status != http.StatusNotImplemented
}

// RetryAfter returns what the vendor asked to wait, when err carries a
// StatusError with Retry-After.
func RetryAfter(err error) (time.Duration, bool) {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return se.RetryAfter, true
	}
	return 0, false
}

// StatusOf returns the HTTP status err carries, or 0.
func StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return 0
}

// typed turns a StatusError into the error the caller sees: a model error
// for the statuses that have a class, the StatusError itself otherwise.
func (c *Client) typed(se *StatusError, sandbox bool) error {
	vendor, env := c.vendor(), c.CredentialEnv
	if env == "" {
		env = "the API key's environment variable"
	}
	switch s := se.Status; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		what := "refused the API key"
		if s == http.StatusForbidden {
			what = "does not allow this API key to do this"
		}
		return &model.Error{Class: model.ErrConfiguration, Attribute: "credentials",
			Message: fmt.Sprintf("%s %s (%s %d)", vendor, what, se.Op, s),
			Fix:     fmt.Sprintf("set %s to a valid key of an account (team) that may %s", env, se.Op), Err: se}
	case s == http.StatusNotFound && sandbox:
		return &model.Error{Class: model.ErrSandboxGone,
			Message: fmt.Sprintf("%s has no such sandbox any more (%s: 404)", vendor, se.Op),
			Fix:     "open a new sandbox", Err: se}
	case s == http.StatusNotFound:
		return &model.Error{Class: model.ErrConfiguration,
			Message: fmt.Sprintf("%s found nothing at %s (%s: 404)", vendor, se.Path, se.Op),
			Fix:     "check the template (or resource) name, and that the API URL points at the vendor's API", Err: se}
	case s == http.StatusConflict:
		return &model.Error{Class: model.ErrConfiguration,
			Message: fmt.Sprintf("%s refused %s: conflict (409)", vendor, se.Op),
			Fix:     "the resource exists or is busy; list sandboxes by label and close the one holding it, or retry later", Err: se}
	case s == http.StatusBadRequest || s == http.StatusUnprocessableEntity || s == http.StatusRequestEntityTooLarge:
		return &model.Error{Class: model.ErrConfiguration,
			Message: fmt.Sprintf("%s refused %s as invalid (%d)", vendor, se.Op, s),
			Fix:     "check the spec's values against what the vendor accepts (see the vendor's message)", Err: se}
	case s == http.StatusTooManyRequests:
		se.Fix = "the account's rate or concurrency limit was reached: retry later, or open fewer sandboxes at once"
	case s >= 500:
		se.Fix = "the vendor failed; retry later, and check the vendor's status page if it persists"
	}
	return se
}

// vendorMessage extracts the vendor's message from an error body: the
// message/error/detail field of a JSON object, else the text.
func vendorMessage(body []byte, scrub func(string) string) string {
	var obj map[string]any
	msg := ""
	if json.Unmarshal(body, &obj) == nil {
		for _, k := range []string{"message", "error", "detail", "msg"} {
			if v, ok := obj[k]; ok {
				if s, ok := v.(string); ok {
					msg = s
				} else if b, err := json.Marshal(v); err == nil {
					msg = string(b)
				}
				break
			}
		}
	} else if utf8.Valid(body) {
		msg = string(body)
	}
	msg = strings.Join(strings.Fields(scrub(msg)), " ")
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}
