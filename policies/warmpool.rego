# METADATA
# title: warm pools
# description: >-
#   A template may keep a warm pool: sandboxes created ahead of time from the
#   template, with its labels and no tenant, each bound to one tenant and
#   session when claimed and removed when closed, never handed to another.
#   A pool is accepted only where the backend can keep one (warm_pool in the
#   capability data), with a bounded size and idle time.
package sandboxio.warmpool

import data.sandboxio.lib

# METADATA
# title: warm pool on a backend that cannot keep one
# description: >-
#   The backend cannot create a sandbox ahead of time and bind it to a
#   tenant later while enforcing its idle time and its lifetime on its own
#   side, so the pool would be ignored or the binding would be unsafe.
#   ${warm_pool} keep warm pools today.
# custom:
#   id: SBX-WRM-001
#   class: CapabilityNotSupported
#   attribute: warm_pool
#   fix: >-
#     Remove warm_pool from the template (every open is then a cold open), or
#     use a backend that keeps warm pools (${warm_pool|or}).
deny contains f if {
	input.template.warm_pool
	not input.capabilities.warm_pool
	f := lib.finding(rego.metadata.rule(), sprintf("backend %s cannot keep a warm pool", [object.get(input, ["backend", "key"], "(none)")]))
}

bounds := data.capabilities.warm_pool_bounds

# METADATA
# title: warm pool size out of range
# description: >-
#   A pool keeps between 1 and warm_pool_bounds.size_max sandboxes ready;
#   each one holds the template's resource caps on the backend while it
#   waits.
# custom:
#   id: SBX-WRM-002
#   class: ConfigurationError
#   attribute: warm_pool.size
#   fix: >-
#     Set warm_pool.size to a whole number from 1 to 64.
deny contains f if {
	p := input.template.warm_pool
	not in_range(object.get(p, "size", null), 1, bounds.size_max)
	f := lib.finding(rego.metadata.rule(), sprintf("warm_pool.size must be a whole number from 1 to %d", [bounds.size_max]))
}

# METADATA
# title: warm pool idle time out of range
# description: >-
#   A warm sandbox waits at most max_idle_seconds for a claim and is then
#   removed by the backend. The idle time is bounded like a lifetime, and
#   must leave room for a claim.
# custom:
#   id: SBX-WRM-003
#   class: ConfigurationError
#   attribute: warm_pool.max_idle_seconds
#   fix: >-
#     Set warm_pool.max_idle_seconds to a whole number of seconds from 10 to
#     2592000 (30 days); 600 is a common choice.
deny contains f if {
	p := input.template.warm_pool
	not in_range(object.get(p, "max_idle_seconds", null), bounds.max_idle_seconds_min, data.capabilities.max_timeout_seconds)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"warm_pool.max_idle_seconds must be a whole number from %d to %d",
		[bounds.max_idle_seconds_min, data.capabilities.max_timeout_seconds],
	))
}

in_range(n, lo, hi) if {
	is_number(n)
	n == floor(n)
	n >= lo
	n <= hi
}
