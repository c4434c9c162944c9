package backends

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/capabilities"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// DefaultDSN is the backend of a resource that names none under a provider
// that sets no default_backend: the local Docker daemon.
const DefaultDSN = "docker://"

// DSN is a parsed backend DSN such as docker://?runtime=runsc, modal://APP or
// vercel://TEAM/PROJECT. It never holds a credential: ParseDSN refuses any.
type DSN struct {
	Scheme  string // a registered scheme, lower case
	App     string // modal: the Modal app name
	Team    string // vercel: the team slug or ID
	Project string // vercel: the project name or ID
	// kubernetes: the kubeconfig context (decoded; "in-cluster" for the
	// pod's own service account) and the namespace.
	Context   string
	Namespace string
	Options   map[string]string // non-secret query options; never nil after ParseDSN
}

// DSNOption is one allowed query option of a scheme.
type DSNOption struct {
	Help  string                      // the values it takes, for the fix
	Check func(string) (string, bool) // validates and normalizes a decoded value
}

// dsnScheme is a registered scheme's DSN syntax with its runtime option
// (from the capability data) added.
type dsnScheme struct{ DSNSyntax }

type dsnTables struct {
	schemes map[string]*dsnScheme
	order   []string // the schemes in the order fixes show them
}

// dsnCache holds the parser's tables, built on first use from the
// registrations (Register clears it): a backend with runtimes takes a
// runtime option whose values come from the embedded capability data, so
// the parser and the Rego rules agree on them.
var dsnCache atomic.Pointer[dsnTables]

func dsnSchemes() map[string]*dsnScheme { return tables().schemes }

func tables() *dsnTables {
	if t := dsnCache.Load(); t != nil {
		return t
	}
	t := &dsnTables{schemes: map[string]*dsnScheme{}}
	for _, r := range All() {
		sc := &dsnScheme{r.DSN}
		sc.Options = make(map[string]DSNOption, len(r.DSN.Options)+1)
		for k, v := range r.DSN.Options {
			sc.Options[k] = v
		}
		if rts := r.Runtimes(); len(rts) > 0 {
			sc.Options["runtime"] = OneOf(rts...)
		}
		t.schemes[r.Scheme] = sc
		t.order = append(t.order, r.Scheme)
	}
	dsnCache.Store(t)
	return t
}

// ParseDSN parses a backend DSN. Every refusal is a *model.Error of class
// ConfigurationError on the attribute "backend".
//
// Errors never echo the raw DSN nor any part of it that could be a secret:
// they name only known schemes and options, and an unknown scheme or option
// name only when it passes safeEcho; values are never quoted. Surrounding whitespace is refused, not trimmed: the DSN
// ends up in specs and their digests, so what the user wrote must be exactly
// what is used. The scheme is case-insensitive; everything else is not.
func ParseDSN(s string) (DSN, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return DSN{}, dsnErr(rules.DSNUnknown, "the backend DSN is empty", "write one of "+dsnForms())
	}
	name, rest, ok := strings.Cut(t, "://")
	if !ok {
		// "modal:app" or a bare "docker": the scheme is known, the form is not.
		name, rest, _ = strings.Cut(t, ":")
		sc := dsnSchemes()[strings.ToLower(name)]
		if sc == nil {
			return DSN{}, dsnErr(rules.DSNUnknown, "the backend is not a DSN of the form SCHEME://...",
				"write one of "+dsnForms()+"; credentials come from environment variables, never from the DSN")
		}
		name = strings.ToLower(name)
		if err := sc.checkCredentials(name, rest); err != nil {
			return DSN{}, err
		}
		return DSN{}, dsnErr(rules.DSNMalformed, fmt.Sprintf("the %s backend DSN lacks :// after the scheme", name),
			"write "+sc.Form)
	}
	name = strings.ToLower(name)
	sc := dsnSchemes()[name]
	if sc == nil {
		msg := "the backend DSN has an unknown scheme"
		if safeEcho(name, 16) {
			msg = fmt.Sprintf("the backend DSN has an unknown scheme %q", name)
		}
		fix := "write one of " + dsnForms()
		if credentialIn(rest, 0) != "" {
			fix += "; credentials come from environment variables, never from the DSN"
		}
		return DSN{}, dsnErr(rules.DSNUnknown, msg, fix)
	}
	// Credentials first, so that a DSN which is both malformed and holds a
	// secret is reported as the leak it is.
	if err := sc.checkCredentials(name, rest); err != nil {
		return DSN{}, err
	}
	if t != s {
		return DSN{}, sc.malformed(name, "has leading or trailing whitespace", "remove it")
	}
	if !printable(t) {
		return DSN{}, sc.malformed(name, "contains a space, a control character or a non-ASCII character",
			"remove it; option values may be percent-encoded")
	}
	// net/url.Parse would accept a host:port, a raw path, an opaque part and
	// more, and its errors quote the whole input, so the DSN is split by hand
	// into exactly the parts each scheme allows.
	rest, _, hasFrag := strings.Cut(rest, "#")
	if hasFrag {
		return DSN{}, sc.malformed(name, "has a fragment (#...)", "remove it")
	}
	rest, query, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	d := DSN{Scheme: name}
	if err := sc.parseTarget(&d, authority, path, strings.Contains(rest, "/")); err != nil {
		return DSN{}, err
	}
	opts, err := sc.parseOptions(name, query)
	if err != nil {
		return DSN{}, err
	}
	d.Options = opts
	return d, nil
}

