package sandboxio.isolation_test

import data.sandboxio.fixtures as fx
import data.sandboxio.isolation

tiers := data.capabilities.tiers

require(key, tier) := fx.template_with(key, {"template": {"require_isolation": tier}})

# an input for a Docker runtime sandboxio has no description of
youki := object.union(
	fx.without(fx.template_input("docker/runc"), "capabilities"),
	{
		"backend": {"dsn": "docker://?runtime=youki", "runtime": "youki", "key": "docker/youki"},
		"template": {"runtime": "youki"},
	},
)

# an input for a backend scheme sandboxio has no description of
unknown_scheme := object.union(
	fx.without(fx.template_input("e2b"), "capabilities"),
	{"backend": {"dsn": "firecracker://", "scheme": "firecracker", "key": "firecracker"}},
)

# --- SBX-ISO-001: UNKNOWN required -----------------------------------------

test_unknown_requirement_refused if {
	fs := isolation.deny with input as require("docker/kata", "UNKNOWN")
	fx.has(fs, "SBX-ISO-001", "ConfigurationError", "require_isolation")
	fx.lacks(fs, "SBX-ISO-002")
	fx.lacks(fs, "SBX-ISO-003")
}

test_known_requirement_not_iso_001 if {
	every tier in ["", "CONTAINER", "GVISOR", "MICROVM"] {
		fs := isolation.deny with input as require("docker/kata", tier)
		fx.lacks(fs, "SBX-ISO-001")
	}
}

# --- SBX-ISO-002: not a tier -----------------------------------------------

test_not_a_tier_refused if {
	fs := isolation.deny with input as require("e2b", "VM")
	fx.has(fs, "SBX-ISO-002", "ConfigurationError", "require_isolation")
	fx.mentions(fs, "SBX-ISO-002", `"VM"`)
}

test_lower_case_tier_refused_with_hint if {
	fs := isolation.deny with input as require("e2b", "microvm")
	fx.has(fs, "SBX-ISO-002", "ConfigurationError", "require_isolation")
	fx.mentions(fs, "SBX-ISO-002", "MICROVM")
	fx.lacks(fs, "SBX-ISO-003")
}

test_long_requirement_not_repeated if {
	long := concat("", ["M" | some _ in numbers.range(1, 70)])
	fs := isolation.deny with input as require("e2b", long)
	fx.has(fs, "SBX-ISO-002", "ConfigurationError", "require_isolation")
	not fx.leaks(fs, long)
}

test_non_string_requirement_refused if {
	fs := isolation.deny with input as require("e2b", 3)
	fx.has(fs, "SBX-ISO-002", "ConfigurationError", "require_isolation")
}

test_null_requirement_is_unset if {
	fs := isolation.deny with input as require("e2b", null)
	count(fs) == 0
}

test_tiers_accepted if {
	every tier in ["CONTAINER", "GVISOR", "MICROVM"] {
		fs := isolation.deny with input as require("e2b", tier)
		count(fs) == 0
	}
}

# --- SBX-ISO-003: requirement not met --------------------------------------

test_gvisor_on_runc_refused if {
	fs := isolation.deny with input as require("docker/runc", "GVISOR")
	fx.has(fs, "SBX-ISO-003", "ConfigurationError", "require_isolation")
	fx.mentions(fs, "SBX-ISO-003", "CONTAINER")
	fx.fix_mentions(fs, "SBX-ISO-003", "docker with runtime runsc (GVISOR)")
	fx.fix_mentions(fs, "SBX-ISO-003", "e2b (MICROVM)")
	not fx.fix_mentions(fs, "SBX-ISO-003", "docker with runtime runc ")
}

test_microvm_on_gvisor_refused if {
	fs := isolation.deny with input as require("modal", "MICROVM")
	fx.has(fs, "SBX-ISO-003", "ConfigurationError", "require_isolation")
	fx.mentions(fs, "SBX-ISO-003", "GVISOR")
	fx.fix_mentions(fs, "SBX-ISO-003", "docker with runtime kata (MICROVM)")
	fx.fix_mentions(fs, "SBX-ISO-003", "vercel (MICROVM)")
	not fx.fix_mentions(fs, "SBX-ISO-003", "modal")
}

test_unknown_tier_satisfies_nothing if {
	every tier in ["CONTAINER", "GVISOR", "MICROVM"] {
		fs := isolation.deny with input as require("daytona", tier)
		fx.has(fs, "SBX-ISO-003", "ConfigurationError", "require_isolation")
		fx.mentions(fs, "SBX-ISO-003", "UNKNOWN")
	}
}

test_requirement_without_capabilities_refused if {
	fs := isolation.deny with input as object.union(youki, {"template": {"require_isolation": "CONTAINER"}})
	fx.has(fs, "SBX-ISO-003", "ConfigurationError", "require_isolation")
	fx.mentions(fs, "SBX-ISO-003", "docker/youki")
}

test_requirement_without_backend_refused if {
	inp := object.remove(fx.template_input("e2b"), ["backend", "capabilities"])
	fs := isolation.deny with input as object.union(inp, {"template": {"require_isolation": "CONTAINER"}})
	fx.has(fs, "SBX-ISO-003", "ConfigurationError", "require_isolation")
}

