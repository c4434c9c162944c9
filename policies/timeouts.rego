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
# title: call timeout that is unset, zero, negative or above the ceiling
# description: >-
#   A call timeout of zero or less would mean no bound at all; leave the
#   attribute out to get the default instead. Every timeout is also capped by
#   max_timeout_seconds in capabilities/data.json (30 days): a longer one
#   bounds nothing in practice, and a large enough one overflows the
#   duration it is converted to, which could end as the default or as no
#   bound at all.
# custom:
#   id: SBX-TMO-001
#   class: ConfigurationError
#   attribute: timeout_seconds
#   fix: >-
#     Set timeout_seconds to a positive number of seconds up to the ceiling
#     (30 days), or leave it out to get the default (300).
deny contains f if {
	input.template
	timeout := object.get(input.template, "timeout_seconds", null)

	# outside 1..ceiling exactly one side holds (null and false order below
	# every number, strings above); comparisons with a literal are cheaper than
	# a function call or a data reference on this happy path (and written as
	# two locals: opa fmt drops the parentheses of (a < 1) != (a > 2))
	below := timeout < 1
	above := timeout > 2592000 # max_timeout_seconds; timeouts_test.rego checks they agree
	below != above
	f := lib.finding_fix(rego.metadata.rule(), msg_seconds("timeout_seconds", timeout), fix_seconds("timeout_seconds"))
}

# METADATA
# title: sandbox lifetime that is unset, zero, negative or above the ceiling
# description: >-
#   The lifetime is the backstop that ends a sandbox even when teardown
#   fails. Zero or less would leave sandboxes running, and billing, forever.
#   The same ceiling as for call timeouts (max_timeout_seconds, 30 days)
#   applies on every backend, including those with no maximum of their own
#   (Docker): a longer lifetime leaves a forgotten sandbox running for longer
#   than anyone meant, and a large enough one overflows its duration.
# custom:
#   id: SBX-TMO-002
#   class: ConfigurationError
#   attribute: lifetime_seconds
#   fix: >-
#     Set lifetime_seconds to a positive number of seconds up to the ceiling
#     (30 days), or leave it out to get the default (300).
deny contains f if {
	input.template
	lifetime := object.get(input.template, "lifetime_seconds", null)

	# outside 1..ceiling exactly one side holds (null and false order below
	# every number, strings above); comparisons with a literal are cheaper than
	# a function call or a data reference on this happy path (and written as
	# two locals: opa fmt drops the parentheses of (a < 1) != (a > 2))
	below := lifetime < 1
	above := lifetime > 2592000 # max_timeout_seconds; timeouts_test.rego checks they agree
	below != above
	f := lib.finding_fix(rego.metadata.rule(), msg_seconds("lifetime_seconds", lifetime), fix_seconds("lifetime_seconds"))
}

msg_seconds(attr, value) := sprintf(
	"%s = %v is above the ceiling of %v seconds (%v days) that sandboxio puts on every timeout and lifetime",
	[attr, value, data.capabilities.max_timeout_seconds, data.capabilities.max_timeout_seconds / 86400],
) if {
	is_number(value)
	value > data.capabilities.max_timeout_seconds
} else := sprintf("%s is %s: %s", [attr, lib.describe(value), why_positive[attr]])

why_positive := {
	"timeout_seconds": "every create, run and run_code call must be bounded by a positive timeout",
	"lifetime_seconds": "every sandbox must have a positive lifetime, enforced by the backend",
}

fix_seconds(attr) := sprintf(
	"set %s to a positive number of seconds up to %v, or leave it out to get the default (%v)",
	[attr, data.capabilities.max_timeout_seconds, 300],
)

# METADATA
# title: lifetime above the backend's maximum
# description: >-
#   Backends cap how long a sandbox may live (${max_lifetime} do). A
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
# title: lifetime the backend enforces only as an idle timeout
# description: >-
#   Daytona has no absolute sandbox lifetime: it stops a sandbox after a
#   number of minutes without activity and then deletes it. sandboxio sends
#   lifetime_seconds (rounded up to whole minutes) as that idle limit and
#   deletes the sandbox itself when the lifetime ends, but only while the
#   process that opened it is alive. A sandbox kept busy, or one whose
#   caller died while it was busy, can outlive its lifetime, so the plan
#   says so.
# custom:
#   id: SBX-TMO-005
#   class: IdleLifetimeWarning
#   attribute: lifetime_seconds
#   fix: >-
#     Use a backend with an absolute lifetime (${absolute_lifetime|or})
#     where a sandbox must end by a deadline, and run `sandboxio reap` on a
#     schedule.
warn contains f if {
	input.capabilities.lifetime_enforcement == "idle"
	input.template
	f := lib.finding(rego.metadata.rule(), msg_idle_lifetime)
}

msg_idle_lifetime := sprintf(
	"backend %s has no absolute sandbox lifetime: lifetime_seconds = %v becomes an idle limit of %v minutes on the backend, and is a deadline only while the caller that opened the sandbox runs",
	[lib.backend_key, lib.describe(input.template.lifetime_seconds), idle_minutes],
)

idle_minutes := ceil(input.template.lifetime_seconds / 60) if is_number(input.template.lifetime_seconds)

default idle_minutes := "(unknown)"
