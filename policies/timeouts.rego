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
	tpl := input.template
	value := object.get(tpl, "timeout_seconds", null)
	not lib.positive_number(value)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"timeout_seconds is %s: every create, run and run_code call must be bounded by a positive timeout",
		[lib.describe(value)],
	))
}

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
	tpl := input.template
	value := object.get(tpl, "lifetime_seconds", null)
	not lib.positive_number(value)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"lifetime_seconds is %s: every sandbox must have a positive lifetime, enforced by the backend",
		[lib.describe(value)],
	))
}

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
	limit := input.capabilities.max_lifetime_seconds
	limit > 0
	lifetime := input.template.lifetime_seconds
	is_number(lifetime)
	lifetime > limit
	f := lib.finding_fix(
		rego.metadata.rule(),
		sprintf("lifetime_seconds = %v is above the maximum sandbox lifetime of backend %s (%v seconds)", [lifetime, lib.backend_key, limit]),
		sprintf("lower lifetime_seconds to %v or less, or split the work over several sandboxes", [limit]),
	)
}

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
	lib.positive_number(timeout)
	lib.positive_number(lifetime)
	timeout > lifetime
	f := lib.finding(rego.metadata.rule(), sprintf(
		"timeout_seconds = %v is longer than lifetime_seconds = %v: the sandbox would end before a call could reach its timeout",
		[timeout, lifetime],
	))
}
