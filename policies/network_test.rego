package sandboxio.network_test

import data.sandboxio.fixtures as fx
import data.sandboxio.lib
import data.sandboxio.network

# Plain Docker (docker://) on every runtime: no allow list there.
docker_runtimes := {key | some key, d in data.capabilities.backends; d.backend == "docker"; not d.variant}

allowlist_keys := {key | some key, d in data.capabilities.backends; d.network.allowlist}

# --- SBX-NET-001: egress = "learn" ----------------------------------------

test_learn_refused if {
	fs := network.deny with input as fx.network_input("docker/runsc", {"egress": "learn"})
	fx.has(fs, "SBX-NET-001", "CapabilityNotSupported", "network.egress")
	fx.mentions(fs, "SBX-NET-001", "docker/runsc")
	fx.mentions(fs, "SBX-NET-001", "docker with runtime runc")
	fx.lacks(fs, "SBX-NET-002")
}

# Learn only where the backend observes blocked egress: refused on every
# other backend, never degraded to deny.
test_learn_refused_where_not_observed if {
	every key in fx.backend_keys {
		fs := network.deny with input as fx.network_input(key, {"egress": "learn"})
		observes := data.capabilities.backends[key].blocked_egress_reporting
		refused := count([f | some f in fs; f.id == "SBX-NET-001"]) > 0
		observes != refused
	}
}

test_learn_accepted_on_docker_runc_and_warned if {
	fs := network.deny with input as fx.network_input("docker/runc", {"egress": "learn"})
	count(fs) == 0
	ws := network.warn with input as fx.network_input("docker/runc", {"egress": "learn"})
	fx.has(ws, "SBX-NET-012", "EgressLearnWarning", "network.egress")
}

test_learn_without_backend_decided_with_the_template if {
	fs := network.deny with input as fx.network_only({"egress": "learn"})
	fx.lacks(fs, "SBX-NET-001")
}

test_learn_refused_in_template if {
	fs := network.deny with input as fx.template_with("e2b", {"network": {"egress": "learn"}})
	fx.has(fs, "SBX-NET-001", "CapabilityNotSupported", "network.egress")
}

test_learn_accepted_in_docker_template if {
	fs := network.deny with input as fx.template_with("docker/runc", {"network": {"egress": "learn"}})
	fx.lacks(fs, "SBX-NET-001")
}

test_deny_and_allow_not_learn if {
	every egress in ["deny", "allow"] {
		fs := network.deny with input as fx.network_input("docker/runc", {"egress": egress})
		fx.lacks(fs, "SBX-NET-001")
	}
}

# --- SBX-NET-002: unknown egress mode -------------------------------------

test_unknown_egress_refused if {
	fs := network.deny with input as fx.network_input("docker/runc", {"egress": "block"})
	fx.has(fs, "SBX-NET-002", "ConfigurationError", "network.egress")
	fx.mentions(fs, "SBX-NET-002", `"block"`)
}

test_empty_and_wrong_case_egress_refused if {
	every egress in ["", "DENY", "Allow", 0, null] {
		fs := network.deny with input as fx.network_only({"egress": egress})
		fx.has(fs, "SBX-NET-002", "ConfigurationError", "network.egress")
	}
}

test_missing_egress_refused if {
	fs := network.deny with input as {"kind": "network_policy", "network": {"allow": []}}
	fx.has(fs, "SBX-NET-002", "ConfigurationError", "network.egress")
	fx.mentions(fs, "SBX-NET-002", "unset")
}

test_long_egress_not_repeated if {
	long := concat("", ["x" | some _ in numbers.range(1, 64)])
	fs := network.deny with input as fx.network_only({"egress": long})
	fx.has(fs, "SBX-NET-002", "ConfigurationError", "network.egress")
	not fx.leaks(fs, long)
}

test_known_egress_accepted if {
	every egress in ["deny", "allow", "learn"] {
		fs := network.deny with input as fx.network_only({"egress": egress})
		fx.lacks(fs, "SBX-NET-002")
	}
}

test_no_network_no_network_findings if {
	count(network.deny) == 0 with input as fx.resources_only({})
	count(network.warn) == 0 with input as fx.resources_only({})
}

# --- SBX-NET-003: allow list on a backend without one ----------------------

