package sandboxio.timeouts_test

import data.sandboxio.fixtures as fx
import data.sandboxio.timeouts

# --- SBX-TMO-001: call timeout ---------------------------------------------

test_zero_or_negative_timeout_refused if {
	every value in [0, -1, -300] {
		fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": value}})
		fx.has(fs, "SBX-TMO-001", "ConfigurationError", "timeout_seconds")
		fx.mentions(fs, "SBX-TMO-001", sprintf("%v", [value]))
	}
}

test_unset_timeout_refused if {
	fs := timeouts.deny with input as fx.template_with("e2b", {"template": {"timeout_seconds": null}})
	fx.has(fs, "SBX-TMO-001", "ConfigurationError", "timeout_seconds")
	inp := fx.template_input("e2b")
	fs2 := timeouts.deny with input as inp with input.template as object.remove(inp.template, ["timeout_seconds"])
	fx.has(fs2, "SBX-TMO-001", "ConfigurationError", "timeout_seconds")
}

test_positive_timeout_accepted if {
	fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": 120}})
	count(fs) == 0
}

test_tenant_and_spec_timeouts_checked if {
	fs := timeouts.deny with input as fx.spec_input("vercel", {}) with input.template.timeout_seconds as 0
	fx.has(fs, "SBX-TMO-001", "ConfigurationError", "timeout_seconds")
}

# --- SBX-TMO-002: lifetime -------------------------------------------------

test_zero_or_negative_lifetime_refused if {
	every value in [0, -1] {
		fs := timeouts.deny with input as fx.template_with("modal", {"template": {"lifetime_seconds": value}})
		fx.has(fs, "SBX-TMO-002", "ConfigurationError", "lifetime_seconds")
	}
}

test_positive_lifetime_accepted if {
	fs := timeouts.deny with input as fx.template_with("modal", {"template": {"lifetime_seconds": 3600}})
	count(fs) == 0
}

test_no_template_no_timeout_findings if {
	count(timeouts.deny) == 0 with input as fx.network_input("docker/runc", {})
	count(timeouts.deny) == 0 with input as fx.resources_only({})
}

# --- SBX-TMO-003: lifetime above the backend maximum -----------------------

test_lifetime_above_backend_maximum_refused if {
	fs := timeouts.deny with input as fx.template_with("vercel", {"template": {"lifetime_seconds": 18001, "timeout_seconds": 300}})
	fx.has(fs, "SBX-TMO-003", "CapabilityNotSupported", "lifetime_seconds")
	fx.mentions(fs, "SBX-TMO-003", "18000")
	fx.fix_mentions(fs, "SBX-TMO-003", "18000")
}

test_lifetime_at_backend_maximum_accepted if {
	every key in {"e2b", "modal", "vercel"} {
		limit := data.capabilities.backends[key].max_lifetime_seconds
		fs := timeouts.deny with input as fx.template_with(key, {"template": {"lifetime_seconds": limit}})
		count(fs) == 0
	}
}

test_no_maximum_no_refusal if {
	every key in {"docker/runc", "daytona"} {
		fs := timeouts.deny with input as fx.template_with(key, {"template": {"lifetime_seconds": 604800}})
		count(fs) == 0
	}
}

# --- SBX-TMO-004: call timeout longer than the lifetime --------------------

test_timeout_longer_than_lifetime_refused if {
	fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": 600}})
	fx.has(fs, "SBX-TMO-004", "ConfigurationError", "timeout_seconds")
	fx.mentions(fs, "SBX-TMO-004", "600")
	fx.mentions(fs, "SBX-TMO-004", "300")
}

test_timeout_within_lifetime_accepted if {
	every t in [[300, 300], [60, 3600]] {
		fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": t[0], "lifetime_seconds": t[1]}})
		count(fs) == 0
	}
}

test_invalid_values_not_compared if {
	fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": 600, "lifetime_seconds": 0}})
	fx.lacks(fs, "SBX-TMO-004")
	fx.has(fs, "SBX-TMO-002", "ConfigurationError", "lifetime_seconds")
}

# --- SBX-TMO-001: call timeout above the ceiling ---------------------------

ceiling := data.capabilities.max_timeout_seconds

