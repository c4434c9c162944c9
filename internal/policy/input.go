package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/capabilities"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// InputVersion is the version of the input document. policies/README.md
// documents its shape; team policies and `sandboxio policy check` rely on it.
const InputVersion = 1

// Input kinds: which resource (or run-time object) the document describes.
const (
	KindTemplate      = "template"
	KindNetworkPolicy = "network_policy"
	KindResourceCaps  = "resource_caps"
	KindTenantSandbox = "tenant_sandbox"
	KindSpec          = "spec"
)

// Input is the normalized configuration evaluated by the policy bundle.
// Parts that do not apply to the kind are nil and absent from the document.
type Input struct {
	Kind      string
	Address   string
	Backend   *BackendRef
	Template  *TemplateInput
	Network   *model.NetworkPolicy
	Resources *model.Caps
	Tenant    *TenantInput
}

// BackendRef is the parsed backend DSN and the capability key it selects.
type BackendRef struct {
	DSN     string
	Scheme  string
	Runtime string
	Key     string
	Options map[string]string
}

// TemplateInput holds the template attributes other than network and caps.
type TemplateInput struct {
	Name             string
	Image            string
	Runtime          string
	RequireIsolation string
	TimeoutSeconds   int64
	LifetimeSeconds  int64
	Env              map[string]string
	SecretNames      []string
	// BrokeredSecrets are the template's brokered secrets, normalized
	// (model.NormalizeBrokered); the document holds {} when there are none.
	BrokeredSecrets map[string]model.BrokeredSecret
	Labels          map[string]string
	// Volume is the template's volume; nil (absent from the document)
	// when it names none.
	Volume *model.Volume
	// WarmPool is the template's warm pool; nil (absent) when it has none.
	WarmPool *model.WarmPool
}

// TenantInput identifies the tenant and session of a per-tenant sandbox.
type TenantInput struct {
	TenantID  string
	SessionID string
	Labels    map[string]string
}

// FromSpec builds the input document of a rendered spec, as the run-time
// helper evaluates it before provisioning.
func FromSpec(s model.Spec, backend *BackendRef) Input {
	net := s.Network.Normalized()
	caps := s.Resources
	in := Input{
		Kind:    KindSpec,
		Backend: backend,
		Template: &TemplateInput{
			Name:             s.Name,
			Image:            s.Image,
			Runtime:          s.Runtime,
			RequireIsolation: string(s.RequireIsolation),
			TimeoutSeconds:   s.TimeoutSeconds,
			LifetimeSeconds:  s.LifetimeSeconds,
			Env:              s.Env,
			SecretNames:      s.SecretNames,
			BrokeredSecrets:  model.NormalizeBrokered(s.BrokeredSecrets),
			Labels:           UserLabels(s),
			Volume:           s.Volume,
			WarmPool:         s.WarmPool,
		},
		Network:   &net,
		Resources: &caps,
	}
	if s.TenantID != "" || s.SessionID != "" {
		in.Tenant = &TenantInput{TenantID: s.TenantID, SessionID: s.SessionID}
	}
	return in
}

// UserLabels returns the labels of a spec that the label rules check: all
// of them, except the reserved tenant, session and template labels of a
// spec rendered for a tenant when they hold exactly what sandboxio set there
// (its tenant, session and template name), so that a rendered spec is not
// refused for carrying its own labels. A reserved label in a template spec,
// or one holding anything else, stays and is refused (SBX-LBL-001): it was
// written by hand, and rendering would overwrite it.
func UserLabels(s model.Spec) map[string]string {
	rendered := s.TenantID != "" || s.SessionID != ""
	out := make(map[string]string, len(s.Labels))
	for k, v := range s.Labels {
		if rendered {
			switch {
			case k == model.LabelTenantID && v == s.TenantID,
				k == model.LabelSessionID && v == s.SessionID,
				k == model.LabelTemplate && v == s.Name:
				continue
			}
		}
		out[k] = v
	}
	return out
}

// capabilityValues caches each descriptor's AST form: converting it on every
// evaluation would dominate the allocation budget.
var capabilityValues = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, key := range capabilities.Keys() {
		raw, _ := capabilities.LookupRaw(key)
		v, err := ast.InterfaceToValue(raw)
		if err != nil {
			panic("capabilities: " + err.Error())
		}
		m[key] = shared(v)
	}
	return m
}()

