package sandboxio.brokering_test

import data.sandboxio.brokering
import data.sandboxio.fixtures as fx

gateway := "docker/runc+gateway"

# A brokered secret as the issue's example writes it, on the gateway with
# its host on the allow list: accepted by every rule of the bundle.
good := {"GITHUB_TOKEN": {"hosts": ["api.github.com"], "header": "Authorization", "format": "Bearer %s"}}

brokered(key, secrets, allow) := fx.template_with(key, {
	"template": {"brokered_secrets": secrets},
	"network": {"egress": "deny", "allow": allow},
})

on_gateway(secrets) := brokered(gateway, secrets, ["api.github.com", "*.example.com"])

with_secret(patch) := on_gateway({"GITHUB_TOKEN": object.union(good.GITHUB_TOKEN, patch)})

test_brokered_secret_accepted_on_the_gateway if {
	count(fx.all_deny) == 0 with input as on_gateway(good)
	count(fx.all_deny) == 0 with input as fx.spec_input(gateway, {}) with input.template.brokered_secrets as good
		with input.network.allow as ["api.github.com"]
}

# --- SBX-SEC-005: no broker ---------------------------------------------------

test_brokered_secret_refused_where_no_broker_runs if {
	every key in fx.backend_keys - {gateway} {
		fs := brokering.deny with input as brokered(key, good, [])
		fx.has(fs, "SBX-SEC-005", "CapabilityNotSupported", "brokered_secrets")
		fx.fix_mentions(fs, "SBX-SEC-005", "docker://?egress=gateway")
		fx.mentions(fs, "SBX-SEC-005", data.capabilities.backends[key].network.secret_broker_note)
	}
}

test_no_brokered_secret_accepted_everywhere if {
	every key in fx.backend_keys {
		fx.lacks(brokering.deny, "SBX-SEC-005") with input as fx.template_input(key)
	}
}

# --- SBX-SEC-006: host that is not a name ----------------------------------

test_host_not_a_name_refused if {
	every h in ["198.51.100.7", "198.51.100.0/24", "api.github.com:443", "*.example.com", "https://api.github.com", "localhost", ""] {
		fs := brokering.deny with input as with_secret({"hosts": ["api.github.com", h]})
		fx.has(fs, "SBX-SEC-006", "ConfigurationError", "brokered_secrets")
		fx.mentions(fs, "SBX-SEC-006", "hosts[1]")
		fx.count_of(fs, "SBX-SEC-006") == 1
	}
}

test_no_hosts_refused if {
	fs := brokering.deny with input as with_secret({"hosts": []})
	fx.has(fs, "SBX-SEC-006", "ConfigurationError", "brokered_secrets")
	fx.mentions(fs, "SBX-SEC-006", "no hosts")
}

test_host_names_accepted if {
	fx.lacks(brokering.deny, "SBX-SEC-006") with input as with_secret({"hosts": ["api.github.com", "uploads.github.com"]})
}

# --- SBX-SEC-007: host not on the allow list ---------------------------------

test_host_off_the_allow_list_refused if {
	fs := brokering.deny with input as with_secret({"hosts": ["api.github.com", "evil.example.org", "example.com"]})
	fx.has(fs, "SBX-SEC-007", "ConfigurationError", "brokered_secrets")
	fx.mentions(fs, "SBX-SEC-007", `"evil.example.org"`)

	# *.example.com covers names below example.com, not example.com itself
	fx.mentions(fs, "SBX-SEC-007", `"example.com"`)
	fx.count_of(fs, "SBX-SEC-007") == 2
}

test_host_covered_by_name_or_wildcard_accepted if {
	fs := brokering.deny with input as with_secret({"hosts": ["API.GitHub.com", "a.example.com", "b.c.example.com"]})
	fx.lacks(fs, "SBX-SEC-007")
}

# --- SBX-SEC-008: also in secret_names or env --------------------------------

test_name_also_in_secret_names_or_env_refused if {
	inp := object.union(on_gateway(good), {"template": {"secret_names": ["GITHUB_TOKEN"], "env": {"GITHUB_TOKEN": "x"}}})
	fs := brokering.deny with input as inp
	fx.has(fs, "SBX-SEC-008", "ConfigurationError", "brokered_secrets")
	fx.mentions(fs, "SBX-SEC-008", "secret_names")
	fx.mentions(fs, "SBX-SEC-008", "env")
	fx.count_of(fs, "SBX-SEC-008") == 2
	not fx.leaks(fs, `"x"`)
}

test_name_apart_from_secret_names_and_env_accepted if {
	fx.lacks(brokering.deny, "SBX-SEC-008") with input as on_gateway(good)
}

# --- SBX-SEC-009: header --------------------------------------------------------

