# METADATA
# title: timeouts
# description: >-
#   Nothing runs unbounded. timeout_seconds bounds every create, run and
#   run_code call; lifetime_seconds bounds the sandbox itself and is enforced
#   by the backend, so it still holds when the caller crashes. Both default
#   to 300 seconds; an unset call timeout inherits the sandbox's, never "no
#   limit".
package sandboxio.timeouts

import data.sandboxio.lib

# Rules begin with cheap comparisons that fail for an accepted template (see
# "Writing rules" in README.md). A value read more than once is bound to a
# local first: every reference in a call is an expression of its own.

# METADATA
# title: call timeout that is zero, negative or unset
# description: >-
#   A call timeout of zero or less would mean no bound at all. Leave the
#   attribute out to get the default instead.
# custom:
#   id: SBX-TMO-001
#   class: ConfigurationError
#   attribute: timeout_seconds
#   fix: >-
#     Set timeout_seconds to a positive number of seconds, or leave it out
#     to get the default (300).
deny contains f if {
	input.template

	# missing reads as null; null and false order below every number
	object.get(input.template, "timeout_seconds", null) <= 0
	f := lib.finding(rego.metadata.rule(), msg_timeout_not_positive)
}

msg_timeout_not_positive := sprintf(
	"timeout_seconds is %s: every create, run and run_code call must be bounded by a positive timeout",
	[lib.describe(object.get(input.template, "timeout_seconds", null))],
)

# METADATA
# title: sandbox lifetime that is zero, negative or unset
# description: >-
#   The lifetime is the backstop that ends a sandbox even when teardown
#   fails. Zero or less would leave sandboxes running, and billing, forever.
# custom:
#   id: SBX-TMO-002
#   class: ConfigurationError
#   attribute: lifetime_seconds
#   fix: >-
#     Set lifetime_seconds to a positive number of seconds, or leave it out
#     to get the default (300).
deny contains f if {
	input.template
	object.get(input.template, "lifetime_seconds", null) <= 0
	f := lib.finding(rego.metadata.rule(), msg_lifetime_not_positive)
}

msg_lifetime_not_positive := sprintf(
	"lifetime_seconds is %s: every sandbox must have a positive lifetime, enforced by the backend",
	[lib.describe(object.get(input.template, "lifetime_seconds", null))],
)

# METADATA
# title: lifetime above the backend's maximum
# description: >-
#   Backends cap how long a sandbox may live (E2B, Modal and Vercel do). A
#   longer lifetime cannot be honoured: the backend would end the sandbox
#   earlier than declared.
# custom:
#   id: SBX-TMO-003
#   class: CapabilityNotSupported
#   attribute: lifetime_seconds
#   fix: >-
#     Lower lifetime_seconds to the backend's maximum, or split the work over
#     several sandboxes.
deny contains f if {
	# 0 (no maximum) on most backends ends the rule at once
	most := input.capabilities.max_lifetime_seconds
	most > 0
	lifetime := input.template.lifetime_seconds
	lifetime > most
	is_number(lifetime)
	f := lib.finding_fix(rego.metadata.rule(), msg_above_max_lifetime, fix_above_max_lifetime)
}

msg_above_max_lifetime := sprintf(
	"lifetime_seconds = %v is above the maximum sandbox lifetime of backend %s (%v seconds)",
	[input.template.lifetime_seconds, lib.backend_key, input.capabilities.max_lifetime_seconds],
)

fix_above_max_lifetime := sprintf(
	"lower lifetime_seconds to %v or less, or split the work over several sandboxes",
	[input.capabilities.max_lifetime_seconds],
)

# METADATA
# title: call timeout longer than the sandbox lifetime
# description: >-
#   A call can never outlive its sandbox, so a call timeout above the
#   lifetime can never be reached: a long call would end with the sandbox
#   gone rather than with a timeout. The configuration says something that
#   cannot happen, so it is refused rather than warned about.
# custom:
#   id: SBX-TMO-004
#   class: ConfigurationError
#   attribute: timeout_seconds
#   fix: >-
#     Raise lifetime_seconds to at least timeout_seconds, or lower
#     timeout_seconds.
deny contains f if {
	timeout := input.template.timeout_seconds
	lifetime := input.template.lifetime_seconds
	timeout > lifetime

	# only two valid values are compared; SBX-TMO-001/002 report the others
	lifetime > 0
	is_number(timeout)
	is_number(lifetime)
	f := lib.finding(rego.metadata.rule(), msg_timeout_above_lifetime)
}

msg_timeout_above_lifetime := sprintf(
	"timeout_seconds = %v is longer than lifetime_seconds = %v: the sandbox would end before a call could reach its timeout",
	[input.template.timeout_seconds, input.template.lifetime_seconds],
)

# METADATA
# title: call timeout above the ceiling
# description: >-
#   A call timeout is capped by max_timeout_seconds in capabilities/data.json
#   (30 days). A longer one bounds nothing in practice, and a large enough
#   one overflows the duration it is converted to, which could end as the
#   default or as no bound at all.
# custom:
#   id: SBX-TMO-005
#   class: ConfigurationError
#   attribute: timeout_seconds
#   fix: >-
#     Lower timeout_seconds to the ceiling (max_timeout_seconds in the
#     capability data, 30 days) or less.
deny contains f if {
	input.template.timeout_seconds > data.capabilities.max_timeout_seconds
	f := above_ceiling(rego.metadata.rule(), "timeout_seconds")
}

# METADATA
# title: sandbox lifetime above the ceiling
# description: >-
#   A sandbox lifetime is capped by max_timeout_seconds in
#   capabilities/data.json (30 days), on every backend, including those with
#   no maximum of their own (Docker). A longer lifetime leaves a forgotten
#   sandbox running and billing for longer than anyone meant, and a large
#   enough one overflows the duration it is converted to.
# custom:
#   id: SBX-TMO-006
#   class: ConfigurationError
#   attribute: lifetime_seconds
#   fix: >-
#     Lower lifetime_seconds to the ceiling (max_timeout_seconds in the
#     capability data, 30 days) or less, or split the work over several
#     sandboxes.
deny contains f if {
	input.template.lifetime_seconds > data.capabilities.max_timeout_seconds
	f := above_ceiling(rego.metadata.rule(), "lifetime_seconds")
}

# above_ceiling builds the finding of SBX-TMO-005 or SBX-TMO-006 for attr, a
# number above the ceiling. It is kept out of the rules to keep their bodies
# short: OPA sizes a rule's bindings by its body.
above_ceiling(meta, attr) := lib.finding_fix(meta, msg_above_ceiling(attr), fix_above_ceiling(attr)) if {
	is_number(input.template[attr])
}

msg_above_ceiling(attr) := sprintf(
	"%s = %v is above the ceiling of %v seconds (%v days) that sandboxio puts on every timeout and lifetime",
	[attr, input.template[attr], data.capabilities.max_timeout_seconds, data.capabilities.max_timeout_seconds / 86400],
)

fix_above_ceiling(attr) := sprintf("lower %s to %v or less", [attr, data.capabilities.max_timeout_seconds])
