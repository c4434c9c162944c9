package sandboxio.lib_test

import data.sandboxio.fixtures as fx
import data.sandboxio.lib

meta := {"custom": {"id": "SBX-TST-001", "class": "ConfigurationError", "attribute": "a.b", "fix": "do this"}}

test_finding_takes_fields_from_annotation if {
	lib.finding(meta, "wrong") == {"id": "SBX-TST-001", "class": "ConfigurationError", "attribute": "a.b", "msg": "wrong", "fix": "do this"}
}

test_finding_variants if {
	lib.finding_fix(meta, "m", "other").fix == "other"
	lib.finding_fix(meta, "m", "other").attribute == "a.b"
	lib.finding_at(meta, "a.c", "m").attribute == "a.c"
	lib.finding_at(meta, "a.c", "m").fix == "do this"
	f := lib.finding_at_fix(meta, "a.c", "m", "other")
	f.attribute == "a.c"
	f.fix == "other"
	f.id == "SBX-TST-001"
}

# A refusal must not vanish when the annotation cannot be read.
test_finding_without_annotation_still_defined if {
	lib.finding({}, "wrong") == {"id": "", "class": "", "attribute": "", "msg": "wrong", "fix": ""}
}

# Nor when the annotation lacks a field (a team rule's): the direct reads
# are undefined and the fallback fills in "".
test_finding_with_partial_annotation_still_defined if {
	partial := {"custom": {"id": "TEAM-X-001", "class": "ConfigurationError"}}
	lib.finding(partial, "m") == {"id": "TEAM-X-001", "class": "ConfigurationError", "attribute": "", "msg": "m", "fix": ""}
	lib.finding_fix(partial, "m", "f").fix == "f"
	lib.finding_at(partial, "a", "m").attribute == "a"
	lib.finding_at_fix(partial, "a", "m", "f").id == "TEAM-X-001"
	lib.finding_at_fix({}, "a", "m", "f") == {"id": "", "class": "", "attribute": "a", "msg": "m", "fix": "f"}
}

test_address_kinds if {
	lib.address_kind("10.0.0.0/8") == "cidr"
	lib.address_kind("2001:db8::/32") == "cidr"
	lib.address_kind("1.2.3.4") == "ip"
	lib.address_kind("::1") == "ip"
	lib.address_kind("pypi.org") == "domain"
	lib.address_kind("*.pythonhosted.org") == "domain"
	lib.address_kind("PyPI.org") == "domain"
}

test_not_addresses if {
	every entry in ["", "*", "*.org.", "a..b", "pypi", "1.2.3.4.5", "1.2.3.4/40", "http://pypi.org", "pypi.org:443", "-x.org", "x-.org", "a.*.org", 7, null] {
		not lib.address_kind(entry)
	}
}

test_ip_block_parses if {
	lib.ip_block("10.0.0.0/8") == "10.0.0.0/8"
	lib.ip_block("10.1.2.3/8") == "10.0.0.0/8"
	lib.ip_block("0.0.0.0/00") == "0.0.0.0/0"
	lib.ip_block("1.2.3.4") == "1.2.3.4/32"
	lib.ip_block("2001:DB8:0000::/32") == "2001:db8::/32"
	lib.ip_block("2001:db8::1") == "2001:db8::1/128"
	lib.ip_block("::ffff:10.0.0.0/104") == "10.0.0.0/8"
	lib.ip_block("::ffff:0:0/96") == "0.0.0.0/0"
	lib.ip_block("::ffff:1.2.3.4") == "1.2.3.4/32"
	every entry in ["pypi.org", "not an address", "10.0.0.0/33", 7, null] {
		not lib.ip_block(entry)
	}
}

test_canonical_entry if {
	lib.canonical_entry("10.0.0.0/8") == "10.0.0.0/8"
	lib.canonical_entry("10.1.2.3/8") == "10.0.0.0/8"
	lib.canonical_entry("10.0.0.0/008") == "10.0.0.0/8"
	lib.canonical_entry("1.2.3.4") == "1.2.3.4"
	lib.canonical_entry("2001:0DB8::0001") == "2001:db8::1"
	lib.canonical_entry("::ffff:1.2.3.4") == "1.2.3.4"
	not lib.canonical_entry("pypi.org")
}

test_block_family if {
	lib.block_family("10.0.0.0/8") == "IPv4"
	lib.block_family("::/0") == "IPv6"
}

test_holds_mapped if {
	every b in ["::/0", "::/1", "::/64", "::/80", "::ffff:0:0/95"] {
		lib.holds_mapped(b)
	}
	every b in ["0.0.0.0/0", "8000::/1", "::/96", "::fffe:0:0/96", "2001:db8::/32", "::1/128"] {
		not lib.holds_mapped(b)
	}
}