test_allow_on_docker_refused if {
	fs := network.deny with input as fx.network_input("docker/runc", {"allow": ["151.101.0.0/16"]})
	fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
	fx.mentions(fs, "SBX-NET-003", "docker/runc")
	fx.mentions(fs, "SBX-NET-003", "Docker has no per-host egress filter")
	fx.mentions(fs, "SBX-NET-003", "e2b, kubernetes, modal and vercel")
	fx.fix_mentions(fs, "SBX-NET-003", "E2B, Modal, Vercel and Kubernetes")
	fx.fix_mentions(fs, "SBX-NET-003", "wheelhouse")

	# a network policy has no template to move: its own backend is the fix
	fx.fix_mentions(fs, "SBX-NET-003", "Set this policy's backend")
	not fx.fix_mentions(fs, "SBX-NET-003", "template to one of")
}

test_allow_on_docker_template_fix_moves_the_template if {
	fs := network.deny with input as fx.template_with("docker/runc", {"network": {"allow": ["151.101.0.0/16"]}})
	fx.fix_mentions(fs, "SBX-NET-003", "Move the template to one of those backends")
	fx.fix_mentions(fs, "SBX-NET-003", "wheelhouse")
}

test_allow_refused_on_every_backend_without_allowlist if {
	every key in fx.backend_keys - allowlist_keys {
		fs := network.deny with input as fx.network_input(key, {"allow": ["pypi.org"]})
		fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
		fx.mentions(fs, "SBX-NET-003", key)
		fx.mentions(fs, "SBX-NET-003", data.capabilities.backends[key].network.allowlist_note)
	}
}

test_allow_refused_on_every_docker_runtime if {
	count(docker_runtimes) >= 3
	every key in docker_runtimes {
		fs := network.deny with input as fx.template_with(key, {"network": {"allow": ["151.101.0.0/16"]}})
		fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
	}
}

test_allow_on_daytona_refused if {
	fs := network.deny with input as fx.template_with("daytona", {"network": {"allow": ["10.0.0.0/8"]}})
	fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
	fx.mentions(fs, "SBX-NET-003", "unverified")
}

test_allow_accepted_where_enforced if {
	allowlist_keys == {"docker/runc+gateway", "e2b", "kubernetes", "modal", "vercel"}
	every key in allowlist_keys {
		fs := network.deny with input as fx.network_input(key, {"allow": ["151.101.0.0/16"]})
		fx.lacks(fs, "SBX-NET-003")
	}
}

test_empty_allow_accepted_on_docker if {
	fs := network.deny with input as fx.template_input("docker/runc")
	count(fs) == 0
}

test_allow_without_backend_not_judged if {
	fs := network.deny with input as fx.network_only({"allow": ["151.101.0.0/16"]})
	count(fs) == 0
}

test_allow_refused_when_descriptor_says_no_allowlist if {
	caps := object.union(data.capabilities.backends.e2b, {"network": {"allowlist": false}})
	fs := network.deny with input as fx.with_caps(fx.network_input("e2b", {"allow": ["1.2.3.4"]}), caps)
	fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
}

# --- SBX-NET-004: allow list with open egress -----------------------------

test_allow_list_with_open_egress_refused if {
	fs := network.deny with input as fx.network_input("e2b", {"egress": "allow", "allow": ["pypi.org"]})
	fx.has(fs, "SBX-NET-004", "ConfigurationError", "network.allow")
}

test_allow_list_with_deny_accepted if {
	fs := network.deny with input as fx.network_input("e2b", {"egress": "deny", "allow": ["pypi.org"]})
	count(fs) == 0
}

test_open_egress_without_list_accepted if {
	fs := network.deny with input as fx.network_input("docker/runc", {"egress": "allow"})
	count(fs) == 0
}

# --- SBX-NET-005: entry kind the backend does not take ---------------------

test_domain_on_modal_refused if {
	fs := network.deny with input as fx.network_input("modal", {"allow": ["151.101.0.0/16", "pypi.org"]})
	fx.has(fs, "SBX-NET-005", "CapabilityNotSupported", "network.allow")
	fx.count_of(fs, "SBX-NET-005") == 1
	fx.mentions(fs, "SBX-NET-005", "allow[1]")
	fx.mentions(fs, "SBX-NET-005", "modal")
	fx.mentions(fs, "SBX-NET-005", "cidr and ip")
}

test_wildcard_domain_on_modal_refused if {
	fs := network.deny with input as fx.network_input("modal", {"allow": ["*.pythonhosted.org"]})
	fx.has(fs, "SBX-NET-005", "CapabilityNotSupported", "network.allow")
}