// parseTarget checks what comes between :// and the query: nothing, APP, or
// TEAM/PROJECT. None of them is ever percent-decoded: valid names never need
// escaping, so a '%' is refused like any other character outside the names.
func (sc *dsnScheme) parseTarget(d *DSN, authority, path string, slash bool) *model.Error {
	switch sc.Target {
	case TargetNone:
		if authority != "" {
			return sc.malformed(d.Scheme, "has a host", sc.NoHost+"; write "+sc.Form)
		}
		if slash {
			return sc.malformed(d.Scheme, "has a path", sc.NoHost+"; write "+sc.Form+" with options only")
		}
	case TargetApp:
		if authority == "" {
			return sc.malformed(d.Scheme, "lacks the Modal app name", "write "+sc.Form)
		}
		if slash {
			return sc.malformed(d.Scheme, "has a path after the app name", "write "+sc.Form)
		}
		if !validName(authority, 64) {
			return sc.malformed(d.Scheme, "has an invalid app name",
				"write "+sc.Form+" where APP is a Modal app name: letters, digits, '.', '_' and '-', up to 64 characters, starting with a letter or digit")
		}
		d.App = authority
	case TargetTeamProject:
		if authority == "" {
			return sc.malformed(d.Scheme, "lacks the team", "write "+sc.Form)
		}
		if path == "" {
			return sc.malformed(d.Scheme, "lacks the project", "write "+sc.Form)
		}
		if strings.Contains(path, "/") {
			return sc.malformed(d.Scheme, "has path parts after the project", "write "+sc.Form)
		}
		if !validName(authority, 100) || !validName(path, 100) {
			return sc.malformed(d.Scheme, "has an invalid team or project",
				"write "+sc.Form+" with the Vercel team slug or ID and the project name or ID: letters, digits, '.', '_' and '-', up to 100 characters each")
		}
		d.Team, d.Project = authority, path
	case TargetContextNamespace:
		return sc.parseContextNamespace(d, authority, path)
	}
	return nil
}

