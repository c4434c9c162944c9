package sandboxio.resources_test

import data.sandboxio.fixtures as fx
import data.sandboxio.resources

cap_names := ["cpu", "memory_mb", "disk_mb", "pids"]

# --- SBX-RES-001: zero, negative or unset cap -----------------------------

test_zero_cap_refused if {
	every cap in cap_names {
		fs := resources.deny with input as fx.resources_only({cap: 0})
		fx.has(fs, "SBX-RES-001", "ConfigurationError", concat(".", ["resources", cap]))
		fx.count_of(fs, "SBX-RES-001") == 1
	}
}

test_negative_cap_refused if {
	fs := resources.deny with input as fx.template_with("docker/runc", {"resources": {"memory_mb": -1}})
	fx.has(fs, "SBX-RES-001", "ConfigurationError", "resources.memory_mb")
	fx.mentions(fs, "SBX-RES-001", "-1")
}

test_one_finding_per_cap if {
	fs := resources.deny with input as fx.resources_only({"cpu": 0, "memory_mb": 0, "disk_mb": -5, "pids": 0})
	fx.count_of(fs, "SBX-RES-001") == 4
	{f.attribute | some f in fs} == {"resources.cpu", "resources.memory_mb", "resources.disk_mb", "resources.pids"}
}

test_null_cap_refused if {
	fs := resources.deny with input as fx.resources_only({"pids": null})
	fx.has(fs, "SBX-RES-001", "ConfigurationError", "resources.pids")
	fx.mentions(fs, "SBX-RES-001", "unset")
}

test_false_cap_refused if {
	fs := resources.deny with input as fx.resources_only({"disk_mb": false})
	fx.has(fs, "SBX-RES-001", "ConfigurationError", "resources.disk_mb")
}

test_missing_cap_refused if {
	fs := resources.deny with input as {"kind": "resource_caps", "resources": {"cpu": 1, "memory_mb": 512, "disk_mb": 1024}}
	fx.has(fs, "SBX-RES-001", "ConfigurationError", "resources.pids")
}

test_positive_caps_accepted if {
	fs := resources.deny with input as fx.resources_only({"cpu": 0.5, "memory_mb": 4096, "disk_mb": 10240, "pids": 1024})
	count(fs) == 0
}

test_default_caps_accepted_where_memory_bounds_swap if {
	# vercel: its vCPU comes with 2048 MB (test_default_memory_on_vercel_refused)
	every key in fx.backend_keys - {"daytona", "vercel"} {
		fs := resources.deny with input as fx.template_input(key)
		count(fs) == 0
	}
}

test_no_resources_no_findings if {
	fs := resources.deny with input as fx.network_input("docker/runc", {})
	count(fs) == 0
}

# --- SBX-RES-002: caps owned by the template (E2B) -------------------------

test_non_default_caps_on_e2b_refused if {
	inp := fx.template_with("e2b", {"template": {"image": "agent-python"}, "resources": {"memory_mb": 1024}})
	fs := resources.deny with input as inp
	fx.has(fs, "SBX-RES-002", "ConfigurationError", "resources.memory_mb")
	fx.count_of(fs, "SBX-RES-002") == 1
	fx.mentions(fs, "SBX-RES-002", `"agent-python"`)
	fx.fix_mentions(fs, "SBX-RES-002", `"agent-python"`)
	fx.mentions(fs, "SBX-RES-002", "e2b")
}

test_every_non_default_cap_on_e2b_refused if {
	fs := resources.deny with input as fx.template_with("e2b", {"resources": {"cpu": 2, "memory_mb": 2048, "disk_mb": 4096, "pids": 512}})
	fx.count_of(fs, "SBX-RES-002") == 4
}

test_lowered_cap_on_e2b_refused if {
	fs := resources.deny with input as fx.template_with("e2b", {"resources": {"cpu": 0.5}})
	fx.has(fs, "SBX-RES-002", "ConfigurationError", "resources.cpu")
}

test_caps_on_e2b_without_template_name_the_backend_template if {
	fs := resources.deny with input as fx.resources_input("e2b", {"disk_mb": 4096})
	fx.has(fs, "SBX-RES-002", "ConfigurationError", "resources.disk_mb")
	fx.mentions(fs, "SBX-RES-002", "the backend's template")
}