// shared prepares a value that every evaluation reads: OPA sorts an object's
// or a set's keys on first iteration, in place, so that is done here, once,
// before any two evaluations can see the value.
func shared(v ast.Value) *ast.Term {
	var presort func(v ast.Value)
	presort = func(v ast.Value) {
		switch x := v.(type) {
		case ast.Object:
			x.Foreach(func(_, v *ast.Term) { presort(v.Value) })
		case ast.Set:
			x.Foreach(func(t *ast.Term) { presort(t.Value) })
		case *ast.Array:
			x.Foreach(func(t *ast.Term) { presort(t.Value) })
		}
	}
	presort(v)
	return ast.NewTerm(v)
}

// Parts of the document that are the same in most evaluations, built once:
// the input is rebuilt for every evaluation, and objects are its costliest
// part. The values are never modified, so evaluations share them.
var (
	emptyObject = shared(ast.NewObject())
	emptyArray  = shared(ast.NewArray())

	// networkValues holds the network part of a policy with no allow list,
	// by egress mode.
	networkValues = func() map[string]*ast.Term {
		m := map[string]*ast.Term{}
		for _, egress := range []string{model.EgressDeny, model.EgressAllow, model.EgressLearn} {
			m[egress] = shared(networkTerm(model.NetworkPolicy{Egress: egress}).Value)
		}
		return m
	}()

	defaultCaps      = model.DefaultCaps()
	defaultCapsValue = shared(resourcesTerm(defaultCaps).Value)
)

// backendValues caches the backend part by its fields when the DSN has no
// options, which is the common case and the same for every template of one
// provider configuration. It holds at most maxBackendValues entries.
var (
	backendValues    sync.Map // backendKey -> *ast.Term
	backendValuesLen atomic.Int32
)

const maxBackendValues = 64

type backendKey struct{ dsn, scheme, runtime, key string }

func backendTerm(b *BackendRef) *ast.Term {
	if len(b.Options) > 0 {
		return newBackendTerm(b)
	}
	k := backendKey{b.DSN, b.Scheme, b.Runtime, b.Key}
	if t, ok := backendValues.Load(k); ok {
		return t.(*ast.Term)
	}
	t := newBackendTerm(b)
	if backendValuesLen.Load() < maxBackendValues {
		t = shared(t.Value)
		if _, loaded := backendValues.LoadOrStore(k, t); !loaded {
			backendValuesLen.Add(1)
		}
	}
	return t
}

func newBackendTerm(b *BackendRef) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(kDSN, ast.InternedTerm(b.DSN)),
		ast.Item(kScheme, ast.InternedTerm(b.Scheme)),
		ast.Item(kRuntime, ast.InternedTerm(b.Runtime)),
		ast.Item(kKey, ast.InternedTerm(b.Key)),
		ast.Item(kOptions, stringMap(b.Options)),
	)
}

func networkTerm(n model.NetworkPolicy) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(kEgress, ast.InternedTerm(n.Egress)),
		ast.Item(kAllow, stringList(n.Allow)),
	)
}

func resourcesTerm(c model.Caps) *ast.Term {
	return ast.ObjectTerm(
		ast.Item(kCPU, numberTerm(c.CPU)),
		ast.Item(kMemoryMB, intTerm(c.MemoryMB)),
		ast.Item(kDiskMB, intTerm(c.DiskMB)),
		ast.Item(kPids, intTerm(c.Pids)),
	)
}

func templateTerm(t *TemplateInput) *ast.Term {
	fields := [12][2]*ast.Term{
		ast.Item(kName, ast.StringTerm(t.Name)),
		ast.Item(kImage, ast.StringTerm(t.Image)),
		ast.Item(kRuntime, ast.InternedTerm(t.Runtime)),
		ast.Item(kRequireIsolation, ast.InternedTerm(t.RequireIsolation)),
		ast.Item(kTimeoutSeconds, intTerm(t.TimeoutSeconds)),
		ast.Item(kLifetimeSeconds, intTerm(t.LifetimeSeconds)),
		ast.Item(kEnv, stringMap(t.Env)),
		ast.Item(kSecretNames, stringList(t.SecretNames)),
		ast.Item(kBrokeredSecrets, brokeredTerm(t.BrokeredSecrets)),
		ast.Item(kLabels, stringMap(t.Labels)),
	}
	items := fields[:10]
	if v := t.Volume; v != nil {
		items = append(items, ast.Item(kVolume, ast.ObjectTerm(
			ast.Item(kName, ast.StringTerm(v.Name)),
			ast.Item(kMountPath, ast.StringTerm(v.MountPath)),
		)))
	}
	if p := t.WarmPool; p != nil {
		items = append(items, ast.Item(kWarmPool, ast.ObjectTerm(
			ast.Item(kSize, intTerm(p.Size)),
			ast.Item(kMaxIdleSeconds, intTerm(p.MaxIdleSeconds)),
		)))
	}
	return ast.ObjectTerm(items...)
}