test_cidr_and_ip_on_modal_accepted if {
	fs := network.deny with input as fx.network_input("modal", {"allow": ["151.101.0.0/16", "1.2.3.4", "2a04:4e42::/32", "2a04:4e42::223"]})
	count(fs) == 0
}

test_domains_where_taken_accepted if {
	every key in {"e2b", "vercel"} {
		fs := network.deny with input as fx.network_input(key, {"allow": ["pypi.org", "*.pythonhosted.org", "10.0.0.0/8", "1.2.3.4"]})
		count(fs) == 0
	}
}

test_entry_kind_refused_when_descriptor_has_no_kinds if {
	caps := object.union(data.capabilities.backends.vercel, {"network": {"allow_kinds": []}})
	fs := network.deny with input as fx.with_caps(fx.network_input("vercel", {"allow": ["1.2.3.4"]}), caps)
	fx.has(fs, "SBX-NET-005", "CapabilityNotSupported", "network.allow")
}

# --- SBX-NET-006: entry that is not an address -----------------------------

invalid_entries := [
	"https://pypi.org/simple",
	"pypi.org:443",
	"not an address",
	"300.1.1.1",
	"10.0.0.0/33",
	"",
	"localhost",
	"*",
	"pypi.org/simple",
	"user:pass@pypi.org",
]

test_invalid_entries_refused if {
	fs := network.deny with input as fx.network_input("e2b", {"allow": invalid_entries})
	fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
	fx.count_of(fs, "SBX-NET-006") == count(invalid_entries)
	every i, _ in invalid_entries {
		fx.mentions(fs, "SBX-NET-006", sprintf("allow[%d]", [i]))
	}
}

test_invalid_entries_not_repeated if {
	fs := network.deny with input as fx.network_input("e2b", {"allow": ["https://user:hunter2@pypi.org"]})
	fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
	fx.mentions(fs, "SBX-NET-006", "URL")
	not fx.leaks(fs, "hunter2")
}

test_entry_with_port_hinted if {
	fs := network.deny with input as fx.network_input("e2b", {"allow": ["pypi.org:443"]})
	fx.mentions(fs, "SBX-NET-006", "port")
}

test_non_string_entry_refused if {
	fs := network.deny with input as fx.network_only({"allow": [42]})
	fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
	fx.mentions(fs, "SBX-NET-006", "number")
}

test_invalid_entry_refused_without_backend if {
	fs := network.deny with input as fx.network_only({"allow": ["http://x"]})
	fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
}

test_valid_entries_accepted if {
	fs := network.deny with input as fx.network_only({"allow": [
		"10.0.0.0/8", "151.101.0.0/16", "1.2.3.4", "1.2.3.4/32",
		"2001:db8::/32", "2001:db8::1", "pypi.org", "files.pythonhosted.org",
		"*.pythonhosted.org", "xn--e1afmkfd.xn--p1ai",
	]})
	count(fs) == 0
}

# Each malformed entry gets the hint that says what is wrong, without the
# entry itself.
malformed_hints := {
	"010.0.0.1": "if decimal was meant, write 10.0.0.1",
	"010.001.2.3/08": "if decimal was meant, write 10.0.0.0/8",
	"010.0.0.1/32": "if decimal was meant, write 10.0.0.1/32",
	"010.1.2.3/8": "if decimal was meant, write 10.0.0.0/8",
	"010.0.0.1/40": "write each number in decimal",
	"300.1.1.1": "four numbers from 0 to 255",
	"10.0.0.0/33": "prefix length at most 32",
	"1.2.3": "four numbers from 0 to 255",
	"*": "wildcard is allowed only as one leading",
	"*.com": "wildcard is allowed only as one leading",
	"a.*.b.com": "wildcard is allowed only as one leading",
	"*foo.com": "wildcard is allowed only as one leading",
	"**.x.com": "wildcard is allowed only as one leading",
	"*.*.x.com": "wildcard is allowed only as one leading",
	"pypi.org.": "ends in a dot",
	"*.pypi.org.": "wildcard is allowed only as one leading",
	concat("", [concat(".", ["abcdefghij" | some _ in numbers.range(1, 23)]), ".org"]): "longer than 253 characters",
	concat("", [concat("", ["x" | some _ in numbers.range(1, 64)]), ".org"]): "longer than 63 characters",
	"a..org": "a label is empty",
	".pypi.org": "a label is empty",
	"localhost": "at least two labels",
	"example.123": "last label starts with a digit",
	"example.4ex": "last label starts with a digit",
	"-x.org": "starts or ends with a hyphen",
	"x-.org": "starts or ends with a hyphen",
	"x_y.org": "only letters, digits, hyphens and dots",
	"not an address": "only letters, digits, hyphens and dots",
	"pypi.org/8": "only letters, digits, hyphens and dots",
	"2001:db8::/129": "IPv6",
	"::g": "IPv6",
	"": "it is empty",
}