// parseContextNamespace reads kubernetes://CONTEXT/NAMESPACE. Context names
// are whatever a kubeconfig says (EKS ARNs hold ':' and '/'), so
// CONTEXT alone is percent-decoded; NAMESPACE is a DNS label and never needs
// it.
func (sc *dsnScheme) parseContextNamespace(d *DSN, authority, path string) *model.Error {
	if authority == "" {
		return sc.malformed(d.Scheme, "lacks the kubeconfig context", "write "+sc.Form+" (CONTEXT \"in-cluster\" inside a pod)")
	}
	if path == "" {
		return sc.malformed(d.Scheme, "lacks the namespace", "write "+sc.Form)
	}
	if strings.Contains(path, "/") {
		return sc.malformed(d.Scheme, "has path parts after the namespace", "write "+sc.Form)
	}
	ctx, err := url.PathUnescape(authority)
	if err != nil || ctx == "" || len(ctx) > 253 || !printable(ctx) {
		return sc.malformed(d.Scheme, "has an invalid context",
			"write "+sc.Form+" with the context's name as in the kubeconfig, percent-encoding '/', '?', '#' and '%' (at most 253 characters; '@' is refused)")
	}
	if !dnsLabel.MatchString(path) { // RFC 1123, as Kubernetes requires of namespaces
		return sc.malformed(d.Scheme, "has an invalid namespace",
			"write "+sc.Form+" with a namespace name: lower-case letters, digits and '-', starting and ending with a letter or digit, up to 63 characters")
	}
	d.Context, d.Namespace = ctx, path
	return nil
}

// parseOptions decodes and validates the query. Option names are exact (lower
// case); each may appear once and must have a value.
func (sc *dsnScheme) parseOptions(name, query string) (map[string]string, *model.Error) {
	opts := map[string]string{}
	if strings.Contains(query, ";") {
		return nil, sc.malformed(name, "separates options with ';'", "separate options with '&'")
	}
	for _, pair := range strings.Split(query, "&") {
		if pair == "" {
			continue
		}
		rk, rv, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(rk)
		if err != nil {
			return nil, sc.malformed(name, "has an option name with a malformed %-escape", "percent-encode it as %XX")
		}
		opt, ok := sc.Options[k]
		if !ok {
			msg := fmt.Sprintf("the %s backend DSN has an option it does not know", name)
			if safeEcho(k, 32) {
				msg = fmt.Sprintf("the %s backend DSN has no option %q", name, k)
			}
			return nil, dsnErr(rules.DSNOption, msg, "use only the options "+sc.optionList()+"; names are lower case")
		}
		if _, dup := opts[k]; dup {
			return nil, sc.malformed(name, fmt.Sprintf("sets option %s twice", k), "keep one")
		}
		v, err := url.QueryUnescape(rv)
		switch {
		case err != nil:
			return nil, sc.malformed(name, fmt.Sprintf("has a malformed %%-escape in option %s", k), "percent-encode it as %XX")
		case v == "":
			return nil, sc.malformed(name, fmt.Sprintf("has no value for option %s", k), "set "+k+" to "+opt.Help+", or leave it out")
		}
		nv, ok := "", printable(v)
		if ok {
			nv, ok = opt.Check(v)
		}
		if !ok {
			return nil, sc.malformed(name, fmt.Sprintf("has an invalid value for option %s", k), "set "+k+" to "+opt.Help)
		}
		opts[k] = nv
	}
	return opts, nil
}

// checkCredentials refuses a DSN that carries anything credential-like. rest
// is the DSN after the scheme's "://" (or ":").
func (sc *dsnScheme) checkCredentials(name, rest string) *model.Error {
	where := credentialIn(rest, 0)
	if where == "" {
		return nil
	}
	fix := fmt.Sprintf("remove it and set %s in the environment instead; write %s with non-secret options only",
		sc.EnvHelp, sc.Form)
	if sc.Target == TargetContextNamespace && strings.Contains(where, "'@'") {
		// '@' stays refused everywhere (it is how credentials get into
		// URLs), so kubeadm's kubernetes-admin@kubernetes needs a new name.
		fix += "; a context whose name holds '@' cannot be named in a DSN: give it another with `kubectl config rename-context`"
	}
	return dsnErr(rules.DSNCredential,
		fmt.Sprintf("the %s backend DSN carries a credential in %s; credentials never belong in a DSN", name, where), fix)
}

