package backends

import "time"

// GoneFix is the fix text of a SandboxGone error. It names the lifetime only
// when the lifetime had passed by this client's clock: a sandbox that ended
// earlier was stopped from outside (an operator, `sandboxio reap`, the
// vendor), and telling the user to raise lifetime_seconds would send them
// after the wrong cause.
func GoneFix(expires, now time.Time) string {
	if !expires.IsZero() && !now.Before(expires) {
		return "open a new sandbox; raise lifetime_seconds if the work needs longer"
	}
	return "open a new sandbox; this one was stopped or removed before its lifetime ended (by an operator, `sandboxio reap`, or the backend itself), so check who ended it"
}
