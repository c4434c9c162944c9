# METADATA
# title: resource caps
# description: >-
#   Every sandbox runs under concrete cpu, memory, disk and process caps.
#   Unset caps take modest defaults (capabilities/data.json default_caps); a
#   caller may raise a cap but never remove one, and a backend that would
#   ignore a requested cap refuses it instead.
package sandboxio.resources

import data.sandboxio.lib

# Rules are written for OPA's rule index (see "Writing rules" in README.md).
# The cap names are written out in each rule: a literal costs nothing to
# evaluate, a reference to a rule does.

# METADATA
# title: cap that is unset, zero, negative or outside the range backends apply
# description: >-
#   Caps can be raised, never removed. Zero, a negative number or a missing
#   value would mean "no cap" on some backends, so each is refused; to get
#   the default, leave the attribute out. A positive cap can still be one no
#   backend applies: below the minimum Docker refuses the value or, for cpu,
#   rounds it to no CPU limit at all; above the maximum the conversion to
#   the backend's units (memory in bytes, CPU in billionths, disk in KiB)
#   overflows and can end as no limit either. The range is cap_bounds in
#   capabilities/data.json, which the run-time checks read too.
# custom:
#   id: SBX-RES-001
#   class: ConfigurationError
#   attribute: resources
#   fix: >-
#     Set the cap within the range backends apply (cap_bounds in the
#     capability data), or leave it out (null) to get the modest default.
deny contains f if {
	input.resources

	# the defaults lie within the bounds (capabilities_test.rego checks it),
	# so caps left at them, the common case, need no test per cap
	input.resources != data.capabilities.default_caps
	some cap in ["cpu", "memory_mb", "disk_mb", "pids"]
	value := object.get(input.resources, cap, null)
	bound := data.capabilities.cap_bounds[cap]
	not lib.within(value, bound.min, bound.max)
	f := lib.finding_at_fix(rego.metadata.rule(), attribute(cap), msg_cap(cap, value, bound), fix_cap(cap, bound))
}

attribute(cap) := concat(".", ["resources", cap])

msg_cap(cap, value, bound) := sprintf(
	"resources.%s = %v is below the minimum of %v: no backend can apply a smaller cap, and Docker would round it to no limit or refuse it",
	[cap, value, bound.min],
) if {
	value > 0
	value < bound.min
} else := sprintf(
	"resources.%s = %v is above the maximum of %v: converted to the backend's units it would overflow, and the cap could end as no limit",
	[cap, value, bound.max],
) if {
	is_number(value)
	value > bound.max
} else := sprintf(
	"resources.%s is %s: every cap must be a positive number, because a cap can be raised but never removed (the default is %v)",
	[cap, lib.describe(value), data.capabilities.default_caps[cap]],
)

fix_cap(cap, bound) := sprintf(
	"set resources.%s between %v and %v, or leave it out to get the default (%v)",
	[cap, bound.min, bound.max, data.capabilities.default_caps[cap]],
)

# METADATA
# title: caps set per sandbox on a backend whose template fixes them
# description: >-
#   On some backends (E2B) cpu, memory and disk belong to the template the
#   sandbox starts from, with no per-sandbox override. The template's caps
#   still apply, but a different value asked for here would be accepted and
#   ignored, so anything other than the defaults is refused.
# custom:
#   id: SBX-RES-002
#   class: ConfigurationError
#   attribute: resources
#   fix: >-
#     Change the caps in the backend template and rebuild it, and leave
#     resources at the defaults here.
deny contains f if {
	input.capabilities.caps.mode == "template"
	input.resources != data.capabilities.default_caps
	some cap in ["cpu", "memory_mb", "disk_mb", "pids"]
	input.resources[cap] != data.capabilities.default_caps[cap]
	f := lib.finding_at_fix(rego.metadata.rule(), attribute(cap), msg_template_caps(cap), fix_template_caps(cap))
}

msg_template_caps(cap) := sprintf(
	"backend %s takes cpu, memory and disk from %s and cannot set them per sandbox, so resources.%s = %s (default %v) would be ignored",
	[lib.backend_key, template_ref, cap, lib.describe(input.resources[cap]), data.capabilities.default_caps[cap]],
)

