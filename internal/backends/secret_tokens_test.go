package backends

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/capabilities"
)

// The DSN parser and the Rego rules detect tokens from one list
// (secret_tokens in the capability data): every prefix has an example, and
// every example is flagged by the Go detector and matched, from its start,
// by its entry's pattern (lib.rego's test_secret_token_examples_known runs
// the same examples through known_token).
func TestSecretTokensServeBothDetectors(t *testing.T) {
	tokens := capabilities.SecretTokens()
	if len(tokens) == 0 {
		t.Fatal("no secret_tokens in the capability data")
	}
	n := 0
	for _, tok := range tokens {
		re, err := regexp.Compile(`^(?:` + tok.Pattern + `)`)
		if err != nil {
			t.Fatalf("%s: pattern: %v", tok.Name, err)
		}
		for _, p := range tok.Prefixes {
			n++
			found := false
			for _, ex := range tok.Examples {
				found = found || strings.HasPrefix(ex, p)
			}
			if !found {
				t.Errorf("%s: no example starts with prefix %q", tok.Name, p)
			}
		}
		for _, ex := range tok.Examples {
			if !secretish(ex) {
				t.Errorf("%s: the DSN parser does not flag example %q", tok.Name, ex)
			}
			if !re.MatchString(ex) {
				t.Errorf("%s: pattern %q does not match example %q", tok.Name, tok.Pattern, ex)
			}
		}
	}
	if got := len(secretPrefixes()); got != n {
		t.Errorf("secretPrefixes has %d prefixes, the data %d", got, n)
	}
}