// credentialIn describes where s holds something credential-like, or returns
// "". It looks at user-info, option names, option values (recursing into
// values that are URLs, such as api_url) and tokens that look like keys, in
// both the raw and the percent-decoded text. The description never quotes s
// except for option names that pass safeEcho.
func credentialIn(s string, depth int) string {
	// No allowed part of any DSN contains '@', so wherever it is (the
	// user-info, or a password that itself holds '/', '?' or '#') it marks a
	// credential; so does an encoded one.
	const userinfo = "user-info (text before '@')"
	if strings.Contains(s, "@") {
		return userinfo
	}
	head, frag, _ := strings.Cut(s, "#")
	head, query, _ := strings.Cut(head, "?")
	if strings.Contains(unescape(head), "@") {
		return userinfo
	}
	if secretish(head) {
		return "a value that looks like an access key or token"
	}
	for _, part := range []string{query, frag} {
		for _, pair := range strings.FieldsFunc(part, func(r rune) bool { return r == '&' || r == ';' }) {
			k, v, _ := strings.Cut(pair, "=")
			key := describeKey(k)
			if w := credentialWord(k); w != "" {
				return key
			}
			if strings.Contains(unescape(k), "@") {
				return userinfo
			}
			if secretish(k) || secretish(v) {
				return "the value of " + key
			}
			if depth < 2 {
				if w := credentialIn(unescape(v), depth+1); w != "" {
					return w + " inside " + key
				}
			}
		}
	}
	return ""
}

// credentialWords are the name parts that mark an option as a credential.
// They are matched as substrings of the lower-cased name with '-', '_', '.'
// and spaces removed, so x-api-key, apiKey, access_token and client_secret
// all match. A false positive only turns "unknown option" into "credential".
var credentialWords = []string{
	"key", "token", "secret", "pass", "pwd", "auth", "cred", "bearer",
	"signature", "jwt", "cookie",
}

func credentialWord(rawKey string) string {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(unescape(rawKey)))
	if norm == "sig" {
		return "sig"
	}
	for _, w := range credentialWords {
		if strings.Contains(norm, w) {
			return w
		}
	}
	return ""
}

// describeKey names an option in a message: by its name when that is safe to
// echo, else by the credential word in it, else not at all.
func describeKey(rawKey string) string {
	if k := unescape(rawKey); safeEcho(k, 32) {
		return "option " + strconv.Quote(k)
	}
	if w := credentialWord(rawKey); w != "" {
		return fmt.Sprintf("an option whose name contains %q", w)
	}
	return "an option"
}

// secretPrefixes start well-known API keys and tokens: the prefixes of the
// capability data's secret_tokens, whose patterns the Rego rules match.
var secretPrefixes = sync.OnceValue(func() []string {
	var out []string
	for _, t := range capabilities.SecretTokens() {
		out = append(out, t.Prefixes...)
	}
	return out
})

// secretish reports whether s, raw or percent-decoded, holds a token that
// looks like a key: a known prefix followed by at least 16 characters that
// include a digit or an upper-case letter (so "ak-my-long-app-name" is a
// name, not a Modal key), or a run of 32 or more letters and digits mixing
// both (hex digests, base62 keys). Names people choose rarely match either.
func secretish(s string) bool {
	return secretToken(s) || secretToken(unescape(s))
}

func secretToken(s string) bool {
	notTok := func(r rune) bool { return !isAlnum(r) && r != '-' && r != '_' }
	for _, tok := range strings.FieldsFunc(s, notTok) {
		for _, p := range secretPrefixes() {
			if rest, ok := strings.CutPrefix(tok, p); ok && len(rest) >= 16 &&
				strings.ContainsFunc(rest, func(r rune) bool { return ('0' <= r && r <= '9') || ('A' <= r && r <= 'Z') }) {
				return true
			}
		}
		for _, run := range strings.FieldsFunc(tok, func(r rune) bool { return !isAlnum(r) }) {
			if len(run) >= 32 && strings.ContainsAny(run, "0123456789") &&
				strings.ContainsFunc(run, func(r rune) bool { return r < '0' || r > '9' }) {
				return true
			}
		}
	}
	return false
}

