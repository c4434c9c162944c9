package vendorapi

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Retry-After comes from the vendor: any value gives a wait in [0, maxRetryAfter].
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "5", "-1", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "junk", " 3 "} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v, now); d < 0 || d > maxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %s", v, d)
		}
	})
}

// An error body comes from the vendor: any body gives a short, valid
// message without the credential.
func FuzzVendorMessage(f *testing.F) {
	for _, s := range []string{"", `{"message":"x"}`, `{"error":{"code":1}}`, "plain " + canary, "\xff\xfe", `{"detail":"` + strings.Repeat("é", 600) + `"}`} {
		f.Add([]byte(s))
	}
	c := &Client{Credential: NewCredential(canary)}
	f.Fuzz(func(t *testing.T, body []byte) {
		m := vendorMessage(body, c.scrub)
		if len(m) > maxMessage+len("…") || !utf8.ValidString(m) && utf8.Valid(body) {
			t.Fatalf("message of %d bytes (valid %v) from %q", len(m), utf8.ValidString(m), body)
		}
		if strings.Contains(m, canary) {
			t.Fatalf("message holds the credential: %q", m)
		}
	})
}