test_default_caps_on_e2b_accepted if {
	fs := resources.deny with input as fx.template_with("e2b", {"resources": {"cpu": 1.0}})
	count(fs) == 0
}

test_non_default_caps_per_sandbox_not_template_refusal if {
	fs := resources.deny with input as fx.template_with("docker/runc", {"resources": {"memory_mb": 1024}})
	fx.lacks(fs, "SBX-RES-002")
}

# --- SBX-RES-003: backend with no way to apply caps ------------------------

test_backend_without_caps_refused if {
	caps := object.union(data.capabilities.backends.daytona, {"caps": {"mode": "none", "settable": []}})
	fs := resources.deny with input as fx.with_caps(fx.template_input("daytona"), caps)
	fx.has(fs, "SBX-RES-003", "CapabilityNotSupported", "backend")
	fx.mentions(fs, "SBX-RES-003", "daytona")
}

test_every_real_backend_applies_caps if {
	every key in fx.backend_keys {
		fs := resources.deny with input as fx.template_input(key)
		fx.lacks(fs, "SBX-RES-003")
	}
}

test_caps_mode_none_judged_only_for_sandboxes if {
	caps := object.union(data.capabilities.backends.daytona, {"caps": {"mode": "none"}})
	fs := resources.deny with input as fx.with_caps(fx.resources_input("daytona", {}), caps)
	fx.lacks(fs, "SBX-RES-003")
}

# --- SBX-RES-004: cap the backend cannot set per sandbox -------------------

test_pids_on_modal_refused if {
	fs := resources.deny with input as fx.template_with("modal", {"resources": {"pids": 512}})
	fx.has(fs, "SBX-RES-004", "CapabilityNotSupported", "resources.pids")
	fx.mentions(fs, "SBX-RES-004", "modal")
	fx.mentions(fs, "SBX-RES-004", "cpu and memory_mb")
	fx.fix_mentions(fs, "SBX-RES-004", "docker with runtime runc")
	not fx.fix_mentions(fs, "SBX-RES-004", "modal")
}

# --- SBX-RES-009: default cap the backend does not apply --------------------

test_default_pids_not_applied_on_modal_warned if {
	ws := resources.warn with input as fx.template_with("modal", {})
	fx.has(ws, "SBX-RES-009", "CapNotAppliedWarning", "resources.pids")
	fx.has(ws, "SBX-RES-009", "CapNotAppliedWarning", "resources.disk_mb")
	fx.lacks_at(ws, "SBX-RES-009", "resources.cpu")
	fx.mentions(ws, "SBX-RES-009", "resources.pids = 256 is not applied")
	fx.fix_mentions(ws, "SBX-RES-009", "docker with runtime runc")
}

test_default_pids_not_applied_on_kubernetes_names_the_node_ceiling if {
	ws := resources.warn with input as fx.tenant_input("kubernetes", {})
	fx.has(ws, "SBX-RES-009", "CapNotAppliedWarning", "resources.pids")
	fx.mentions(ws, "SBX-RES-009", "the node's podPidsLimit")
	fx.lacks_at(ws, "SBX-RES-009", "resources.disk_mb")
}

test_no_default_cap_warning_where_every_cap_is_set if {
	every key in ["docker/runc", "docker/runsc", "e2b"] {
		ws := resources.warn with input as fx.template_with(key, {})
		fx.lacks(ws, "SBX-RES-009")
	}
}

test_no_default_cap_warning_without_a_template if {
	ws := resources.warn with input as fx.resources_input("modal", {})
	fx.lacks(ws, "SBX-RES-009")
}

# --- SBX-RES-007: whole vCPUs with fixed memory each (Vercel) ---------------

test_memory_not_per_vcpu_on_vercel_refused if {
	fs := resources.deny with input as fx.resources_input("vercel", {"memory_mb": 4096})
	fx.has(fs, "SBX-RES-007", "CapabilityNotSupported", "resources.memory_mb")
	fx.mentions(fs, "SBX-RES-007", "2048 MB of memory each")
	fx.fix_mentions(fs, "SBX-RES-007", "resources.cpu = 1 and resources.memory_mb = 2048")
	fx.fix_mentions(fs, "SBX-RES-007", "or resources.cpu = 2 and resources.memory_mb = 4096")
	fx.lacks(fs, "SBX-RES-004")
}