test_malformed_entries_hinted if {
	every entry, hint in malformed_hints {
		fs := network.deny with input as fx.network_input("e2b", {"allow": ["pypi.org", entry]})
		fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
		fx.count_of(fs, "SBX-NET-006") == 1
		fx.mentions(fs, "SBX-NET-006", "allow[1]")
		fx.mentions(fs, "SBX-NET-006", hint)
	}
}

test_malformed_entries_not_repeated if {
	every entry, _ in malformed_hints {
		fs := network.deny with input as fx.network_input("e2b", {"allow": [entry]})
		fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
		short_or_not_leaked(fs, entry)
	}
}

short_or_not_leaked(_, entry) if count(entry) < 6

short_or_not_leaked(fs, entry) if not fx.leaks(fs, entry)

test_domains_at_their_limits_accepted if {
	label63 := concat("", ["x" | some _ in numbers.range(1, 63)])
	long := concat(".", [label63, label63, label63, concat("", ["y" | some _ in numbers.range(1, 57)]), "org"])
	count(long) == 253
	fs := network.deny with input as fx.network_input("e2b", {"allow": [
		"*.pythonhosted.org", "*.co.uk", sprintf("%s.org", [label63]), long,
		"a.b.c.d.example.com", "x1.io", "xn--bcher-kva.example",
	]})
	count(fs) == 0
}

# --- SBX-NET-007: open egress warning --------------------------------------

test_open_egress_warned if {
	ws := network.warn with input as fx.template_with("docker/runc", {"network": {"egress": "allow"}})
	fx.has(ws, "SBX-NET-007", "OpenEgressWarning", "network.egress")
}

test_open_egress_warned_without_backend if {
	ws := network.warn with input as fx.network_only({"egress": "allow"})
	fx.has(ws, "SBX-NET-007", "OpenEgressWarning", "network.egress")
}

test_deny_egress_not_warned if {
	ws := network.warn with input as fx.template_input("docker/runc")
	count(ws) == 0
}

# --- SBX-NET-008: backend that cannot deny egress --------------------------

test_backend_without_deny_refused if {
	caps := object.union(data.capabilities.backends["docker/runc"], {"network": {"deny": false}})
	fs := network.deny with input as fx.with_caps(fx.template_input("docker/runc"), caps)
	fx.has(fs, "SBX-NET-008", "CapabilityNotSupported", "network.egress")
}

test_backend_without_deny_accepts_explicit_open_egress if {
	caps := object.union(data.capabilities.backends["docker/runc"], {"network": {"deny": false}})
	fs := network.deny with input as fx.with_caps(fx.template_with("docker/runc", {"network": {"egress": "allow"}}), caps)
	fx.lacks(fs, "SBX-NET-008")
}

# Every backend denies egress (Kubernetes where its network lock is proven
# on the cluster at apply; the data says so and the live check shows it).
test_every_backend_denies_egress if {
	every key in fx.backend_keys {
		fs := network.deny with input as fx.template_input(key)
		fx.lacks(fs, "SBX-NET-008")
	}
}

# --- SBX-NET-005 on an IPv4-only backend (Kubernetes) ----------------------

test_ipv6_entry_refused_on_ipv4_only_backend if {
	every entry in ["2001:db8::/32", "2001:db8::1"] {
		fs := network.deny with input as fx.network_input("kubernetes", {"allow": ["10.0.0.0/8", entry]})
		fx.has(fs, "SBX-NET-005", "CapabilityNotSupported", "network.allow")
		fx.count_of(fs, "SBX-NET-005") == 1
		fx.mentions(fs, "SBX-NET-005", "allow[1]")
		fx.mentions(fs, "SBX-NET-005", "(IPv6)")
	}
}

test_ipv4_entries_and_no_domain_on_kubernetes if {
	fs := network.deny with input as fx.network_input("kubernetes", {"allow": ["10.0.0.0/8", "192.0.2.7"]})
	fx.lacks(fs, "SBX-NET-005")
	fd := network.deny with input as fx.network_input("kubernetes", {"allow": ["pypi.org"]})
	fx.has(fd, "SBX-NET-005", "CapabilityNotSupported", "network.allow")
	fx.mentions(fd, "SBX-NET-005", "domain entry")
}

