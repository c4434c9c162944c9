# METADATA
# title: isolation
# description: >-
#   Isolation tiers rank escape resistance only: UNKNOWN < CONTAINER < GVISOR
#   < MICROVM (ranks in capabilities/data.json). require_isolation is checked
#   before anything is provisioned. UNKNOWN satisfies no requirement and is
#   not a valid requirement. CONTAINER suits trusted, development and CI
#   code; gVisor is defence in depth, not the equal of a VM; MICROVM is the
#   recommended floor for untrusted multi-tenant code.
package sandboxio.isolation

import data.sandboxio.lib

# requirement is the template's require_isolation, "" when not set.
default requirement := ""

requirement := r if {
	r := input.template.require_isolation
	r != null
}

# backend_tier is the tier the backend gives, "" when it has no description.
default backend_tier := ""

backend_tier := input.capabilities.tier

# METADATA
# title: UNKNOWN is not a requirement
# description: >-
#   UNKNOWN means the isolation of a backend has not been verified. It
#   satisfies no requirement, so requiring it is a mistake.
# custom:
#   id: SBX-ISO-001
#   class: ConfigurationError
#   attribute: require_isolation
#   fix: >-
#     Require CONTAINER, GVISOR or MICROVM (MICROVM is the recommended floor
#     for untrusted multi-tenant code), or leave require_isolation unset.
deny contains f if {
	requirement == "UNKNOWN"
	f := lib.finding(rego.metadata.rule(), `require_isolation = "UNKNOWN" is not a requirement: an unverified tier satisfies nothing, so it cannot be required`)
}

# METADATA
# title: require_isolation is not a tier
# description: require_isolation must name an isolation tier.
# custom:
#   id: SBX-ISO-002
#   class: ConfigurationError
#   attribute: require_isolation
#   fix: >-
#     Use one of CONTAINER, GVISOR or MICROVM, in upper case, or leave
#     require_isolation unset.
deny contains f if {
	requirement != ""
	not data.capabilities.tiers[requirement]
	f := lib.finding(rego.metadata.rule(), sprintf("require_isolation %s is not an isolation tier%s", [describe_name(requirement), case_hint(requirement)]))
}

describe_name(s) := sprintf("%q", [s]) if {
	is_string(s)
	count(s) <= 32
}

describe_name(s) := "(a long string)" if {
	is_string(s)
	count(s) > 32
}

describe_name(s) := sprintf("(a %s)", [type_name(s)]) if not is_string(s)

case_hint(s) := sprintf(" (tier names are upper case: %s)", [upper(s)]) if {
	is_string(s)
	lib.known_tier(upper(s))
}

default case_hint(_) := ""

# METADATA
# title: the backend does not give the required isolation tier
# description: >-
#   The backend's tier must rank at least as high as require_isolation. A
#   backend whose tier is UNKNOWN, or that has no capability description at
#   all, satisfies no requirement.
# custom:
#   id: SBX-ISO-003
#   class: ConfigurationError
#   attribute: require_isolation
#   fix: >-
#     Use a backend, or a Docker runtime, that gives the required tier:
#     runsc for GVISOR; E2B, Vercel or the kata runtime for MICROVM.
deny contains f if {
	want := requirement
	lib.known_tier(want)
	have := backend_tier
	not lib.satisfies(have, want)
	f := lib.finding_fix(
		rego.metadata.rule(),
		sprintf("require_isolation = %q is not met: %s", [want, tier_shortfall(have)]),
		sprintf(
			"use a backend or Docker runtime that gives %s or higher: %s. Lower require_isolation only for trusted code; MICROVM is the recommended floor for untrusted multi-tenant code",
			[want, lib.join_and(lib.backends_at_least(want))],
		),
	)
}

tier_shortfall(have) := sprintf("backend %s has no capability description, so its isolation tier is unknown and satisfies no requirement", [lib.backend_key]) if {
	have == ""
}

tier_shortfall(have) := sprintf("the isolation tier of backend %s is UNKNOWN (not verified), and an unverified tier satisfies no requirement", [lib.backend_key]) if {
	have == "UNKNOWN"
}

tier_shortfall(have) := sprintf("backend %s gives tier %s", [lib.backend_key, have]) if {
	lib.known_tier(have)
}

tier_shortfall(have) := sprintf("backend %s reports tier %s, which is not a tier", [lib.backend_key, describe_name(have)]) if {
	have != ""
	have != "UNKNOWN"
	not lib.known_tier(have)
}