test_default_memory_on_vercel_refused if {
	# 512 MB: Vercel would give the vCPU its 2048 MB, four times the cap.
	fs := resources.deny with input as fx.template_with("vercel", {})
	fx.has(fs, "SBX-RES-007", "CapabilityNotSupported", "resources.memory_mb")
	fx.fix_mentions(fs, "SBX-RES-007", "resources.cpu = 1 and resources.memory_mb = 2048")
}

test_fractional_and_too_many_vcpus_refused if {
	fs := resources.deny with input as fx.template_with("vercel", {"resources": {"cpu": 1.5, "memory_mb": 3072}})
	fx.has(fs, "SBX-RES-007", "CapabilityNotSupported", "resources.cpu")
	fx.fix_mentions(fs, "SBX-RES-007", "resources.cpu = 2 and resources.memory_mb = 4096")
	fs2 := resources.deny with input as fx.template_with("vercel", {"resources": {"cpu": 16, "memory_mb": 32768}})
	fx.has(fs2, "SBX-RES-007", "CapabilityNotSupported", "resources.cpu")
	fx.fix_mentions(fs2, "SBX-RES-007", "resources.cpu = 8 and resources.memory_mb = 16384")
}

test_whole_vcpus_with_their_memory_accepted if {
	every n in [1, 2, 4, 8] {
		fs := resources.deny with input as fx.template_with("vercel", {"resources": {"cpu": n, "memory_mb": n * 2048}})
		count(fs) == 0
	}
}

test_disk_on_vercel_refused_with_its_note if {
	fs := resources.deny with input as fx.template_with("vercel", {"resources": {"cpu": 1, "memory_mb": 2048, "disk_mb": 4096}})
	fx.has(fs, "SBX-RES-004", "CapabilityNotSupported", "resources.disk_mb")
	fx.mentions(fs, "SBX-RES-004", "2048 MB of memory each")
	fx.lacks(fs, "SBX-RES-007")
}

test_vcpu_steps_only_where_the_backend_has_them if {
	fs := resources.deny with input as fx.template_with("modal", {"resources": {"cpu": 1.5, "memory_mb": 3000}})
	fx.lacks(fs, "SBX-RES-007")
}

test_settable_caps_on_daytona_accepted_in_whole_gib if {
	fs := resources.deny with input as fx.template_with("daytona", {"resources": {"cpu": 2, "memory_mb": 2048, "disk_mb": 4096}})
	count(fs) == 0
}

test_disk_on_modal_and_pids_on_daytona_refused if {
	fs1 := resources.deny with input as fx.template_with("modal", {"resources": {"disk_mb": 4096}})
	fx.has(fs1, "SBX-RES-004", "CapabilityNotSupported", "resources.disk_mb")
	fs2 := resources.deny with input as fx.template_with("daytona", {"resources": {"pids": 128}})
	fx.has(fs2, "SBX-RES-004", "CapabilityNotSupported", "resources.pids")
}

test_settable_caps_accepted if {
	cases := [
		["modal", {"cpu": 2, "memory_mb": 2048}],
		["vercel", {"cpu": 2, "memory_mb": 4096}],
		["daytona", {"cpu": 4, "memory_mb": 8192, "disk_mb": 10240}],
		["docker/runc", {"cpu": 2, "memory_mb": 2048, "disk_mb": 4096, "pids": 512}],
		["docker/runsc", {"cpu": 2, "memory_mb": 2048, "disk_mb": 4096, "pids": 512}],
	]
	every c in cases {
		fs := resources.deny with input as fx.template_with(c[0], {"resources": c[1]})
		count(fs) == 0
	}
}

# --- SBX-RES-005: pids above the backend ceiling ---------------------------

test_pids_above_ceiling_refused if {
	fs := resources.deny with input as fx.template_with("docker/runc", {"resources": {"pids": 40000}})
	fx.has(fs, "SBX-RES-005", "CapabilityNotSupported", "resources.pids")
	fx.mentions(fs, "SBX-RES-005", "32768")
	fx.fix_mentions(fs, "SBX-RES-005", "32768")
}

test_pids_at_ceiling_accepted if {
	fs := resources.deny with input as fx.template_with("docker/kata", {"resources": {"pids": 32768}})
	count(fs) == 0
}