test_header_not_a_field_name_refused if {
	every h in ["", "Authorization: Bearer", "X Api Key", "X-Key\r\nHost", ":authority", concat("", ["h" | some _ in numbers.range(1, 257)])] {
		fs := brokering.deny with input as with_secret({"header": h})
		fx.has(fs, "SBX-SEC-009", "ConfigurationError", "brokered_secrets")
	}
}

test_header_that_must_not_be_brokered_refused if {
	every h in ["Host", "content-length", "Transfer-Encoding", "CONNECTION", "Upgrade", "TE", "Proxy-Authorization"] {
		fs := brokering.deny with input as with_secret({"header": h})
		fx.has(fs, "SBX-SEC-009", "ConfigurationError", "brokered_secrets")
		fx.mentions(fs, "SBX-SEC-009", sprintf("%q", [h]))
	}
}

test_header_field_names_accepted if {
	every h in ["Authorization", "X-Api-Key", "x-goog-api-key", "Cookie", "X_Weird!#$%&'*+.^_`|~"] {
		fx.lacks(brokering.deny, "SBX-SEC-009") with input as with_secret({"header": h})
	}
}

# --- SBX-SEC-010: format --------------------------------------------------------

test_format_without_exactly_one_value_refused if {
	every c in [
		["Bearer", "no %s"],
		["%s%s", "more than once"],
		["Bearer %d %s", "other than"],
		["100%% %s", "other than"],
		["Bearer %s\r\nX-Leak: %s", "line break"],
		["Bearer\n%s", "line break"],
		["\u0000%s", "control"],
		[concat("", ["%s", concat("", ["a" | some _ in numbers.range(1, 1024)])]), "1024"],
	] {
		fs := brokering.deny with input as with_secret({"format": c[0]})
		fx.has(fs, "SBX-SEC-010", "ConfigurationError", "brokered_secrets")
		fx.mentions(fs, "SBX-SEC-010", c[1])
	}
}

test_formats_with_one_value_accepted if {
	every fmt in ["%s", "Bearer %s", "token=%s; path=/", "Basic %s\t"] {
		fx.lacks(brokering.deny, "SBX-SEC-010") with input as with_secret({"format": fmt})
	}
}

# --- SBX-SEC-011: name --------------------------------------------------------------

test_name_not_a_variable_name_refused if {
	every name in ["", "1TOKEN", "OPENAI-KEY", "sk-proj-Zq3vN8wLk2Xr7tY1pQ9sM4bH6", concat("", ["K" | some _ in numbers.range(1, 129)])] {
		fs := brokering.deny with input as on_gateway({name: good.GITHUB_TOKEN, "A_FIRST": good.GITHUB_TOKEN})
		fx.has(fs, "SBX-SEC-011", "ConfigurationError", "brokered_secrets")
		fx.count_of(fs, "SBX-SEC-011") == 1
	}
}

test_name_not_repeated_by_other_rules if {
	secret := "sk-proj-Zq3vN8wLk2Xr7tY1pQ9sM4bH6"
	fs := brokering.deny with input as on_gateway({secret: {"hosts": ["evil.example.org"], "header": "Host", "format": "x"}})
	fx.count_of(fs, "SBX-SEC-011") == 1
	fx.mentions(fs, "SBX-SEC-011", "number 1")
	fx.has(fs, "SBX-SEC-007", "ConfigurationError", "brokered_secrets")
	fx.has(fs, "SBX-SEC-009", "ConfigurationError", "brokered_secrets")
	fx.has(fs, "SBX-SEC-010", "ConfigurationError", "brokered_secrets")
	not fx.leaks(fs, secret)
}

test_variable_names_accepted if {
	fx.lacks(brokering.deny, "SBX-SEC-011") with input as on_gateway({"_X": good.GITHUB_TOKEN, "OPENAI_API_KEY": good.GITHUB_TOKEN})
}

# --- SBX-SEC-012: warm pool -----------------------------------------------------------

test_brokered_secret_with_a_warm_pool_refused if {
	fs := brokering.deny with input as on_gateway(good) with input.template.warm_pool as {"size": 2, "max_idle_seconds": 600}
	fx.has(fs, "SBX-SEC-012", "CapabilityNotSupported", "warm_pool")
	fx.mentions(fs, "SBX-SEC-012", "1 brokered secret(s)")
}

test_warm_pool_without_brokered_secrets_accepted if {
	fx.lacks(brokering.deny, "SBX-SEC-012") with input as fx.template_input(gateway) with input.template.warm_pool as {"size": 2, "max_idle_seconds": 600}
	fx.lacks(brokering.deny, "SBX-SEC-012") with input as on_gateway(good)
}