fix_template_caps(cap) := sprintf(
	"change the caps in %s (and rebuild it), then leave resources.%s at its default (%v) here",
	[template_ref, cap, data.capabilities.default_caps[cap]],
)

default template_ref := "the backend's template"

template_ref := sprintf("the template %q (image)", [input.template.image]) if input.template.image != ""

# METADATA
# title: backend that can neither apply caps nor name a template
# description: >-
#   A backend must either apply caps per sandbox or start every sandbox from
#   a template whose caps it can name. One that can do neither would run
#   sandboxes without caps, so nothing is created on it.
# custom:
#   id: SBX-RES-003
#   class: CapabilityNotSupported
#   attribute: backend
#   fix: >-
#     Use a backend that applies resource caps: ${caps_per_sandbox|or} per
#     sandbox, or ${caps_template|or} through its template.
deny contains f if {
	input.capabilities.caps.mode == "none"
	input.template
	f := lib.finding(rego.metadata.rule(), msg_no_caps)
}

msg_no_caps := sprintf(
	"backend %s can neither apply resource caps per sandbox nor start from a template with known caps, so its sandboxes would run uncapped",
	[lib.backend_key],
)

# METADATA
# title: cap the backend cannot set per sandbox
# description: >-
#   Backends set different caps per sandbox: Modal takes cpu and memory but
#   no process limit, Vercel takes vCPUs with memory following them. A
#   non-default value for a cap the backend cannot set would be ignored, so
#   it is refused.
# custom:
#   id: SBX-RES-004
#   class: CapabilityNotSupported
#   attribute: resources
#   fix: >-
#     Leave the cap at its default, or use a backend that can set it per
#     sandbox.
deny contains f if {
	input.capabilities.caps.mode == "per_sandbox"

	# skips the loop on backends that set every cap (Docker)
	count(input.capabilities.caps.settable) < 4
	some cap in ["cpu", "memory_mb", "disk_mb", "pids"]
	not cap in input.capabilities.caps.settable
	input.resources[cap] != data.capabilities.default_caps[cap]
	f := lib.finding_at_fix(rego.metadata.rule(), attribute(cap), msg_not_settable(cap), fix_not_settable(cap))
}

msg_not_settable(cap) := sprintf(
	"backend %s cannot set %s per sandbox (it sets %s%s), so resources.%s = %s would be ignored",
	[
		lib.backend_key, cap, lib.join_and(input.capabilities.caps.settable),
		caps_note(input.capabilities.caps), cap, lib.describe(input.resources[cap]),
	],
)

fix_not_settable(cap) := sprintf(
	"leave resources.%s at its default (%v), or use a backend that sets it per sandbox: %s",
	[cap, data.capabilities.default_caps[cap], lib.join_and(backends_setting(cap))],
)

caps_note(caps) := sprintf("; %s", [caps.note]) if {
	is_string(caps.note)
	caps.note != ""
}

default caps_note(_) := ""

backends_setting(cap) := [lib.describe_backend(key) |
	some key, d in data.capabilities.backends
	d.caps.mode == "per_sandbox"
	cap in d.caps.settable
]

# METADATA
# title: process limit above the backend's ceiling
# description: >-
#   Where a backend enforces a process-count ceiling (the guard against fork
#   bombs), a pids cap above that ceiling cannot be honoured.
# custom:
#   id: SBX-RES-005
#   class: CapabilityNotSupported
#   attribute: resources.pids
#   fix: Lower resources.pids to at most the backend's ceiling.
deny contains f if {
	input.capabilities.caps.pids_ceiling == true
	ceiling := input.capabilities.caps.max_pids
	pids := input.resources.pids
	pids > ceiling
	ceiling > 0
	is_number(pids)
	f := lib.finding_fix(rego.metadata.rule(), msg_pids_above_ceiling, fix_pids_above_ceiling)
}

msg_pids_above_ceiling := sprintf(
	"resources.pids = %v is above the process ceiling of backend %s (%v)",
	[input.resources.pids, lib.backend_key, input.capabilities.caps.max_pids],
)

fix_pids_above_ceiling := sprintf("lower resources.pids to %v or less", [input.capabilities.caps.max_pids])