test_pids_ceiling_only_where_enforced if {
	fs := resources.deny with input as fx.template_with("modal", {"resources": {"pids": 40000}})
	fx.lacks(fs, "SBX-RES-005")
	fx.has(fs, "SBX-RES-004", "CapabilityNotSupported", "resources.pids")
}

# --- SBX-RES-006: memory cap that does not bound swap ----------------------

# No backend in the data leaves swap free today (Daytona's runner sets
# memory-swap to the memory cap, see its notes), so the refused cases use a
# descriptor that says it does.
no_swap_bound := object.union(data.capabilities.backends.daytona, {"caps": {"memory_bounds_swap": false}})

test_memory_cap_without_swap_bound_refused if {
	fs := resources.deny with input as fx.with_caps(fx.template_input("daytona"), no_swap_bound)
	fx.has(fs, "SBX-RES-006", "CapabilityNotSupported", "resources.memory_mb")
	fx.mentions(fs, "SBX-RES-006", "daytona")
	fx.mentions(fs, "SBX-RES-006", "memory_mb = 512")
	fx.fix_mentions(fs, "SBX-RES-006", "docker with runtime runc")
	fx.fix_mentions(fs, "SBX-RES-006", "daytona")
}

test_memory_cap_without_swap_bound_refused_for_sandboxes if {
	fx.has(resources.deny, "SBX-RES-006", "CapabilityNotSupported", "resources.memory_mb") with input as fx.with_caps(fx.tenant_input("daytona", {}), no_swap_bound)
	fx.has(resources.deny, "SBX-RES-006", "CapabilityNotSupported", "resources.memory_mb") with input as fx.with_caps(fx.spec_input("daytona", {}), no_swap_bound)
}

# Daytona passes since its descriptor records the runner's memory-swap
# setting (memory_bounds_swap true, with the source in its notes).
test_daytona_memory_cap_bounds_swap if {
	data.capabilities.backends.daytona.caps.memory_bounds_swap == true
	some note in data.capabilities.backends.daytona.notes
	contains(note, "apps/runner/pkg/docker/container_configs.go")
	contains(note, "v0.190.0")
	fs := resources.deny with input as fx.template_input("daytona")
	count(fs) == 0
}

test_memory_cap_bounding_swap_accepted if {
	bounding := {key | some key, d in data.capabilities.backends; d.caps.memory_bounds_swap == true}
	count(bounding) == 11
	every key in bounding {
		fs := resources.deny with input as fx.template_input(key)
		fx.lacks(fs, "SBX-RES-006")
	}
}

test_memory_swap_judged_only_for_sandboxes if {
	fs := resources.deny with input as fx.with_caps(fx.resources_input("daytona", {"memory_mb": 1024}), no_swap_bound)
	fx.lacks(fs, "SBX-RES-006")
}

test_memory_swap_left_to_res_003_when_no_caps if {
	caps := object.union(no_swap_bound, {"caps": {"mode": "none", "settable": []}})
	fs := resources.deny with input as fx.with_caps(fx.template_input("daytona"), caps)
	fx.ids(fs) == {"SBX-RES-003"}
}

# --- SBX-RES-008: cap finer than the backend's unit ------------------------

test_memory_between_gib_refused_on_daytona if {
	fs := resources.deny with input as fx.template_with("daytona", {"resources": {"memory_mb": 1536}})
	fx.ids(fs) == {"SBX-RES-008"}
	fx.has(fs, "SBX-RES-008", "CapabilityNotSupported", "resources.memory_mb")
	fx.mentions(fs, "SBX-RES-008", "1024 MB")
	fx.fix_mentions(fs, "SBX-RES-008", "1024 or 2048")
}

test_disk_below_one_gib_refused_on_daytona if {
	fs := resources.deny with input as fx.template_with("daytona", {"resources": {"disk_mb": 700.5}})
	fx.has(fs, "SBX-RES-008", "CapabilityNotSupported", "resources.disk_mb")
	fx.fix_mentions(fs, "SBX-RES-008", "to a whole number of 1024 MB units: 1024")
	not fx.fix_mentions(fs, "SBX-RES-008", " or ")
}