// brokeredTerm renders the brokered secrets, {} when there are none.
func brokeredTerm(m map[string]model.BrokeredSecret) *ast.Term {
	if len(m) == 0 {
		return emptyObject
	}
	items := make([][2]*ast.Term, 0, len(m))
	for name, b := range m {
		items = append(items, ast.Item(ast.StringTerm(name), ast.ObjectTerm(
			ast.Item(kHosts, stringList(b.Hosts)),
			ast.Item(kHeader, ast.StringTerm(b.Header)),
			ast.Item(kFormat, ast.StringTerm(b.Format)),
		)))
	}
	return ast.ObjectTerm(items...)
}

// Validate refuses a document that cannot be represented as JSON: a CPU cap
// that is infinite or not a number. OPA has no such numbers (comparing one
// panics inside the evaluator), and no rule could decide on it, so it is a
// ConfigurationError naming the attribute rather than a document.
func (in Input) Validate() error {
	if c := in.Resources; c != nil && (math.IsInf(c.CPU, 0) || math.IsNaN(c.CPU)) {
		return &model.Error{
			Class: model.ErrConfiguration, Attribute: "resources.cpu",
			Message: fmt.Sprintf("resources.cpu is %v, not a finite number", c.CPU),
			Fix:     "set resources.cpu to a finite, positive number of vCPUs (for example 1 or 0.5)",
		}
	}
	return nil
}

// Value returns the document as an OPA value, built directly rather than
// through JSON so that evaluation stays cheap. Call Validate first: a
// non-finite CPU cap has no OPA value.
func (in Input) Value() ast.Value {
	items := make([][2]*ast.Term, 0, 9)
	items = append(items,
		ast.Item(kInputVersion, ast.InternedTerm(InputVersion)),
		ast.Item(kKind, ast.InternedTerm(in.Kind)),
		ast.Item(kAddress, ast.InternedTerm(in.Address)),
	)
	if b := in.Backend; b != nil {
		items = append(items, ast.Item(kBackend, backendTerm(b)))
		if caps, ok := capabilityValues[b.Key]; ok {
			items = append(items, ast.Item(kCapabilities, caps))
		}
	}
	if t := in.Template; t != nil {
		items = append(items, ast.Item(kTemplate, templateTerm(t)))
	}
	if n := in.Network; n != nil {
		t, ok := networkValues[n.Egress]
		if !ok || len(n.Allow) > 0 {
			t = networkTerm(*n)
		}
		items = append(items, ast.Item(kNetwork, t))
	}
	if c := in.Resources; c != nil {
		t := defaultCapsValue
		if *c != defaultCaps {
			t = resourcesTerm(*c)
		}
		items = append(items, ast.Item(kResources, t))
	}
	if t := in.Tenant; t != nil {
		items = append(items, ast.Item(kTenant, ast.ObjectTerm(
			ast.Item(kTenantID, ast.StringTerm(t.TenantID)),
			ast.Item(kSessionID, ast.StringTerm(t.SessionID)),
			ast.Item(kLabels, stringMap(t.Labels)),
		)))
	}
	return ast.NewObject(items...)
}

