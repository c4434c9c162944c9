package rules

import "github.com/sandboxio/terraform-provider-sandboxio/policies"

// Doc is the text of a rule, for error messages and the rule catalogue
// (docs/guides/policies.md). The Go-side rules' is in Docs; the Rego rules carry
// theirs in METADATA.
type Doc struct {
	ID          string
	Title       string // what is refused or reported
	Description string // why
	Fix         string // how to fix
	Class       string // error or warning class
	Attribute   string
}

// Docs are the Go-side rules: the refusals made in Go before an input
// document exists (the DSN and spec parsers, policy and waiver loading), the
// run-time helper's refusals of what its caller passes beside the spec
// (SBX-RUN-*), the egress gateway's refusals at run time (SBX-EGW-*), and
// the check's own reports of what a plan cannot show.
var Docs = []Doc{
	{ID: DSNUnknown, Title: "no backend, not a DSN, or an unknown scheme", Class: "ConfigurationError", Attribute: "backend",
		Description: "A template needs a backend to be checked against; a DSN the parser does not recognise names no backend whose capabilities are known.",
		Fix:         policies.Expand("Set backend (or the provider's default_backend) to ${dsns|or}.")},
	{ID: DSNMalformed, Title: "a DSN malformed for its scheme", Class: "ConfigurationError", Attribute: "backend",
		Description: policies.Expand("Each scheme has one form (${dsns}); anything else is ambiguous."),
		Fix:         "Write the DSN in its scheme's form; the message names it."},
	{ID: DSNCredential, Title: "a credential in a DSN", Class: "ConfigurationError", Attribute: "backend",
		Description: "DSNs end up in state, plans, logs and specs; a credential there would leak. Credentials come from environment variables only.",
		Fix:         "Remove the credential from the DSN and set the backend's environment variable (data.sandboxio_backend lists them)."},
	{ID: DSNOption, Title: "an unknown DSN query option", Class: "ConfigurationError", Attribute: "backend",
		Description: "An option the backend does not know would be ignored silently.",
		Fix:         "Use one of the options the message lists, or remove it."},
	{ID: SpecInvalid, Title: "not a sandboxio spec", Class: "ConfigurationError", Attribute: "template_spec",
		Description: "A spec is rendered by sandboxio_template; unknown fields or trailing data mean it was edited or is something else.",
		Fix:         "Pass sandboxio_template.NAME.spec (or the tenant sandbox's spec) unchanged."},
	{ID: SpecVersion, Title: "an unsupported spec version", Class: "ConfigurationError", Attribute: "spec_version",
		Description: "A spec of another version may mean something this build would misread.",
		Fix:         "Render the spec with a provider of the same version as the helper."},
	{ID: SpecDigest, Title: "a spec that does not match its sha256", Class: "ConfigurationError", Attribute: "spec_sha256",
		Description: "The run-time helper hashes the canonical form of the spec it is given; a spec edited after Terraform rendered it, or the digest of another spec, would provision something no plan checked.",
		Fix:         "Pass the spec and spec_sha256 of the same data.sandboxio_tenant_sandbox (or sandboxio_template) unchanged."},
	{ID: SpecTenant, Title: "a spec rendered for another tenant or session", Class: "ConfigurationError", Attribute: "tenant_id",
		Description: "A per-tenant spec is bound to its tenant and session, in its ids and its reserved labels; opening it for anyone else, or with edited reserved labels, would hand one tenant's sandbox to another or hide it from reaping.",
		Fix:         "Open each tenant's sandbox from the spec rendered for that tenant and session, or from the template spec, which the helper renders for the tenant."},
	{ID: SpecTierLies, Title: "a spec whose isolation tier its backend does not give", Class: "ConfigurationError", Attribute: "isolation_tier",
		Description: "A spec's isolation tier is a statement about its backend and runtime, never taken on the spec's word. data.sandboxio_tenant_sandbox at plan, and the run-time helper before it asks the backend, compare it with the tier the capability data gives that backend (a spec that leaves it out gets that tier); the helper then asks the live backend which tier a sandbox would get. A spec claiming another tier was edited or written wrongly, or the backend (a Docker runtime, say) was reconfigured since the spec was rendered. It is refused rather than corrected: a spec that says MICROVM on a CONTAINER backend must not run as CONTAINER without anyone being told.",
		Fix:         "Pass the template's spec (sandboxio_template.NAME.spec) or render it again (terraform apply) against this backend; in a spec written by hand, set isolation_tier to the backend's tier or leave it out; to get a higher tier, change the backend or runtime and set require_isolation. Check the runtime registered on the daemon."},
	{ID: SecretValues, Title: "secret values that do not match the spec's secret_names", Class: "ConfigurationError", Attribute: "secret_names",
		Description: "The run-time helper injects exactly the secrets the template declares. A declared secret with no value would run the code without a credential it was written to need; a value for a name the spec does not declare would never reach the sandbox, which is a mistake worth saying.",
		Fix:         "Supply a value for every name in secret_names, and only those: the CLI reads each from its own environment (export NAME=...), the Go API takes them in Request.Secrets."},
	{ID: ShortSecret, Title: "a secret value too short to redact", Class: "ConfigurationError", Attribute: "secret_names",
		Description: "Secret values are replaced with [REDACTED] wherever they occur in output, errors and audit records. A value of fewer than 8 characters occurs by chance in ordinary text: redacting it would garble that text and reveal the value by where [REDACTED] appears. An empty value is almost always a variable exported by mistake. The message names the secret, never its value.",
		Fix:         "Use the real credential (API keys and tokens are far longer than 8 characters); if a short value was a placeholder, remove the name from secret_names or supply the real value."},
	{ID: CallTimeout, Title: "a call timeout above the spec's timeout_seconds", Class: "ConfigurationError", Attribute: "timeout",
		Description: "timeout_seconds bounds every create, run and run_code call of the template's sandboxes. A longer timeout passed at run time (the CLI's --timeout, Request.Timeout, RunOptions.Timeout) would let a call outlast what the plan checked.",
		Fix:         "Pass a timeout of at most timeout_seconds (or none, to inherit it), or raise timeout_seconds in the template and apply."},
	{ID: ExtraLabels, Title: "extra labels on a spec already rendered for a tenant", Class: "ConfigurationError", Attribute: "labels",
		Description: "A per-tenant spec's labels were fixed when data.sandboxio_tenant_sandbox rendered it, and its sha256 covers them; labels added at run time would change a spec that was already checked.",
		Fix:         "Set extra_labels on data.sandboxio_tenant_sandbox, or pass the template spec, which the helper renders for the tenant with the extra labels."},
	{ID: OneSandbox, Title: "a second sandbox for a tenant and session", Class: "ConfigurationError", Attribute: "session_id",
		Description: "A tenant's session has one sandbox at a time, so that what one call leaves in it is what the next call of that session finds, and no session's sandboxes pile up. The run-time helper refuses a second open for a tenant and session while one is open or opening, in the same client and across processes and hosts that share a backend: on Docker the container's name is derived from the tenant and session (hashed), and the daemon refuses a second container of that name. A container that holds the name but is no sandbox any more (its lifetime ended, it exited, or its owner is verifiably gone: same boot and PID namespace as the process that looks, and no such process any more) is removed and the open goes ahead; an owner that cannot be judged from here (another PID namespace, such as a container, or another machine) counts as alive, and the refusal names it.",
		Fix:         "Use the open sandbox, or close it first, or open the new sandbox under another session id. If the process that opened it was killed, its watcher removes it within seconds, and `sandboxio reap` run on the same host and in the same PID namespace as that process removes it once the process is gone; otherwise its lifetime ends it."},
	{ID: GatewayNotListed, Title: "a destination the egress gateway's allow list does not hold", Class: "EgressDenied", Attribute: "network.allow",
		Description: "The Docker egress gateway forwards a connection only to a listed block (and its port, where the entry names one) or, on 443 and 80, to a listed name that the TLS server name or the HTTP Host asks for. Anything else is refused at run time and recorded in blocked_egress with its destination; a plain-HTTP request gets a 403 naming this rule, a TLS connection is reset.",
		Fix:         "If the destination is needed, add it to network.allow (`sandboxio egress report` prints the list a learning run saw, ready to paste) and apply; otherwise the code in the sandbox must do without it."},
	{ID: GatewayNever, Title: "a listed name that resolves only to never-reachable addresses", Class: "EgressDenied", Attribute: "network.allow",
		Description: "Loopback, link-local and metadata addresses, the host's own addresses and the Docker networks' gateways are never reached through the gateway, whatever the list says. A listed name whose resolution holds only such addresses (a DNS rebinding, or a name pointed at the host) is refused at run time, as its entry would be at plan if it were an address.",
		Fix:         "Point the name at an address a sandbox may reach, or remove it from network.allow."},
	{ID: GatewayNoAddress, Title: "a listed name that does not resolve", Class: "EgressDenied", Attribute: "network.allow",
		Description: "The gateway resolves a listed name itself, through its own resolver, and connects only to that resolution; a name it cannot resolve is refused rather than sent to the address the sandbox chose.",
		Fix:         "Check the name, and the resolver the gateway uses (the DSN's resolver option, or the host's)."},
	{ID: GatewayMalformed, Title: "a request that names no single host", Class: "EgressDenied", Attribute: "network.allow",
		Description: "On 443 the gateway reads the TLS ClientHello's server name, on 80 the HTTP request's Host. A ClientHello without exactly one host name, an HTTP head without a single valid Host, or one that did not arrive in time names nothing the list could allow, and is refused.",
		Fix:         "Send a server name (SNI) or Host header naming a listed host; clients that connect by address need the address listed as a block instead."},
	{ID: GatewayNotProven, Title: "the egress gateway is not proven on this daemon", Class: "CapabilityNotSupported", Attribute: "network.allow",
		Description: "Before a gateway template is accepted on a Docker daemon (at apply, and before the first open in a process), probe sandboxes show on that daemon that an allowed destination is reached and an unlisted one is not, that an unlisted name does not resolve, that a spoofed server name fails, and that the host, loopback and the bridges are unreachable. The verdict is cached per daemon for ten minutes (a failure for one). A failed probe refuses the template, naming the probe, since an allow list there would not be known to hold.",
		Fix:         "Run the sandbox as root on a Linux daemon host with /dev/net/tun and the runc runtime, or remove network.allow and keep egress denied."},
	{ID: PolicyLoad, Title: "team policies cannot be loaded", Class: "ConfigurationError", Attribute: "policy_paths",
		Description: "A team policy that does not parse or compile, sits in the reserved sandboxio or capabilities namespace, claims a reserved SBX- rule ID, declares an unknown enforcement level, or writes deny or warn as anything but a partial set rule (`deny contains msg if { ... }`) is refused as a whole, so that no bundle is half-loaded. A complete rule (`deny := ...`), a function or a default could be undefined, and an undefined decision must never read as no findings.",
		Fix:         "Fix the policy the message names; run `sandboxio policy test` on its directory."},
	{ID: WaiversLoad, Title: "the waiver file cannot be read", Class: "ConfigurationError", Attribute: "policy_waivers",
		Description: "A waiver file that does not parse, or a waiver without rule, address, reason or expiry, would otherwise be a silent exception.",
		Fix:         "Pass a waiver file that exists (YAML or JSON), and fix the waiver the message names (file and line); the format is under Team policies in docs/guides/policies.md."},
	{ID: PolicyEval, Title: "the policy evaluation failed", Class: "ConfigurationError", Attribute: "policy_paths",
		Description: "An evaluation that errs (a team rule with conflicting values, a built-in function that fails on its arguments) or returns no result or a result of the wrong shape has decided nothing. It refuses the configuration rather than reading the silence as no findings. The built-in rules are evaluated apart from the team's, so a team package can add refusals but never remove one.",
		Fix:         "Fix the team rule the message names (run `opa eval` on it with the same input), or remove it from policy_paths."},
	{ID: PolicyTimedOut, Title: "the policy evaluation ran out of its time budget", Class: "ConfigurationError", Attribute: "policy_paths",
		Description: "Each evaluation has a time budget (5 s; the bundle itself needs well under a millisecond). A team rule that iterates over huge collections or waits on something is stopped when the budget is spent, and the configuration is refused, never passed.",
		Fix:         "Make the team rule cheaper (`opa eval --profile` shows where the time goes), or remove it from policy_paths."},
	{ID: CheckedAtApply, Title: "checked at apply: values unknown in the plan", Class: "CheckedAtApply", Attribute: "",
		Description: "Terraform knows some values of the resource only at apply. The provider checks the resource again then, before anything is stored; the plan alone cannot be passed as clean for it.",
		Fix:         "Nothing to fix if the values come from other resources; apply runs the same rules. To check in CI, make the values known at plan (constants or variables). --fail-on-deferred makes `sandboxio policy check` fail (exit 3) on it."},
	{ID: NotChecked, Title: "not checked: a sandboxio resource the check does not decide on", Class: "NotChecked", Attribute: "",
		Description: "The plan holds a sandboxio resource that the check reports without deciding on: it is being deleted, Terraform deferred it to a later plan, it is left out of a -target plan, or its type is one this build has no rules for (data.sandboxio_backend, a newer provider's type, a type written in another case). It is listed so that nothing in the plan passes unseen.",
		Fix:         "Nothing, for a deletion or data.sandboxio_backend. For a deferred or untargeted resource, check the plan that includes it; for an unknown type, use the CLI of the provider's version."},
}

// Lookup returns the Go-side rule of an ID.
func Lookup(id string) (Doc, bool) {
	for _, d := range Docs {
		if d.ID == id {
			return d, true
		}
	}
	return Doc{}, false
}