# An IPv6 entry stays a plain kind on a backend that routes IPv6 (Modal).
test_ipv6_entry_taken_where_not_ipv4_only if {
	fs := network.deny with input as fx.network_input("modal", {"allow": ["2001:db8::/32"]})
	fx.lacks(fs, "SBX-NET-005")
}

# --- SBX-NET-009: allow list that admits everything ------------------------

test_allow_everything_refused if {
	every entry in ["0.0.0.0/0", "::/0"] {
		fs := network.deny with input as fx.network_input("e2b", {"allow": ["pypi.org", entry]})
		fx.has(fs, "SBX-NET-009", "ConfigurationError", "network.allow")
		fx.mentions(fs, "SBX-NET-009", "allow[1]")
		fx.fix_mentions(fs, "SBX-NET-009", `egress = "allow"`)
		fx.fix_mentions(fs, "SBX-NET-009", "warned")
	}
}

# The lists of issue 8: each passed as a deny policy on e2b, because the rule
# compared the text's ending with "/0".
open_lists := [
	["0.0.0.0/00", "::/00"],
	["0.0.0.0/1", "128.0.0.0/1"],
	["::/1", "8000::/1"],
	["::ffff:0:0/96"],
	["0.0.0.0/1", "::ffff:128.0.0.0/97"],
	["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/3", "224.0.0.0/4", "240.0.0.0/4"],
	["::/80"],
	["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2", "pypi.org"],
]

test_lists_that_merge_to_everything_refused if {
	every allow in open_lists {
		every key in allowlist_keys {
			fs := network.deny with input as fx.network_input(key, {"allow": allow})
			fx.has(fs, "SBX-NET-009", "ConfigurationError", "network.allow")
			fx.count_of(fs, "SBX-NET-009") == 1
			fx.mentions(fs, "SBX-NET-009", "open egress")
		}
	}
}

test_open_list_refused_in_template_and_spec if {
	fs := network.deny with input as fx.template_with("vercel", {"network": {"egress": "deny", "allow": ["0.0.0.0/1", "128.0.0.0/1"]}})
	fx.has(fs, "SBX-NET-009", "ConfigurationError", "network.allow")
	gs := network.deny with input as object.union(fx.spec_input("modal", {"tenant_id": "acme", "session_id": "s-1"}), {"network": {"egress": "deny", "allow": ["0.0.0.0/1", "128.0.0.0/1"]}})
	fx.has(gs, "SBX-NET-009", "ConfigurationError", "network.allow")
}

test_open_list_names_entries_that_merge if {
	fs := network.deny with input as fx.network_input("e2b", {"allow": ["10.0.0.0/8", "0.0.0.0/1", "128.0.0.0/1"]})
	fx.mentions(fs, "SBX-NET-009", `every IPv4 address is admitted by allow[0] "10.0.0.0/8", allow[1] "0.0.0.0/1" and allow[2] "128.0.0.0/1" together (they merge to 0.0.0.0/0)`)
	gs := network.deny with input as fx.network_input("e2b", {"allow": ["::/1", "8000::/1"]})
	fx.mentions(gs, "SBX-NET-009", `every IPv4 address is admitted by allow[0] "::/1"`)
	fx.mentions(gs, "SBX-NET-009", "every IPv4-mapped address")
	fx.mentions(gs, "SBX-NET-009", `every IPv6 address is admitted by allow[0] "::/1" and allow[1] "8000::/1" together (they merge to ::/0)`)
}

test_open_list_names_entry_that_opens_alone if {
	fs := network.deny with input as fx.network_input("e2b", {"allow": ["0.0.0.0/1", "128.0.0.0/1", "0.0.0.0/00"]})
	fx.mentions(fs, "SBX-NET-009", `every IPv4 address is admitted by allow[2] "0.0.0.0/00", so this allow list is open egress in disguise; open egress is egress = "allow", explicit and warned`)
	not fx.mentions(fs, "SBX-NET-009", "together")
	not fx.mentions(fs, "SBX-NET-009", "IPv4-mapped")
}

# Whatever the egress mode but "allow", where SBX-NET-004 refuses any list.
test_open_list_refused_whatever_the_mode if {
	every egress in ["deny", "learn", "block", null] {
		fs := network.deny with input as fx.network_input("e2b", {"egress": egress, "allow": ["0.0.0.0/1", "128.0.0.0/1"]})
		fx.has(fs, "SBX-NET-009", "ConfigurationError", "network.allow")
	}
	gs := network.deny with input as {"kind": "network_policy", "network": {"allow": ["0.0.0.0/0"]}}
	fx.has(gs, "SBX-NET-009", "ConfigurationError", "network.allow")
}