test_open_families if {
	every allow in [["0.0.0.0/0"], ["0.0.0.0/00"], ["0.0.0.0/1", "128.0.0.0/1"], ["::ffff:0:0/96"], ["1.2.3.4", "0.0.0.0/1", "128.0.0.0/1", "pypi.org"], ["::ffff:0.0.0.0/97", "128.0.0.0/1"], ["::/80"], ["10.0.0.0/8", "::/1"], ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"]] {
		lib.open_families(allow) == {"IPv4"}
	}
	every allow in [["::/00"], ["::/1", "8000::/1"], ["::/1", "8000::/2", "c000::/2"]] {
		lib.open_families(allow) == {"IPv4", "IPv6"}
	}
	lib.open_families(["8000::/1", "::/1"]) == {"IPv4", "IPv6"}
	every allow in [[], ["pypi.org"], ["0.0.0.0/1"], ["0.0.0.0/1", "128.0.0.0/2"], ["10.0.0.0/8", "2001:db8::/32"], ["8000::/1"], ["0.0.0.0/0x"], ["0.0.0.0/1", "::ffff:128.0.0.0/98"]] {
		lib.open_families(allow) == set()
	}
}

test_covers_alone if {
	lib.covers_alone("0.0.0.0/0", "IPv4")
	lib.covers_alone("::/0", "IPv6")
	lib.covers_alone("::/0", "IPv4")
	not lib.covers_alone("0.0.0.0/1", "IPv4")
	not lib.covers_alone("0.0.0.0/0", "IPv6")
}

test_tier_order if {
	lib.satisfies("MICROVM", "GVISOR")
	lib.satisfies("GVISOR", "GVISOR")
	not lib.satisfies("CONTAINER", "GVISOR")
	not lib.satisfies("UNKNOWN", "CONTAINER")
	not lib.satisfies("MICROVM", "UNKNOWN")
	not lib.satisfies("", "CONTAINER")
	not lib.satisfies("MICROVM", "VM")
}

test_join_and if {
	lib.join_and([]) == "none"
	lib.join_and(["a"]) == "a"
	lib.join_and(["a", "b"]) == "a and b"
	lib.join_and(["a", "b", "c"]) == "a, b and c"
}

test_describe if {
	lib.describe(0) == "0"
	lib.describe(-1.5) == "-1.5"
	lib.describe(null) == "unset (null)"
	lib.describe("7") == "a string, not a number"
}

test_backend_key if {
	lib.backend_key == "modal" with input as {"capabilities": {"key": "modal"}, "backend": {"key": "x"}}
	lib.backend_key == "docker/youki" with input as {"backend": {"key": "docker/youki"}}
	lib.backend_key == "the configured backend" with input as {}
}

test_credential_names if {
	every name in ["API_KEY", "apiKey", "githubToken", "GH_TOKEN", "PGPASSWORD", "DB_PASS", "MY_SECRET", "SERVICE_CREDS", "auth", "Private-Key"] {
		lib.credential_name(name)
	}
	every name in ["LANG", "KEYBOARD", "TOKENIZERS_PARALLELISM", "SSH_AUTH_SOCK", "ssh_auth_sock", "SSH_PUBLIC_KEY", "AUTHOR", "MONKEY", "PASSAGE", 3] {
		not lib.credential_name(name)
	}
}

test_token_like if {
	lib.token_like("sk-ant-api03-abcdefghijklmnop")
	lib.token_like("AKIAIOSFODNN7EXAMPLE")
	lib.token_like("mysql://root:pw@localhost/db")
	lib.token_like("0123456789abcdef0123456789abcdef")
	every v in ["C.UTF-8", "https://pypi.org/simple", "abcdefghijklmnopqrstuvwxyzabcdefgh", "/usr/local/bin:/usr/bin", "https://user@host/x", 12] {
		not lib.token_like(v)
	}
}

# The leak detector the other tests rely on does detect a leak.
test_leak_detector if {
	fx.leaks([{"id": "x", "msg": "value is hunter2"}], "hunter2")
	not fx.leaks([{"id": "x", "msg": "value not shown"}], "hunter2")
}

# The token formats come from the capability data, the list the DSN parser
# reads too (TestSecretTokensServeBothDetectors checks the Go side).
test_secret_token_examples_known if {
	every t in data.capabilities.secret_tokens {
		every ex in t.examples {
			lib.known_token(ex)
		}
	}
}

test_new_token_prefixes if {
	every v in ["hf_Zq3vN8wLk2Xr7tY1pQ", "npm_Zq3vN8wLk2Xr7tY1pQ", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.x"] {
		lib.known_token(v)
	}
	every v in ["hf_short", "npm_install", "eyJ", "my-hf_token-name"] {
		not lib.known_token(v)
	}
}
