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

# Rules are written for OPA's rule index (see "Writing rules" in README.md).
# require_isolation is "" when not set; null is read the same way.

# backend_tier is the tier the backend gives, "" when it has no description.
backend_tier := object.get(input, ["capabilities", "tier"], "")

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
	input.template.require_isolation == "UNKNOWN"
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
	want := input.template.require_isolation

	# a tier is a key of the ranks: one lookup lets every tier through
	not data.capabilities.tiers[want]
	not want in {"", null}

	# a backend's own tier is never reported here, even one that is not
	# ranked (SBX-ISO-003 reports that)
	want != object.get(input, ["capabilities", "tier"], "")
	f := lib.finding(rego.metadata.rule(), msg_not_a_tier(want))
}

msg_not_a_tier(r) := sprintf("require_isolation %s is not an isolation tier%s", [lib.quote(r), case_hint(r)])

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
#     ${tier_GVISOR|or} for GVISOR; ${tier_MICROVM|or} for MICROVM.
deny contains f if {
	want := input.template.require_isolation
	have := object.get(input, ["capabilities", "tier"], "")

	# a backend meets a requirement for its own tier without reading ranks
	want != have
	not want in {"", null, "UNKNOWN"}

	# one read of the ranks
	tiers := data.capabilities.tiers
	rank := tiers[want]

	# UNKNOWN ranks 0 and every valid requirement ranks above it, so an
	# UNKNOWN backend fails here; a backend with no description, or with a
	# tier that is not ranked, reads as -1 and fails too.
	not object.get(tiers, have, -1) >= rank
	f := lib.finding_fix(rego.metadata.rule(), msg_tier_not_met(want), fix_tier_not_met(want))
}

msg_tier_not_met(want) := sprintf("require_isolation = %q is not met: %s", [want, tier_shortfall(backend_tier)])

fix_tier_not_met(want) := sprintf(
	"use a backend or Docker runtime that gives %s or higher: %s. Lower require_isolation only for trusted code; MICROVM is the recommended floor for untrusted multi-tenant code",
	[want, lib.join_and(lib.backends_at_least(want))],
)

tier_shortfall(have) := sprintf("backend %s has no capability description, so its isolation tier is unknown and satisfies no requirement", [lib.backend_key]) if {
	have == ""
}

tier_shortfall(have) := sprintf("the isolation tier of backend %s is UNKNOWN (not verified), and an unverified tier satisfies no requirement", [lib.backend_key]) if {
	have == "UNKNOWN"
}

tier_shortfall(have) := sprintf("backend %s gives tier %s", [lib.backend_key, have]) if {
	lib.known_tier(have)
}

tier_shortfall(have) := sprintf("backend %s reports tier %s, which is not a tier", [lib.backend_key, lib.quote(have)]) if {
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
	input.capabilities.tier == "UNKNOWN"
	input.template.require_isolation == ""
	f := lib.finding(rego.metadata.rule(), msg_unverified)
}

msg_unverified := sprintf(
	"the isolation tier of backend %s is not verified (UNKNOWN): code in this sandbox may be less isolated than assumed",
	[lib.backend_key],
)

# METADATA
# title: backend or Docker runtime without a capability description
# description: >-
#   sandboxio only creates sandboxes where it knows what is enforced:
#   isolation tier, egress control and caps. A Docker runtime or a backend
#   scheme missing from the capability data could enforce none of them, so
#   it is refused. The finding names runtime for Docker and backend for any
#   other scheme.
# custom:
#   id: SBX-ISO-005
#   class: ConfigurationError
#   attribute: runtime
#   fix: >-
#     Set runtime to ${docker_runtimes|or}, or use one of the ${schemes|or}
#     backends.
deny contains f if {
	input.template
	object.get(input, "capabilities", null) == null
	input.backend
	f := undescribed(rego.metadata.rule())
}

undescribed(meta) := lib.finding_fix(meta, msg_unknown_runtime, fix_unknown_runtime) if input.backend.scheme == "docker"

undescribed(meta) := lib.finding_at_fix(meta, "backend", msg_unknown_backend, fix_unknown_backend) if {
	input.backend.scheme != "docker"
}

msg_unknown_runtime := sprintf(
	"Docker runtime %s has no capability description: sandboxio cannot tell what it isolates or whether it enforces the network policy and caps",
	[lib.quote(object.get(input.backend, "runtime", ""))],
)

fix_unknown_runtime := sprintf("set runtime to %s", [lib.join_and(docker_runtimes)])

docker_runtimes := [sprintf("%s (%s)", [d.runtime, d.tier]) |
	some d in data.capabilities.backends
	d.backend == "docker"
]

msg_unknown_backend := sprintf(
	"backend %s has no capability description: sandboxio cannot tell what it isolates or whether it enforces the network policy and caps",
	[lib.quote(object.get(input.backend, "scheme", ""))],
)

fix_unknown_backend := sprintf("use one of the %s backends", [lib.join_and(schemes)])

schemes := sort({d.backend | some d in data.capabilities.backends})

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
	# the backend's runtime is "" on every backend but docker
	input.backend.runtime == ""
	not input.template.runtime in {"", null}
	input.backend.scheme != "docker"
	f := lib.finding(rego.metadata.rule(), msg_runtime_off_docker)
}

msg_runtime_off_docker := sprintf(
	"runtime %s is set, but runtime only applies to the docker backend and backend %s would ignore it",
	[lib.quote(input.template.runtime), lib.quote(input.backend.scheme)],
)