test_open_list_with_open_egress_left_to_net_004 if {
	fs := network.deny with input as fx.network_input("e2b", {"egress": "allow", "allow": ["0.0.0.0/0"]})
	fx.lacks(fs, "SBX-NET-009")
	fx.has(fs, "SBX-NET-004", "ConfigurationError", "network.allow")
}

# Where the backend cannot enforce a list at all, SBX-NET-003 refuses the
# whole list, and the entries are not judged one by one.
test_entries_of_a_list_the_backend_cannot_enforce_left_to_net_003 if {
	every key in docker_runtimes {
		fs := network.deny with input as fx.network_input(key, {"allow": ["0.0.0.0/0", "10.1.2.3/8"]})
		fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
		fx.lacks(fs, "SBX-NET-009")
		fx.lacks(fs, "SBX-NET-011")
	}
	gs := network.deny with input as fx.network_input("e2b", {"allow": ["0.0.0.0/0", "10.1.2.3/8"]})
	fx.lacks(gs, "SBX-NET-003")
	fx.has(gs, "SBX-NET-009", "ConfigurationError", "network.allow")
	fx.has(gs, "SBX-NET-011", "ConfigurationError", "network.allow")
}

test_narrow_blocks_accepted if {
	every allow in [
		["0.0.0.0/8", "10.0.0.0/8", "2001:db8::/32"],
		["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/3"],
		["8000::/1", "::ffff:10.0.0.0/104"],
		["::/96", "::fffe:0:0/96", "2001:db8::/32", "1.2.3.4"],
	] {
		fs := network.deny with input as fx.network_input("e2b", {"allow": allow})
		fx.lacks(fs, "SBX-NET-009")
	}
}

# --- SBX-NET-010: open egress on a backend that cannot give it -------------

test_open_egress_on_runsc_refused if {
	fs := network.deny with input as fx.template_with("docker/runsc", {"network": {"egress": "allow"}})
	fx.has(fs, "SBX-NET-010", "CapabilityNotSupported", "network.egress")
	fx.mentions(fs, "SBX-NET-010", "docker/runsc")
	fx.mentions(fs, "SBX-NET-010", "docker with runtime runc")
	fx.fix_mentions(fs, "SBX-NET-010", "runc")
	fx.count_of(fs, "SBX-NET-010") == 1
}

test_open_egress_policy_on_runsc_refused if {
	fs := network.deny with input as fx.network_input("docker/runsc", {"egress": "allow"})
	fx.has(fs, "SBX-NET-010", "CapabilityNotSupported", "network.egress")
}

test_denied_egress_on_runsc_accepted if {
	fs := network.deny with input as fx.template_input("docker/runsc")
	fx.lacks(fs, "SBX-NET-010")
}

test_open_egress_where_given_accepted if {
	giving := {key | some key in fx.backend_keys; data.capabilities.backends[key].network.open_egress}
	count(giving) > 1
	every key in giving {
		fs := network.deny with input as fx.template_with(key, {"network": {"egress": "allow"}})
		fx.lacks(fs, "SBX-NET-010")
	}
}

test_open_egress_without_description_not_refused_here if {
	fs := network.deny with input as fx.network_only({"egress": "allow"})
	fx.lacks(fs, "SBX-NET-010")
}

test_backend_without_open_egress_refused if {
	caps := object.union(data.capabilities.backends.e2b, {"network": {"open_egress": false}})
	fs := network.deny with input as fx.with_caps(fx.template_with("e2b", {"network": {"egress": "allow"}}), caps)
	fx.has(fs, "SBX-NET-010", "CapabilityNotSupported", "network.egress")
	fx.mentions(fs, "SBX-NET-010", "allow_internet_access=false")
}

# --- SBX-NET-011: address not in canonical form ---------------------------