# METADATA
# title: sandbox on a backend whose isolation is not verified
# description: >-
#   Creating a sandbox on a backend of UNKNOWN tier without stating a
#   requirement is allowed, but reported: the code may be less isolated than
#   the reader assumes.
# custom:
#   id: SBX-ISO-004
#   class: UnverifiedIsolationWarning
#   attribute: require_isolation
#   fix: >-
#     Set require_isolation to the tier the code needs on a backend that
#     verifiably gives it (MICROVM for untrusted multi-tenant code), or keep
#     this backend for trusted code only.
warn contains f if {
	input.template
	requirement == ""
	caps := input.capabilities
	not lib.known_tier(caps.tier)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"the isolation tier of backend %s is not verified (UNKNOWN): code in this sandbox may be less isolated than assumed",
		[lib.backend_key],
	))
}

# METADATA
# title: unknown Docker runtime
# description: >-
#   sandboxio only knows what the Docker runtimes in its capability data
#   isolate and enforce. Any other runtime has an unknown tier and unknown
#   network and cap behaviour, so it is refused.
# custom:
#   id: SBX-ISO-005
#   class: ConfigurationError
#   attribute: runtime
#   fix: Set runtime to runc (CONTAINER), runsc (GVISOR) or kata (MICROVM).
deny contains f if {
	input.template
	input.backend.scheme == "docker"
	not input.capabilities
	f := lib.finding_fix(
		rego.metadata.rule(),
		sprintf(
			"Docker runtime %s has no capability description: sandboxio cannot tell what it isolates or whether it enforces the network policy and caps",
			[describe_name(object.get(input.backend, "runtime", ""))],
		),
		sprintf("set runtime to %s", [lib.join_and(docker_runtimes)]),
	)
}

docker_runtimes := [sprintf("%s (%s)", [d.runtime, d.tier]) |
	some key, d in data.capabilities.backends
	d.backend == "docker"
]

# METADATA
# title: runtime on a backend other than Docker
# description: >-
#   runtime selects a Docker runtime (runc, runsc, kata). Other backends
#   choose their own isolation, so a runtime there would be ignored.
# custom:
#   id: SBX-ISO-006
#   class: ConfigurationError
#   attribute: runtime
#   fix: >-
#     Remove runtime, or move the template to the docker backend; use
#     require_isolation to state the tier you need.
deny contains f if {
	runtime := input.template.runtime
	is_string(runtime)
	runtime != ""
	scheme := input.backend.scheme
	scheme != "docker"
	f := lib.finding(rego.metadata.rule(), sprintf(
		"runtime %s is set, but runtime only applies to the docker backend and backend %s would ignore it",
		[describe_name(runtime), describe_name(scheme)],
	))
}

# METADATA
# title: backend without a capability description
# description: >-
#   sandboxio only creates sandboxes on backends whose enforcement it knows:
#   isolation tier, egress control and caps. A backend scheme missing from
#   the capability data cannot be trusted to enforce any of them.
# custom:
#   id: SBX-ISO-007
#   class: ConfigurationError
#   attribute: backend
#   fix: Use one of the docker, e2b, modal, vercel or daytona backends.
deny contains f if {
	input.template
	scheme := input.backend.scheme
	scheme != "docker"
	not input.capabilities
	f := lib.finding_fix(
		rego.metadata.rule(),
		sprintf(
			"backend %s has no capability description: sandboxio cannot tell what it isolates or whether it enforces the network policy and caps",
			[describe_name(scheme)],
		),
		sprintf("use one of the %s backends", [lib.join_and(schemes)]),
	)
}

schemes := sort({d.backend | some d in data.capabilities.backends})

# METADATA
# title: runtime disagrees with the backend's runtime
# description: >-
#   The template's runtime and the runtime in the backend settings differ.
#   The isolation check would be made for one runtime while the sandbox
#   might start on the other, so the conflict is refused.
# custom:
#   id: SBX-ISO-008
#   class: ConfigurationError
#   attribute: runtime
#   fix: >-
#     Set the runtime in one place only (the template's runtime attribute),
#     or make both the same.
deny contains f if {
	input.backend.scheme == "docker"
	wanted := input.template.runtime
	is_string(wanted)
	wanted != ""
	configured := input.backend.runtime
	is_string(configured)
	configured != ""
	wanted != configured
	f := lib.finding(rego.metadata.rule(), sprintf(
		"runtime %s differs from the backend's runtime %s: the isolation tier would be checked for one and the sandbox could start on the other",
		[describe_name(wanted), describe_name(configured)],
	))
}