// safeEcho reports whether s may be quoted in an error: lower-case letters,
// '_', '-', '.' and '+' only, starting with a letter, at most max bytes. No
// digits and no upper case means no key or token (nor a canary such as
// CANARY-s3cr3t-9f8e7d) can pass, while typos like "regoin" still show.
func safeEcho(s string, max int) bool {
	if s == "" || len(s) > max || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && !strings.ContainsRune("_-.+", r) {
			return false
		}
	}
	return true
}

// unescape percent-decodes s for the credential checks. Unlike
// url.QueryUnescape it does not give up on a malformed escape, which would
// let one "%zz" hide an encoded '@' or key elsewhere; it keeps that escape
// as it is and decodes the rest.
func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '+':
			b.WriteByte(' ')
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func isAlnum(r rune) bool {
	return ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// validName accepts letters, digits, '.', '_' and '-', starting with a letter
// or digit: Modal's app and environment names and Vercel's team and project
// slugs and IDs all fit.
func validName(s string, max int) bool {
	if s == "" || len(s) > max || !isAlnum(rune(s[0])) {
		return false
	}
	for _, r := range s {
		if !isAlnum(r) && !strings.ContainsRune("._-", r) {
			return false
		}
	}
	return true
}

// OneOf is an option that takes one of the given values.
func OneOf(values ...string) DSNOption {
	values = append([]string(nil), values...)
	sort.Strings(values)
	return DSNOption{
		Help: "one of " + strings.Join(values, ", "),
		Check: func(v string) (string, bool) {
			for _, allowed := range values {
				if v == allowed {
					return v, true
				}
			}
			return "", false
		},
	}
}

// Pattern is an option whose values match a regular expression.
func Pattern(expr, help string) DSNOption {
	re := regexp.MustCompile(expr)
	return DSNOption{Help: help, Check: func(v string) (string, bool) { return v, re.MatchString(v) }}
}

// Name is an option that takes a name of letters, digits, '.', '_' and '-',
// starting with a letter or digit, of at most max bytes.
func Name(help string, max int) DSNOption {
	return DSNOption{Help: help, Check: func(v string) (string, bool) { return v, validName(v, max) }}
}

// DNSName is an option that takes a DNS name of two labels or more,
// lower-cased.
func DNSName(help string) DSNOption { return DSNOption{Help: help, Check: dnsName} }

// WholeSeconds is an option that takes whole seconds, 1 to 3600.
func WholeSeconds() DSNOption { return DSNOption{Help: "whole seconds, 1 to 3600", Check: seconds} }

// APIURL is an option that takes an API base URL (see apiURL).
func APIURL() DSNOption {
	return DSNOption{Help: "an https URL without user-info, query or fragment", Check: apiURL}
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// dnsName accepts a lower-cased DNS name of at least two labels.
func dnsName(v string) (string, bool) {
	v = strings.ToLower(v)
	labels := strings.Split(v, ".")
	if len(v) > 253 || len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if !dnsLabel.MatchString(l) {
			return "", false
		}
	}
	return v, true
}

func seconds(v string) (string, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 3600 {
		return "", false
	}
	return strconv.Itoa(n), true
}

// apiURL accepts an https URL (http only to a loopback host, for a local
// Daytona) with no user-info, query or fragment, any of which could carry a
// key and none of which an API base URL needs.
func apiURL(v string) (string, bool) {
	u, err := url.Parse(v)
	if err != nil || u.Opaque != "" || u.User != nil || u.Host == "" || u.Hostname() == "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(v, "#") {
		return "", false
	}
	switch u.Scheme {
	case "https":
	case "http":
		if h := u.Hostname(); h != "localhost" && h != "127.0.0.1" && h != "::1" {
			return "", false
		}
	default:
		return "", false
	}
	return v, true
}