noncanonical := {
	"0.0.0.0/00": ["0.0.0.0/0", "leading zero"],
	"::/00": ["::/0", "leading zero"],
	"10.0.0.0/08": ["10.0.0.0/8", "leading zero"],
	"10.1.2.3/8": ["10.0.0.0/8", "host bits are not zero"],
	"151.101.1.1/16": ["151.101.0.0/16", "host bits are not zero"],
	"2001:db8::1/32": ["2001:db8::/32", "host bits are not zero"],
	"2001:DB8::/32": ["2001:db8::/32", "IPv6 is written in lowercase"],
	"2001:0db8:0000:0000::/32": ["2001:db8::/32", "IPv6 is written in lowercase"],
	"2001:DB8::1": ["2001:db8::1", "IPv6 is written in lowercase"],
	"2001:db8:0:0:0:0:0:1": ["2001:db8::1", "IPv6 is written in lowercase"],
	"::ffff:10.0.0.0/104": ["10.0.0.0/8", "IPv4-mapped IPv6"],
	"::ffff:1.2.3.4": ["1.2.3.4", "IPv4-mapped IPv6"],
	"::FFFF:0A00:0001": ["10.0.0.1", "IPv4-mapped IPv6"],
}

test_noncanonical_refused_with_canonical_form if {
	every entry, want in noncanonical {
		fs := network.deny with input as fx.network_input("modal", {"allow": ["10.0.0.0/8", entry]})
		fx.has(fs, "SBX-NET-011", "ConfigurationError", "network.allow")
		fx.count_of(fs, "SBX-NET-011") == 1
		fx.mentions(fs, "SBX-NET-011", sprintf("allow[1] %q", [entry]))
		fx.mentions(fs, "SBX-NET-011", want[1])
		fx.fix_mentions(fs, "SBX-NET-011", sprintf("Write allow[1] as %q.", [want[0]]))
	}
}

test_noncanonical_refused_without_backend if {
	fs := network.deny with input as fx.network_only({"allow": ["10.1.2.3/8"]})
	fx.has(fs, "SBX-NET-011", "ConfigurationError", "network.allow")
	fx.mentions(fs, "SBX-NET-011", "it admits 10.0.0.0/8")
}

test_canonical_accepted if {
	fs := network.deny with input as fx.network_only({"allow": [
		"10.0.0.0/8", "1.2.3.4", "1.2.3.4/32", "1.0.0.0/8", "2001:db8::/32", "2001:db8::1",
		"2001:db8::1/128", "::2", "fec0::/10", "2001:db8:0:1::/64", "::/96",
		"pypi.org", "PyPI.org",
	]})
	fx.lacks(fs, "SBX-NET-011")
	count(fs) == 0
}

# --- ports on CIDR and IP entries (SBX-NET-013) ---------------------------

port_entries := ["198.51.100.7:443", "198.51.100.0/24:443", "[2001:db8::/32]:443", "[2001:db8::1]:8443"]

test_port_entries_accepted_through_the_gateway if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": port_entries})
	count(fs) == 0
}

test_port_entries_parsed if {
	[lib.address_kind(e) | some e in port_entries] == ["ip", "cidr", "cidr", "ip"]
	[lib.entry_port(e) | some e in port_entries] == ["443", "443", "443", "8443"]
	[lib.ip_block(e) | some e in port_entries] == ["198.51.100.7/32", "198.51.100.0/24", "2001:db8::/32", "2001:db8::1/128"]
	lib.entry_port("2001:db8::1") == ""
}

test_port_entries_refused_where_no_port_filter if {
	keys := {key | some key, d in data.capabilities.backends; d.network.allowlist; not d.network.allow_ports}
	keys == {"e2b", "kubernetes", "modal", "vercel"}
	every key in keys {
		fs := network.deny with input as fx.network_input(key, {"allow": ["198.51.100.7:443"]})
		fx.has(fs, "SBX-NET-013", "CapabilityNotSupported", "network.allow")
		fx.mentions(fs, "SBX-NET-013", "port 443")
		fx.fix_mentions(fs, "SBX-NET-013", "docker://?egress=gateway")
	}
}

test_port_entry_on_plain_docker_left_to_net_003 if {
	fs := network.deny with input as fx.network_input("docker/runc", {"allow": ["198.51.100.7:443"]})
	fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
	fx.fix_mentions(fs, "SBX-NET-003", "docker://?egress=gateway")
	fx.lacks(fs, "SBX-NET-013")
}

test_bad_ports_refused if {
	every entry in ["198.51.100.7:0", "198.51.100.7:65536", "198.51.100.7:0443", "198.51.100.7:", "[2001:db8::1]:", "[198.51.100.7]:443", "2001:db8::1]:443"] {
		fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": [entry, "pypi.org"]})
		fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
	}
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": ["198.51.100.7:65536"]})
	fx.mentions(fs, "SBX-NET-006", "port is not a number from 1 to 65535")
}

test_domain_with_port_refused if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": ["pypi.org:443"]})
	fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
	fx.mentions(fs, "SBX-NET-006", "a domain name names no port")
}