# METADATA
# title: memory cap that does not bound swap
# description: >-
#   A memory cap that leaves swap free only moves the pressure to the host's
#   swap: the sandbox keeps allocating and the cap is advisory. Every
#   sandbox gets a memory cap (the default when none is set), so a backend
#   whose memory cap is not known to bound swap as well cannot give one, and
#   nothing is created on it. Which backends bound swap is
#   memory_bounds_swap in capabilities/data.json, with its source in the
#   backend's notes (Daytona's from its runner's source).
# custom:
#   id: SBX-RES-006
#   class: CapabilityNotSupported
#   attribute: resources.memory_mb
#   fix: >-
#     Use a backend whose memory cap bounds memory and swap together (Docker
#     sets memory-swap to the same value): ${memory_swap|or}.
deny contains f if {
	input.capabilities.caps.memory_bounds_swap == false
	input.capabilities.caps.mode != "none" # SBX-RES-003 already refuses it
	input.template
	f := lib.finding_fix(rego.metadata.rule(), msg_memory_swap, fix_memory_swap)
}

msg_memory_swap := sprintf(
	"backend %s is not known to bound swap with its memory cap, so resources.memory_mb = %s would be advisory: a sandbox could keep allocating into swap",
	[lib.backend_key, lib.describe(object.get(object.get(input, "resources", {}), "memory_mb", data.capabilities.default_caps.memory_mb))],
)

fix_memory_swap := sprintf("use a backend whose memory cap bounds swap too: %s", [lib.join_and(backends_bounding_swap)])

backends_bounding_swap := [lib.describe_backend(key) |
	some key, d in data.capabilities.backends
	d.caps.mode != "none"
	d.caps.memory_bounds_swap == true
]

# METADATA
# title: caps the backend takes only as whole vCPUs with fixed memory each
# description: >-
#   Some backends (Vercel) size a sandbox in whole vCPUs, each with a fixed
#   amount of memory, and nothing in between. A cpu that is not a whole
#   number of vCPUs in the backend's range, or a memory_mb other than that
#   many times the memory per vCPU, would not be the cap the sandbox gets:
#   the backend would give more, or refuse. It is refused, with the nearest
#   size the backend takes in the fix.
# custom:
#   id: SBX-RES-007
#   class: CapabilityNotSupported
#   attribute: resources
#   fix: >-
#     Set resources.cpu to a whole number of vCPUs in the backend's range and
#     resources.memory_mb to that number times the backend's memory per vCPU.
deny contains f if {
	per := input.capabilities.caps.vcpu_memory_mb
	per > 0
	most := input.capabilities.caps.max_vcpus
	cpu := object.get(input.resources, "cpu", data.capabilities.default_caps.cpu)
	mem := object.get(input.resources, "memory_mb", data.capabilities.default_caps.memory_mb)
	is_number(cpu)
	is_number(mem)
	not vcpus_exact(cpu, mem, per, most)
	f := lib.finding_at_fix(rego.metadata.rule(), vcpu_attribute(cpu, most), msg_vcpus(cpu, mem, per, most), fix_vcpus(cpu, mem, per, most))
}

vcpus_exact(cpu, mem, per, most) if {
	whole_vcpus(cpu, most)
	mem == cpu * per
}

whole_vcpus(cpu, most) if {
	cpu == round(cpu)
	cpu >= 1
	cpu <= most
}

vcpu_attribute(cpu, most) := "resources.memory_mb" if whole_vcpus(cpu, most)

else := "resources.cpu"

# clamp_vcpus is n within 1..most.
clamp_vcpus(n, most) := min([max([n, 1]), most])

msg_vcpus(cpu, mem, per, most) := sprintf(
	"backend %s gives whole vCPUs from 1 to %v with %v MB of memory each, so resources.cpu = %v with resources.memory_mb = %v is not a size it takes",
	[lib.backend_key, most, per, cpu, mem],
)

