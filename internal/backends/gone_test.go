package backends

import (
	"strings"
	"testing"
	"time"
)

func TestGoneFixNamesTheLifetimeOnlyOnceItPassed(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		expires  time.Time
		lifetime bool
	}{
		{"expired", now.Add(-time.Second), true},
		{"expires this instant", now, true},
		{"still had time", now.Add(time.Minute), false},
		{"expiry unknown", time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fix := GoneFix(tc.expires, now)
			if got := strings.Contains(fix, "lifetime_seconds"); got != tc.lifetime {
				t.Fatalf("GoneFix(%v) = %q: mentions lifetime_seconds %v, want %v", tc.expires, fix, got, tc.lifetime)
			}
			if !strings.HasPrefix(fix, "open a new sandbox") {
				t.Fatalf("fix %q does not say what to do first", fix)
			}
		})
	}
}