func (sc *dsnScheme) optionList() string {
	names := make([]string, 0, len(sc.Options))
	for k := range sc.Options {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		names[i] = k + " (" + sc.Options[k].Help + ")"
	}
	return strings.Join(names, ", ")
}

func (sc *dsnScheme) malformed(name, what, fix string) *model.Error {
	if !strings.Contains(fix, sc.Form) {
		fix += "; the form is " + sc.Form
	}
	return dsnErr(rules.DSNMalformed, fmt.Sprintf("the %s backend DSN %s", name, what), fix)
}

func dsnErr(rule, msg, fix string) *model.Error {
	return &model.Error{Class: model.ErrConfiguration, Rule: rule, Attribute: "backend", Message: msg, Fix: fix}
}

func dsnForms() string {
	t := tables()
	forms := make([]string, len(t.order))
	for i, name := range t.order {
		forms[i] = t.schemes[name].Form
	}
	return strings.Join(forms, ", ")
}

// String returns the normalized DSN: lower-case scheme, options sorted by
// name and percent-encoded. ParseDSN(d.String()) gives back d.
func (d DSN) String() string {
	var b strings.Builder
	b.WriteString(d.Scheme)
	b.WriteString("://")
	switch {
	case d.Context != "" || d.Namespace != "":
		b.WriteString(url.PathEscape(d.Context) + "/" + d.Namespace)
	case d.Team != "" || d.Project != "":
		b.WriteString(d.Team + "/" + d.Project)
	case d.App != "":
		b.WriteString(d.App)
	}
	keys := make([]string, 0, len(d.Options))
	for k := range d.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(d.Options[k]))
	}
	return b.String()
}

// Target returns what selects a backend's endpoint: SCHEME://[APP|TEAM/PROJECT]
// with only the options the registration names in EndpointOptions (E2B's
// domain, say). One backend is opened per target; the other options (Docker's
// runtime) are read per sandbox.
func (d DSN) Target() DSN {
	t := DSN{Scheme: d.Scheme, App: d.App, Team: d.Team, Project: d.Project, Context: d.Context, Namespace: d.Namespace, Options: map[string]string{}}
	if r, ok := Registered(d.Scheme); ok {
		for _, o := range r.EndpointOptions {
			if v, ok := d.Options[o]; ok {
				t.Options[o] = v
			}
		}
	}
	return t
}

// CapabilityKey returns the capability key for a sandbox on this backend.
// runtime is the template's runtime; when it is empty the DSN's runtime
// option applies, and then the backend's default runtime. A variant option
// the DSN sets (egress=gateway) is appended: docker/runc+gateway.
func (d DSN) CapabilityKey(runtime string) string {
	if runtime == "" {
		runtime = d.Options["runtime"]
	}
	key := CapabilityKey(d.Scheme, runtime)
	if r, ok := Registered(d.Scheme); ok {
		for _, o := range r.Variants {
			if v := d.Options[o]; v != "" {
				key += "+" + v
			}
		}
	}
	return key
}

// Runtime returns the runtime a sandbox on this backend runs with: the
// template's runtime, else the DSN's runtime option, else the backend's
// default. It is "" on a backend without runtimes, where a runtime means
// nothing (SBX-ISO-006 refuses setting one).
func (d DSN) Runtime(runtime string) string {
	r, ok := Registered(d.Scheme)
	if !ok || r.DefaultRuntime == "" {
		return ""
	}
	if runtime == "" {
		runtime = d.Options["runtime"]
	}
	if runtime == "" {
		runtime = r.DefaultRuntime
	}
	return runtime
}

// CredentialEnv lists the environment variables the backend reads its
// credentials (for Docker: the daemon address and TLS material) from.
func (d DSN) CredentialEnv() []string {
	sc := dsnSchemes()[d.Scheme]
	if sc == nil {
		return nil
	}
	return append([]string(nil), sc.Env...)
}