# The default memory (512) is sent as Daytona's smallest size; any other
# value must be whole GiB. Backends without a unit take any value.
test_default_memory_and_unitless_backends_accepted if {
	fs := resources.deny with input as fx.template_input("daytona")
	fx.lacks(fs, "SBX-RES-008")
	every key in fx.backend_keys - {"daytona"} {
		fs2 := resources.deny with input as fx.template_with(key, {"resources": {"memory_mb": 1536}})
		fx.lacks(fs2, "SBX-RES-008")
	}
}

# --- SBX-RES-001: cap outside the range a backend can apply ----------------

bounds := data.capabilities.cap_bounds

test_cap_below_minimum_refused if {
	every cap, value in {"cpu": 1e-10, "memory_mb": 5, "disk_mb": 0.5, "pids": 0.5} {
		fs := resources.deny with input as fx.resources_only({cap: value})
		fx.has(fs, "SBX-RES-001", "ConfigurationError", concat(".", ["resources", cap]))
		fx.count_of(fs, "SBX-RES-001") == 1
		fx.mentions(fs, "SBX-RES-001", "below the minimum")
		fx.mentions(fs, "SBX-RES-001", sprintf("%v", [bounds[cap].min]))
		fx.fix_mentions(fs, "SBX-RES-001", sprintf("between %v and %v", [bounds[cap].min, bounds[cap].max]))
	}
}

# 1e-10 vCPU would be NanoCPUs 0 on Docker, which is no CPU limit at all.
test_tiny_cpu_refused_on_every_backend if {
	every key in fx.backend_keys {
		fs := resources.deny with input as fx.template_with(key, {"resources": {"cpu": 1e-10}})
		fx.has(fs, "SBX-RES-001", "ConfigurationError", "resources.cpu")
		fx.mentions(fs, "SBX-RES-001", "1e-10")
	}
}

test_cap_above_maximum_refused if {
	# memory_mb 2^44 is 0 bytes once multiplied by 2^20 in an int64
	every cap, value in {"cpu": 1025, "memory_mb": 17592186044416, "disk_mb": 1073741825, "pids": 4194305} {
		fs := resources.deny with input as fx.resources_only({cap: value})
		fx.has(fs, "SBX-RES-001", "ConfigurationError", concat(".", ["resources", cap]))
		fx.count_of(fs, "SBX-RES-001") == 1
		fx.mentions(fs, "SBX-RES-001", "above the maximum")
		fx.mentions(fs, "SBX-RES-001", sprintf("%v", [value]))
		fx.mentions(fs, "SBX-RES-001", sprintf("%v", [bounds[cap].max]))
	}
}

test_one_bounds_finding_per_cap if {
	fs := resources.deny with input as fx.resources_only({"cpu": 0.001, "memory_mb": 1, "disk_mb": 1099511627776, "pids": 1e12})
	fx.count_of(fs, "SBX-RES-001") == 4
	{f.attribute | some f in fs; f.id == "SBX-RES-001"} == {"resources.cpu", "resources.memory_mb", "resources.disk_mb", "resources.pids"}
}

test_caps_at_bounds_accepted if {
	every side in ["min", "max"] {
		caps := {cap: b[side] | some cap, b in bounds}
		fs := resources.deny with input as fx.resources_only(caps)
		count(fs) == 0
	}
}

test_caps_at_bounds_accepted_on_docker if {
	# pids stays under Docker's own ceiling (SBX-RES-005)
	every side in ["min", "max"] {
		caps := object.union({cap: b[side] | some cap, b in bounds}, {"pids": 256})
		fs := resources.deny with input as fx.template_with("docker/runc", {"resources": caps})
		count(fs) == 0
	}
}

# Zero, negative and unset caps say so, not "below the minimum".
test_not_positive_caps_say_positive if {
	fs := resources.deny with input as fx.resources_only({"cpu": 0, "memory_mb": -1, "disk_mb": null})
	fx.count_of(fs, "SBX-RES-001") == 3
	every f in fs {
		contains(f.msg, "must be a positive number")
		not contains(f.msg, "minimum")
	}
}

test_bounds_checked_for_sandboxes if {
	inp := object.union(fx.spec_input("docker/runc", {}), {"resources": {"memory_mb": 17592186044416}})
	fx.has(resources.deny, "SBX-RES-001", "ConfigurationError", "resources.memory_mb") with input as inp
}