test_bogus_tier_in_descriptor_satisfies_nothing if {
	caps := object.union(data.capabilities.backends.e2b, {"tier": "HYPERVISOR"})
	fs := isolation.deny with input as fx.with_caps(require("e2b", "CONTAINER"), caps)
	fx.has(fs, "SBX-ISO-003", "ConfigurationError", "require_isolation")
	fx.mentions(fs, "SBX-ISO-003", "not a tier")
}

# Every backend against every requirement: refused exactly when the backend's
# tier is UNKNOWN or ranks below the requirement.
test_tier_matrix if {
	every key in fx.backend_keys {
		every want in ["CONTAINER", "GVISOR", "MICROVM"] {
			have := data.capabilities.backends[key].tier
			refused := "SBX-ISO-003" in fx.ids(isolation.deny) with input as require(key, want)
			expected := any_shortfall(have, want)
			refused == expected
		}
	}
}

any_shortfall(have, _) if have == "UNKNOWN"

any_shortfall(have, want) if tiers[have] < tiers[want]

default any_shortfall(_, _) := false

test_requirement_met_accepted if {
	cases := [["docker/runsc", "GVISOR"], ["docker/kata", "MICROVM"], ["e2b", "MICROVM"], ["vercel", "GVISOR"], ["modal", "CONTAINER"], ["docker/runc", "CONTAINER"]]
	every c in cases {
		fs := isolation.deny with input as require(c[0], c[1])
		count(fs) == 0
	}
}

# --- SBX-ISO-004: unverified isolation warning -----------------------------

test_unknown_tier_without_requirement_warned if {
	ws := isolation.warn with input as fx.template_input("daytona")
	fx.has(ws, "SBX-ISO-004", "UnverifiedIsolationWarning", "require_isolation")
	fx.mentions(ws, "SBX-ISO-004", "daytona")
}

test_unknown_tier_warned_for_tenant_and_spec if {
	fx.has(isolation.warn, "SBX-ISO-004", "UnverifiedIsolationWarning", "require_isolation") with input as fx.tenant_input("daytona", {})
	fx.has(isolation.warn, "SBX-ISO-004", "UnverifiedIsolationWarning", "require_isolation") with input as fx.spec_input("daytona", {})
}

test_unknown_tier_with_requirement_refused_not_warned if {
	ws := isolation.warn with input as require("daytona", "CONTAINER")
	count(ws) == 0
}

test_known_tier_not_warned if {
	every key in fx.backend_keys - {"daytona"} {
		ws := isolation.warn with input as fx.template_input(key)
		count(ws) == 0
	}
}

test_unverified_warning_only_for_sandboxes if {
	ws := isolation.warn with input as fx.network_input("daytona", {})
	count(ws) == 0
}

# --- SBX-ISO-005: unknown Docker runtime -----------------------------------

test_unknown_docker_runtime_refused if {
	fs := isolation.deny with input as youki
	fx.has(fs, "SBX-ISO-005", "ConfigurationError", "runtime")
	fx.mentions(fs, "SBX-ISO-005", `"youki"`)
	fx.fix_mentions(fs, "SBX-ISO-005", "runc (CONTAINER)")
	fx.fix_mentions(fs, "SBX-ISO-005", "runsc (GVISOR)")
	fx.fix_mentions(fs, "SBX-ISO-005", "kata (MICROVM)")
	fx.count_of(fs, "SBX-ISO-005") == 1
}

test_known_docker_runtimes_accepted if {
	every key in {"docker/runc", "docker/runsc", "docker/kata"} {
		fs := isolation.deny with input as fx.template_input(key)
		count(fs) == 0
	}
}

test_unknown_runtime_judged_only_for_sandboxes if {
	inp := fx.without(fx.network_input("docker/runc", {}), "capabilities")
	fs := isolation.deny with input as inp with input.backend.runtime as "youki"
	count(fs) == 0
}

# --- SBX-ISO-006: runtime on a backend other than Docker -------------------

test_runtime_on_e2b_refused if {
	fs := isolation.deny with input as fx.template_with("e2b", {"template": {"runtime": "runsc"}})
	fx.has(fs, "SBX-ISO-006", "ConfigurationError", "runtime")
	fx.mentions(fs, "SBX-ISO-006", `"runsc"`)
	fx.mentions(fs, "SBX-ISO-006", `"e2b"`)
}

test_no_runtime_off_docker_accepted if {
	every key in {"e2b", "modal", "vercel", "daytona"} {
		fs := isolation.deny with input as fx.template_input(key)
		fx.lacks(fs, "SBX-ISO-006")
	}
}

# --- SBX-ISO-005 (continued): backend scheme without a description ---------

test_unknown_scheme_refused if {
	fs := isolation.deny with input as unknown_scheme
	fx.has(fs, "SBX-ISO-005", "ConfigurationError", "backend")
	fx.mentions(fs, "SBX-ISO-005", `"firecracker"`)
	fx.fix_mentions(fs, "SBX-ISO-005", "daytona, docker, e2b, kubernetes, modal and vercel")
	fx.count_of(fs, "SBX-ISO-005") == 1
}

test_known_schemes_accepted if {
	every key in fx.backend_keys {
		fs := isolation.deny with input as fx.template_input(key)
		fx.lacks(fs, "SBX-ISO-005")
	}
}

test_unknown_docker_runtime_names_the_runtime_only if {
	fs := isolation.deny with input as youki
	fx.count_of(fs, "SBX-ISO-005") == 1
	not fx.has(fs, "SBX-ISO-005", "ConfigurationError", "backend")
}