test_timeout_above_ceiling_refused if {
	every value in [ceiling + 1, 10000000000] {
		fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": value, "lifetime_seconds": ceiling}})
		fx.has(fs, "SBX-TMO-001", "ConfigurationError", "timeout_seconds")
		fx.mentions(fs, "SBX-TMO-001", sprintf("%v", [value]))
		fx.mentions(fs, "SBX-TMO-001", sprintf("%v seconds (30 days)", [ceiling]))
		fx.fix_mentions(fs, "SBX-TMO-001", sprintf("%v", [ceiling]))
		fx.lacks(fs, "SBX-TMO-002")
	}
}

test_timeout_at_ceiling_accepted if {
	fs := timeouts.deny with input as fx.template_with("docker/runc", {"template": {"timeout_seconds": ceiling, "lifetime_seconds": ceiling}})
	count(fs) == 0
}

# --- SBX-TMO-002: lifetime above the ceiling -------------------------------

test_lifetime_above_ceiling_refused if {
	# 18446744074 s is 2^64 ns and a little: as a duration it wraps to 290 ms
	every value in [ceiling + 1, 10000000000, 18446744074] {
		every key in {"docker/runc", "docker/runsc", "daytona"} {
			fs := timeouts.deny with input as fx.template_with(key, {"template": {"lifetime_seconds": value}})
			fx.has(fs, "SBX-TMO-002", "ConfigurationError", "lifetime_seconds")
			fx.mentions(fs, "SBX-TMO-002", sprintf("%v", [value]))
			fx.fix_mentions(fs, "SBX-TMO-002", sprintf("%v", [ceiling]))
			fx.lacks(fs, "SBX-TMO-001")
		}
	}
}

test_lifetime_above_ceiling_refused_beside_backend_maximum if {
	fs := timeouts.deny with input as fx.template_with("e2b", {"template": {"lifetime_seconds": ceiling + 1}})
	fx.has(fs, "SBX-TMO-002", "ConfigurationError", "lifetime_seconds")
	fx.has(fs, "SBX-TMO-003", "CapabilityNotSupported", "lifetime_seconds")
}

test_lifetime_at_ceiling_accepted if {
	every key in {"docker/runc", "daytona"} {
		fs := timeouts.deny with input as fx.template_with(key, {"template": {"lifetime_seconds": ceiling}})
		count(fs) == 0
	}
}

test_timeout_and_lifetime_above_ceiling_both_refused if {
	fs := timeouts.deny with input as fx.spec_input("docker/runc", {}) with input.template as object.union(fx.base_template("docker/runc"), {"timeout_seconds": 10000000000, "lifetime_seconds": 10000000000})
	fx.ids(fs) == {"SBX-TMO-001", "SBX-TMO-002"}
}

# --- SBX-TMO-005: lifetime enforced only as an idle limit -------------------

test_idle_lifetime_warned_on_daytona if {
	ws := timeouts.warn with input as fx.template_with("daytona", {"template": {"lifetime_seconds": 90}})
	fx.has(ws, "SBX-TMO-005", "IdleLifetimeWarning", "lifetime_seconds")
	fx.mentions(ws, "SBX-TMO-005", "daytona")
	fx.mentions(ws, "SBX-TMO-005", "idle limit of 2 minutes")
	fx.has(timeouts.warn, "SBX-TMO-005", "IdleLifetimeWarning", "lifetime_seconds") with input as fx.tenant_input("daytona", {})
	fx.has(timeouts.warn, "SBX-TMO-005", "IdleLifetimeWarning", "lifetime_seconds") with input as fx.spec_input("daytona", {})
}

# A lifetime unknown until apply still warns, without a number of minutes.
test_idle_lifetime_warned_when_unknown if {
	ws := timeouts.warn with input as fx.template_with("daytona", {"template": {"lifetime_seconds": null}})
	fx.has(ws, "SBX-TMO-005", "IdleLifetimeWarning", "lifetime_seconds")
	fx.mentions(ws, "SBX-TMO-005", "idle limit of (unknown) minutes")
}

test_absolute_lifetime_not_warned if {
	every key in fx.backend_keys - {"daytona"} {
		ws := timeouts.warn with input as fx.template_input(key)
		fx.lacks(ws, "SBX-TMO-005")
	}
	count(timeouts.warn) == 0 with input as fx.resources_input("daytona", {})
}