// Map returns the document as generic JSON, for display and for
// `sandboxio policy check --format json`.
func (in Input) Map() (map[string]any, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	v, err := ast.JSON(in.Value())
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// The document's keys, built once: most are not among the strings OPA
// interns, and the input is rebuilt for every evaluation.
var (
	kInputVersion     = ast.StringTerm("input_version")
	kKind             = ast.StringTerm("kind")
	kAddress          = ast.StringTerm("address")
	kBackend          = ast.StringTerm("backend")
	kDSN              = ast.StringTerm("dsn")
	kScheme           = ast.StringTerm("scheme")
	kRuntime          = ast.StringTerm("runtime")
	kKey              = ast.StringTerm("key")
	kOptions          = ast.StringTerm("options")
	kCapabilities     = ast.StringTerm("capabilities")
	kTemplate         = ast.StringTerm("template")
	kName             = ast.StringTerm("name")
	kImage            = ast.StringTerm("image")
	kRequireIsolation = ast.StringTerm("require_isolation")
	kTimeoutSeconds   = ast.StringTerm("timeout_seconds")
	kLifetimeSeconds  = ast.StringTerm("lifetime_seconds")
	kEnv              = ast.StringTerm("env")
	kSecretNames      = ast.StringTerm("secret_names")
	kBrokeredSecrets  = ast.StringTerm("brokered_secrets")
	kHosts            = ast.StringTerm("hosts")
	kHeader           = ast.StringTerm("header")
	kFormat           = ast.StringTerm("format")
	kLabels           = ast.StringTerm("labels")
	kNetwork          = ast.StringTerm("network")
	kEgress           = ast.StringTerm("egress")
	kAllow            = ast.StringTerm("allow")
	kResources        = ast.StringTerm("resources")
	kCPU              = ast.StringTerm("cpu")
	kMemoryMB         = ast.StringTerm("memory_mb")
	kDiskMB           = ast.StringTerm("disk_mb")
	kPids             = ast.StringTerm("pids")
	kTenant           = ast.StringTerm("tenant")
	kTenantID         = ast.StringTerm("tenant_id")
	kSessionID        = ast.StringTerm("session_id")
	kVolume           = ast.StringTerm("volume")
	kMountPath        = ast.StringTerm("mount_path")
	kWarmPool         = ast.StringTerm("warm_pool")
	kSize             = ast.StringTerm("size")
	kMaxIdleSeconds   = ast.StringTerm("max_idle_seconds")
)

func init() {
	// Interning the enumerated values spares an allocation per value per
	// evaluation. OPA's intern table is written only here, during init.
	// The schemes, runtimes and capability keys come from the capability
	// data (SCHEME or SCHEME/RUNTIME), the source the registry reads too.
	ast.InternStringTerm(KindTemplate, KindNetworkPolicy, KindResourceCaps, KindTenantSandbox, KindSpec,
		model.EgressDeny, model.EgressAllow, model.EgressLearn,
		string(model.TierUnknown), string(model.TierContainer), string(model.TierGVisor), string(model.TierMicroVM))
	ast.InternStringTerm(capabilityStrings()...)
}

// capabilityStrings lists each capability key, its scheme, its runtime and
// the scheme's bare DSN.
func capabilityStrings() []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, key := range capabilities.Keys() {
		scheme, runtime, _ := strings.Cut(key, "/")
		add(key)
		add(scheme)
		add(runtime)
		add(scheme + "://")
	}
	return out
}

func intTerm(i int64) *ast.Term { return ast.InternedTerm(i) }

// numberTerm renders a cap as JSON would; a whole number takes the interned
// form, which is the same value.
func numberTerm(f float64) *ast.Term {
	if i := int64(f); float64(i) == f && i >= -1<<53 && i <= 1<<53 && !math.Signbit(f) {
		return intTerm(i)
	}
	return ast.NumberTerm(json.Number(strconv.FormatFloat(f, 'g', -1, 64)))
}

func stringList(xs []string) *ast.Term {
	if len(xs) == 0 {
		return emptyArray
	}
	terms := make([]*ast.Term, len(xs))
	for i, x := range xs {
		terms[i] = ast.StringTerm(x)
	}
	return ast.ArrayTerm(terms...)
}

// stringMap converts a map; OPA objects keep their keys ordered
// themselves, so the iteration order does not matter.
func stringMap(m map[string]string) *ast.Term {
	if len(m) == 0 {
		return emptyObject
	}
	var buf [8][2]*ast.Term // small maps, the usual ones, need no slice on the heap
	items := buf[:0]
	for k, v := range m {
		items = append(items, ast.Item(ast.StringTerm(k), ast.StringTerm(v)))
	}
	return ast.ObjectTerm(items...)
}