test_port_entries_canonical if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": ["[2001:DB8::1]:443", "198.51.100.9/24:80", "[::ffff:198.51.100.7]:22"]})
	fx.fix_mentions(fs, "SBX-NET-011", `"[2001:db8::1]:443"`)
	fx.fix_mentions(fs, "SBX-NET-011", `"198.51.100.0/24:80"`)
	fx.fix_mentions(fs, "SBX-NET-011", `"198.51.100.7:22"`)
}

test_port_entries_open_egress_in_disguise if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": ["0.0.0.0/0:443"]})
	fx.has(fs, "SBX-NET-009", "ConfigurationError", "network.allow")
}

# --- never-reachable entries (SBX-NET-014) ---------------------------------

never_entries := [
	"127.0.0.1", "127.0.0.0/8", "169.254.169.254", "169.254.169.254:80", "169.254.0.0/16",
	"0.0.0.0", "224.0.0.1", "255.255.255.255", "100.100.100.200", "::1", "[::1]:22", "::",
	"fe80::1", "fe80::/64", "ff02::1", "fd00:ec2::254", "foo.localhost", "*.dev.localhost",
	"metadata.google.internal", "METADATA.Google.Internal", "metadata.goog",
]

test_never_reachable_entries_refused_everywhere if {
	every key in allowlist_keys {
		every entry in never_entries {
			fs := network.deny with input as fx.network_input(key, {"allow": [entry]})
			fx.has(fs, "SBX-NET-014", "ConfigurationError", "network.allow")
		}
	}
}

test_never_reachable_mapped_form_refused if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": ["::ffff:127.0.0.1"]})
	fx.has(fs, "SBX-NET-014", "ConfigurationError", "network.allow")
	fx.mentions(fs, "SBX-NET-014", "loopback")
}

test_never_reachable_says_why if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": ["169.254.169.254", "metadata.google.internal", "a.localhost"]})
	fx.mentions(fs, "SBX-NET-014", `allow[0] "169.254.169.254" is inside 169.254.0.0/16 (link-local`)
	fx.mentions(fs, "SBX-NET-014", "Google Cloud")
	fx.mentions(fs, "SBX-NET-014", "loopback names")
}

test_overlapping_blocks_accepted if {
	every entry in ["0.0.0.0/1", "169.0.0.0/8", "fd00:ec2::/32", "localhost.example.com", "metadata.google.internal.example.com", "fe00::/7"] {
		fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": [entry]})
		fx.lacks(fs, "SBX-NET-014")
	}
}

test_never_reachable_not_judged_where_no_list if {
	fs := network.deny with input as fx.network_input("docker/runc", {"allow": ["127.0.0.1"]})
	fx.has(fs, "SBX-NET-003", "CapabilityNotSupported", "network.allow")
	fx.lacks(fs, "SBX-NET-014")
}

# --- internationalised names ------------------------------------------------

test_idn_entries_accepted if {
	every entry in ["bücher.example", "*.müller.example", "xn--bcher-kva.example", "пример.рф", "Bücher.Example"] {
		lib.address_kind(entry) == "domain"
		fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": [entry]})
		count(fs) == 0
	}
}

test_idn_entries_malformed_refused if {
	every entry in ["bü cher.example", "bücher..example", "*.bücher", "-bücher.example", "bücher.1example"] {
		fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": [entry]})
		fx.has(fs, "SBX-NET-006", "ConfigurationError", "network.allow")
	}
}

test_gateway_variant_described if {
	lib.describe_backend("docker/runc+gateway") == "docker with runtime runc through the egress gateway"
	lib.describe_backend("docker/runc") == "docker with runtime runc"
}

test_gateway_refuses_open_egress if {
	fs := network.deny with input as fx.network_input("docker/runc+gateway", {"egress": "allow"})
	fx.has(fs, "SBX-NET-010", "CapabilityNotSupported", "network.egress")
	fx.fix_mentions(fs, "SBX-NET-010", "without the egress gateway")
}

test_never_suffix_holds_the_name_itself if {
	never := object.union(data.capabilities.never_egress, {"suffixes": {"home.arpa": "names of a home network"}})
	every entry in ["home.arpa", "printer.home.arpa"] {
		fs := network.deny with input as fx.network_input("docker/runc+gateway", {"allow": [entry]})
			with data.capabilities.never_egress as never
		fx.mentions(fs, "SBX-NET-014", "names of a home network")
	}
}