# The fix names the size nearest the cpu asked for and, when another, the
# size nearest the memory asked for.
fix_vcpus(cpu, mem, per, most) := concat("", [
	sprintf("set resources.cpu = %v and resources.memory_mb = %v", [by_cpu, by_cpu * per]),
	alt,
]) if {
	by_cpu := clamp_vcpus(round(cpu), most)
	by_mem := clamp_vcpus(ceil(mem / per), most)
	alt := vcpus_alternative(by_cpu, by_mem, per)
}

vcpus_alternative(a, b, per) := sprintf(", or resources.cpu = %v and resources.memory_mb = %v", [b, b * per]) if a != b

else := ""

# METADATA
# title: cap finer than the unit the backend takes
# description: >-
#   Some backends take memory and disk only in whole units: Daytona in whole
#   GiB. A cap between two units cannot be applied as asked: rounded down it
#   starves the sandbox, rounded up it is looser than declared, so it is
#   refused. Only the default memory cap, left as it is, is sent as the
#   backend's smallest unit (1 GiB on Daytona), as the backend's page says.
# custom:
#   id: SBX-RES-008
#   class: CapabilityNotSupported
#   attribute: resources
#   fix: Set the cap to a whole number of the backend's unit.
deny contains f if {
	unit := input.capabilities.caps.unit_mb
	unit > 0
	some cap in ["memory_mb", "disk_mb"]
	value := input.resources[cap]
	value != data.capabilities.default_caps[cap]
	is_number(value)

	# floor, not %: OPA's % is undefined on a fraction, which would let it pass
	floor(value / unit) * unit != value
	f := lib.finding_at_fix(rego.metadata.rule(), attribute(cap), msg_unit(cap, value, unit), fix_unit(cap, value, unit))
}

msg_unit(cap, value, unit) := sprintf(
	"backend %s takes resources.%s only in whole units of %v MB (%s), so %v cannot be applied as declared",
	[lib.backend_key, cap, unit, input.capabilities.caps.note, value],
)

fix_unit(cap, value, unit) := sprintf(
	"set resources.%s to a whole number of %v MB units: %s",
	[cap, unit, concat(" or ", [sprintf("%v", [n]) | some n in units_near(value, unit)])],
)

units_near(value, unit) := [n |
	some n in [floor(value / unit) * unit, ceil(value / unit) * unit]
	n > 0
]

# METADATA
# title: default cap the backend does not apply
# description: >-
#   Every sandbox is promised concrete caps, with modest defaults for those
#   left out. Where a backend cannot set a cap per sandbox (${caps_unset}), the
#   default for it is not what the sandbox gets: the backend's own limit
#   applies, which may be far looser. A cap asked for explicitly is refused
#   (SBX-RES-004); the default is accepted, since the sandbox still has the
#   backend's limit, but the plan says which limit that is rather than let
#   the default look enforced.
# custom:
#   id: SBX-RES-009
#   class: CapNotAppliedWarning
#   attribute: resources
#   fix: >-
#     Use a backend that sets the cap per sandbox (Docker sets all four)
#     where the default must hold, or accept the backend's own limit.
warn contains f if {
	input.capabilities.caps.mode == "per_sandbox"
	input.template
	count(input.capabilities.caps.settable) < 4
	some cap in ["cpu", "memory_mb", "disk_mb", "pids"]
	not cap in input.capabilities.caps.settable
	object.get(object.get(input, "resources", {}), cap, data.capabilities.default_caps[cap]) == data.capabilities.default_caps[cap]
	f := lib.finding_at_fix(rego.metadata.rule(), attribute(cap), msg_default_not_applied(cap), fix_default_not_applied(cap))
}

msg_default_not_applied(cap) := sprintf(
	"backend %s cannot set %s per sandbox, so the default resources.%s = %v is not applied: %s applies instead",
	[lib.backend_key, cap, cap, data.capabilities.default_caps[cap], own_limit(cap)],
)

# own_limit names the limit a backend applies in place of a cap, where the
# capability data knows it (caps.own_limits).
own_limit(cap) := input.capabilities.caps.own_limits[cap]

default own_limit(_) := "the backend's own limit"

fix_default_not_applied(cap) := sprintf(
	"where resources.%s = %v must hold, use a backend that sets it per sandbox: %s; otherwise accept the backend's limit",
	[cap, data.capabilities.default_caps[cap], lib.join_and(backends_setting(cap))],
)
