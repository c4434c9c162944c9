// Package rules declares, once, every rule ID that Go code names. IDs are
// stable: never reuse one. The Rego rules (SBX-NET, -RES, -TMO, -ISO, -LBL,
// -SEC, -VOL, -WRM) take their text from the bundle's METADATA; the Go-side
// rules (SBX-DSN, -SPC, -RUN, -EGW, -POL, -CHK) are refusals made before an
// input document exists or at run time, with their text in Go (Docs). No other Go file writes an
// SBX- ID literally: TestIDsDeclaredOnce in internal/policycheck checks that.
package rules

// Go-side rules: the DSN parser.
const (
	DSNUnknown    = "SBX-DSN-001" // empty, not a DSN, or an unknown scheme
	DSNMalformed  = "SBX-DSN-002" // malformed for its scheme
	DSNCredential = "SBX-DSN-003" // a credential in the DSN
	DSNOption     = "SBX-DSN-004" // an unknown query option
)

// Go-side rules: the spec parser and the checks of a spec against its
// digest, tenant and backend.
const (
	SpecInvalid  = "SBX-SPC-001" // not a sandboxio spec
	SpecVersion  = "SBX-SPC-002" // an unsupported spec version
	SpecDigest   = "SBX-SPC-003" // a spec that does not match its sha256
	SpecTenant   = "SBX-SPC-004" // a spec rendered for another tenant or session
	SpecTierLies = "SBX-SPC-005" // an isolation tier the spec's backend does not give
)

// Go-side rules: the run-time helper's refusals of what its caller passes
// beside the spec.
const (
	SecretValues = "SBX-RUN-001" // a declared secret without a value, or a value for an undeclared name
	ShortSecret  = "SBX-RUN-002" // a secret value shorter than the redaction minimum
	CallTimeout  = "SBX-RUN-003" // a call timeout above the spec's timeout_seconds
	ExtraLabels  = "SBX-RUN-004" // extra labels on a spec already rendered for a tenant
	OneSandbox   = "SBX-RUN-005" // a second sandbox for a tenant and session
)

// Go-side rules: the Docker egress gateway's refusals at run time (the 403
// a denied plain-HTTP request gets names them) and its proof on a daemon.
const (
	GatewayNotListed = "SBX-EGW-001" // a destination the allow list does not hold
	GatewayNever     = "SBX-EGW-002" // a listed name that resolves only to never-reachable addresses
	GatewayNoAddress = "SBX-EGW-003" // a listed name that does not resolve
	GatewayMalformed = "SBX-EGW-004" // a request that names no single host
	GatewayNotProven = "SBX-EGW-005" // the gateway's proof failed on this daemon
)

// Go-side rules: loading and evaluating the policies and waivers.
const (
	PolicyLoad     = "SBX-POL-001" // team policies cannot be loaded
	WaiversLoad    = "SBX-POL-002" // the waiver file cannot be read
	PolicyEval     = "SBX-POL-003" // the evaluation failed or decided nothing
	PolicyTimedOut = "SBX-POL-004" // the evaluation ran out of its time budget
)

// Go-side reports of `sandboxio policy check` (and the provider's plan
// warning): what a plan cannot decide.
const (
	// CheckedAtApply reports a resource whose values Terraform only knows
	// at apply: it is not silently passed.
	CheckedAtApply = "SBX-CHK-001"
	// NotChecked reports a sandboxio resource the check did not decide on
	// (deleted, deferred by Terraform to a later plan, of a type it has no
	// rules for), so that nothing is passed unseen.
	NotChecked = "SBX-CHK-002"
)

// Rego rules that Go names. Their text is the bundle's METADATA.
const (
	NetLearn           = "SBX-NET-001" // egress learning mode
	NetEgressMode      = "SBX-NET-002" // unknown egress mode
	NetAllowList       = "SBX-NET-003" // an allow list the backend cannot enforce
	NetAllowWithOpen   = "SBX-NET-004" // an allow list with open egress
	NetAllowKind       = "SBX-NET-005" // an allow-list entry of a kind the backend does not take
	NetOpenEgress      = "SBX-NET-007" // open egress (warning)
	NetOpenUnsupported = "SBX-NET-010" // open egress on a backend that cannot give it
	NetNever           = "SBX-NET-014" // an allow-list entry no sandbox may reach

	ResCap         = "SBX-RES-001" // a cap unset, zero, negative or out of range
	ResTemplateCap = "SBX-RES-002" // a cap set per sandbox on a backend whose template fixes it
	ResNotSettable = "SBX-RES-004" // a cap the backend cannot set per sandbox
	ResPidsCeiling = "SBX-RES-005" // pids above the backend's ceiling
	ResVCPUSteps   = "SBX-RES-007" // caps a backend takes only as whole vCPUs with fixed memory each
	ResUnit        = "SBX-RES-008" // a cap finer than the unit the backend takes

	TmoCall     = "SBX-TMO-001" // a call timeout unset, zero, negative or above the ceiling
	TmoLifetime = "SBX-TMO-002" // a lifetime unset, zero, negative or above the ceiling
	TmoAboveMax = "SBX-TMO-003" // a lifetime above the backend's maximum

	IsoUnknown          = "SBX-ISO-001" // UNKNOWN required
	IsoNotATier         = "SBX-ISO-002" // require_isolation is not a tier
	IsoBelow            = "SBX-ISO-003" // the backend does not give the required tier
	IsoNoCapsData       = "SBX-ISO-005" // a backend or runtime without a capability description
	IsoRuntimeElsewhere = "SBX-ISO-006" // a runtime on a backend other than Docker

	LblReserved  = "SBX-LBL-001" // a label under the reserved prefix
	LblMalformed = "SBX-LBL-002" // a malformed label key
	LblTooMany   = "SBX-LBL-004" // more labels than the backend keeps

	SecName         = "SBX-SEC-001" // a secret name that is not a variable name
	SecEnvAndSecret = "SBX-SEC-003" // a variable both in env and in secret_names
	SecNoBroker     = "SBX-SEC-005" // brokered secrets where no broker runs
	SecBrokerPool   = "SBX-SEC-012" // brokered secrets in a template with a warm pool

	VolUnscoped = "SBX-VOL-001" // a volume on a backend that cannot scope it per tenant

	PoolUnsupported = "SBX-WRM-001" // a warm pool on a backend that cannot keep one
	PoolSize        = "SBX-WRM-002" // a warm pool's size out of range
	PoolIdle        = "SBX-WRM-003" // a warm pool's idle time out of range
)

// Rego rules of the pre-execution hook (package sandboxio.exec). Their text
// is the bundle's METADATA; Go names them in tests, the CLI's help and the
// benchmarks.
const (
	ExecDownloadPipe  = "SBX-EXE-001" // a download piped into a shell
	ExecRemoveRoot    = "SBX-EXE-002" // rm -rf /
	ExecInstallDenied = "SBX-EXE-003" // installing packages with egress denied
	ExecBanditHigh    = "SBX-EXE-004" // a high-severity bandit finding (or bandit did not run)
	ExecShellCheck    = "SBX-EXE-005" // shellcheck errors (or shellcheck did not run)
)
