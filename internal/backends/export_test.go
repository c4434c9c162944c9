package backends

// Test hooks for the external tests (package backends_test), which import
// the registered backends: a test in this package cannot.
var (
	Secretish      = secretish
	Unescape       = unescape
	SafeEcho       = safeEcho
	CredentialWord = credentialWord
)

// DSNOptionNames lists the query options the parser accepts for a scheme.
func DSNOptionNames(scheme string) []string {
	sc := dsnSchemes()[scheme]
	if sc == nil {
		return nil
	}
	var out []string
	for k := range sc.Options {
		out = append(out, k)
	}
	return out
}
