# METADATA
# title: sandboxio shared helpers
# description: >-
#   Finding constructors, message helpers, allow-list address
#   classification and parsing, tier comparison and credential heuristics shared by the
#   sandboxio rule packages. Nothing here refuses anything by itself.
package sandboxio.lib

# ---------------------------------------------------------------------------
# Findings
#
# A rule passes its own annotation (rego.metadata.rule()) and a message. The
# ID, class, attribute and fix come from the annotation, so they are written
# once. Rules call these only after every condition has matched.
#
# The fields fall back to "" rather than making the finding undefined: a
# refusal must never disappear because the annotation could not be read (for
# example when an engine compiles the bundle without annotation processing).
# ---------------------------------------------------------------------------

# Each constructor reads the annotation's fields directly when all are
# there (every built-in rule: TestEveryDenyAndWarnRuleCarriesFindingFields),
# which saves four function calls (about 20 allocations) per finding, and
# through custom() otherwise, so that a team rule with an incomplete
# annotation still refuses.
finding(meta, msg) := f if {
	c := meta.custom
	f := {
		"id": c.id,
		"class": c.class,
		"attribute": c.attribute,
		"msg": msg,
		"fix": expand(c.fix),
	}
} else := {
	"id": custom(meta, "id"),
	"class": custom(meta, "class"),
	"attribute": custom(meta, "attribute"),
	"msg": msg,
	"fix": expand(custom(meta, "fix")),
}

# finding_fix replaces the annotation's fix, for a fix that must name
# something only known at evaluation time (a tier, a list of backends).
finding_fix(meta, msg, fix) := f if {
	c := meta.custom
	f := {
		"id": c.id,
		"class": c.class,
		"attribute": c.attribute,
		"msg": msg,
		"fix": expand(fix),
	}
} else := {
	"id": custom(meta, "id"),
	"class": custom(meta, "class"),
	"attribute": custom(meta, "attribute"),
	"msg": msg,
	"fix": expand(fix),
}

# finding_at gives the finding a more precise attribute than the annotation:
# one finding per cap (resources -> resources.memory_mb), or the attribute
# that actually needs changing.
finding_at(meta, attribute, msg) := f if {
	c := meta.custom
	f := {
		"id": c.id,
		"class": c.class,
		"attribute": attribute,
		"msg": msg,
		"fix": expand(c.fix),
	}
} else := {
	"id": custom(meta, "id"),
	"class": custom(meta, "class"),
	"attribute": attribute,
	"msg": msg,
	"fix": expand(custom(meta, "fix")),
}

finding_at_fix(meta, attribute, msg, fix) := f if {
	c := meta.custom
	f := {
		"id": c.id,
		"class": c.class,
		"attribute": attribute,
		"msg": msg,
		"fix": expand(fix),
	}
} else := {
	"id": custom(meta, "id"),
	"class": custom(meta, "class"),
	"attribute": attribute,
	"msg": msg,
	"fix": expand(fix),
}

custom(meta, field) := object.get(meta, ["custom", field], "")

# expand fills a fix's ${NAME} placeholders with the lists of backends that
# the capability data's prose section renders from the rest of the data
# (go generate writes it), so that no fix lists backends by hand.
expand(s) := s if {
	not contains(s, "${")
} else := strings.replace_n(prose_patterns, s)

prose_patterns := {sprintf("${%s}", [name]): text | some name, text in object.get(data.capabilities, "prose", {})}

# ---------------------------------------------------------------------------
# Message helpers. None of them is ever given a value that may be a secret
# (env values, DSN parts, entries that failed a name check).
# ---------------------------------------------------------------------------

# describe renders a cap or timeout for a message.
# within holds when x is a number from lo to hi, both included. Anything
# else (null, a string, a boolean) is not within any range.
within(x, lo, hi) if {
	is_number(x)
	x >= lo
	x <= hi
}

describe(x) := sprintf("%v", [x]) if is_number(x)

describe(x) := "unset (null)" if x == null

describe(x) := sprintf("a %s, not a number", [type_name(x)]) if {
	not is_number(x)
	x != null
}

# quote renders a name (a key, a tier, a runtime) for a message: quoted when
# short, otherwise only its length, so a long paste is never repeated.
quote(x) := sprintf("%q", [x]) if {
	is_string(x)
	count(x) <= 63
}

quote(x) := sprintf("(a string of %d characters)", [count(x)]) if {
	is_string(x)
	count(x) > 63
}

quote(x) := "(unset)" if x == null

quote(x) := sprintf("(a %s)", [type_name(x)]) if {
	not is_string(x)
	x != null
}

# join_and renders ["a", "b", "c"] as "a, b and c".
join_and(items) := items[0] if count(items) == 1

join_and(items) := sprintf("%s and %s", [concat(", ", array.slice(items, 0, count(items) - 1)), items[count(items) - 1]]) if {
	count(items) > 1
}

join_and(items) := "none" if count(items) == 0

# backend_key names the backend being evaluated.
default backend_key := "the configured backend"

backend_key := input.capabilities.key

backend_key := input.backend.key if not input.capabilities.key

# ---------------------------------------------------------------------------
# Allow-list addresses
#
# address_kind classifies an allow-list entry as "cidr", "ip" or "domain" and
# is undefined for anything else. The three cases exclude each other: a CIDR
# has a "/", an IP has none and a ":" or all-digit labels, and a domain ends
# in a label that starts with a letter. A CIDR or IP entry may name one port
# (see entry_parts); a domain entry names none, since a name is reached on
# 443 (TLS) and 80 (HTTP) only.
# ---------------------------------------------------------------------------

address_kind(entry) := kind if {
	[host, port] := entry_parts(entry)
	kind := host_kind(host)
	port_fits(kind, port)
}

port_fits(_, "")

port_fits(kind, port) if {
	kind != "domain"
	valid_port(port)
}

# valid_port: a decimal port from 1 to 65535 without leading zeros.
valid_port(port) if {
	regex.match(`^[1-9][0-9]{0,4}$`, port)
	to_number(port) <= 65535
}

# entry_parts splits an entry into its host and its port ("" for none):
# 198.51.100.0/24:443, 198.51.100.7:443 and [2001:db8::/32]:443 name port
# 443. An IPv6 entry names a port only in brackets, since its own colons
# would be ambiguous. Anything else is all host.
entry_parts(entry) := [m[1], m[2]] if {
	is_string(entry)
	[m] := regex.find_all_string_submatch_n(`^\[([0-9A-Fa-f.]*:[0-9A-Fa-f:./]*)\]:([0-9]+)$`, entry, 1)
} else := [m[1], m[2]] if {
	is_string(entry)
	[m] := regex.find_all_string_submatch_n(`^([^:\[\]]+):([0-9]+)$`, entry, 1)
} else := [entry, ""]

# entry_port is the port an entry names, "" for none.
entry_port(entry) := entry_parts(entry)[1]

host_kind(host) := "cidr" if {
	is_string(host)
	contains(host, "/")
	net.cidr_is_valid(host)
}

host_kind(host) := "ip" if {
	is_string(host)
	not contains(host, "/")
	net.cidr_is_valid(concat("/", [host, "32"]))
}

# A host name of at least two labels, optionally behind one "*." wildcard.
# Labels may be internationalised (bücher.example): the backend normalises
# them to A-labels (xn--bcher-kva.example) before it resolves or compares a
# name. The last label starts with a letter, so no IP address matches.
domain_pattern := `^(\*\.)?([\p{L}\p{N}]([\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?\.)+\p{L}([\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$`

host_kind(host) := "domain" if {
	is_string(host)
	count(host) <= 253
	regex.match(domain_pattern, host)
}

# ---------------------------------------------------------------------------
# Allow-list blocks
#
# Addresses are parsed with OPA's net.* built-ins, never compared as text:
# ip_block is the canonical CIDR block an address entry stands for (an IP is
# its /32 or /128), as net.cidr_merge prints it: the network address with
# its host bits zero, the prefix length in decimal without leading zeros,
# IPv6 in lowercase with the longest run of zero groups compressed, and an
# IPv4-mapped IPv6 block (::ffff:10.0.0.0/104) as the IPv4 block it is
# (10.0.0.0/8). It is undefined for an entry that is not a CIDR or an IP.
# ---------------------------------------------------------------------------

ip_block(entry) := b if {
	is_string(entry)
	host := entry_parts(entry)[0]
	not contains(host, "[")
	cidr := as_cidr(host)
	net.cidr_is_valid(cidr)
	some b in net.cidr_merge([cidr])
}

# as_cidr gives each IP its own host prefix: net.cidr_merge would give a bare
# IPv4 address its classful mask (1.2.3.4 as 1.2.3.4/8) and refuse a bare
# IPv6 one. (ip_block checks the result before net.cidr_merge sees it, so
# the built-in never fails on an entry.)
as_cidr(entry) := entry if {
	contains(entry, "/")
} else := concat("", [entry, "/128"]) if {
	contains(entry, ":")
} else := concat("", [entry, "/32"])

# canonical_entry is how the entry must be written: its canonical block for
# a CIDR, the block's address for an IP. canonical_form does the same from a
# block already parsed.
canonical_entry(entry) := canonical_form(entry, ip_block(entry))

canonical_form(entry, block) := with_port(host_form(host, block), port) if {
	[host, port] := entry_parts(entry)
}

host_form(host, block) := block if {
	contains(host, "/")
} else := split(block, "/")[0]

with_port(host, "") := host

with_port(host, port) := sprintf("[%s]:%s", [host, port]) if {
	port != ""
	contains(host, ":")
}

with_port(host, port) := sprintf("%s:%s", [host, port]) if {
	port != ""
	not contains(host, ":")
}

# A canonical block is IPv6 when it has a ":" (IPv4-mapped blocks have
# become IPv4 by then).
block_family(b) := "IPv6" if contains(b, ":")

block_family(b) := "IPv4" if not contains(b, ":")

# The block that holds every address of a family.
whole_family := {"IPv4": "0.0.0.0/0", "IPv6": "::/0"}

# holds_mapped: an IPv6 block that holds every IPv4-mapped address
# (::ffff:0:0/96), and with them every IPv4 address. Blocks of /96 or longer
# inside ::ffff:0:0/96 are printed as IPv4 already; a shorter block holds
# ::ffff:0:0 exactly when it holds ::fffe:0:0, which differs from it in bit
# 95 only (net.cidr_contains never matches an IPv6 block against a mapped
# address, so the probe has to be unmapped).
holds_mapped(b) if {
	contains(b, ":")
	to_number(split(b, "/")[1]) <= 95
	net.cidr_contains(b, "::fffe:0:0")
}

# covers_alone: the entry's block holds every address of the family by itself.
covers_alone(entry, fam) if ip_block(entry) == whole_family[fam]

covers_alone(entry, "IPv4") if holds_mapped(ip_block(entry))

# open_families: the address families whose every address the list admits,
# once its blocks are merged (0.0.0.0/1 and 128.0.0.0/1 together are
# 0.0.0.0/0), IPv6 blocks that hold all of IPv4 counting as 0.0.0.0/0.
open_families(allow) := open_block_families({b | some e in allow; b := ip_block(e)})

# open_block_families does it for a collection of canonical blocks (a set,
# or an object whose values are blocks). The families are merged apart:
# net.cidr_merge given both returns ::/0 alone for 0.0.0.0/0 and ::/0.
#
# The merge runs only when some block is wide enough to take part in
# covering a family: n blocks of prefix length p or more hold at most
# n * 2^(bits - p) addresses, so a family of 2^bits needs a block with
# 2^p <= n, and then p < n. A short list of narrow blocks stops there.
open_block_families(blocks) := families if {
	any_wide(blocks)
	v4 := {b | some b in blocks; not contains(b, ":")} | {"0.0.0.0/0" | some b in blocks; holds_mapped(b)}
	v6 := {b | some b in blocks; contains(b, ":")}
	families := {"IPv4" | "0.0.0.0/0" in net.cidr_merge(v4)} | {"IPv6" | "::/0" in net.cidr_merge(v6)}
} else := set()

# any_wide: some block may take part in covering a family (a constant
# value, so OPA stops at the first block found).
any_wide(blocks) if {
	n := count(blocks)
	some b in blocks
	to_number(split(b, "/")[1]) < n
}

any_wide(blocks) if {
	some b in blocks
	holds_mapped(b)
}

# ---------------------------------------------------------------------------
# Isolation tiers (ranks come from capabilities/data.json)
# ---------------------------------------------------------------------------

# known_tier holds for a tier that can satisfy a requirement: any ranked tier
# except UNKNOWN.
known_tier(t) if {
	t != "UNKNOWN"
	data.capabilities.tiers[t]
}

# satisfies: a sandbox on tier have meets requirement want. UNKNOWN is never
# satisfied and never satisfies.
satisfies(have, want) if {
	known_tier(have)
	known_tier(want)
	data.capabilities.tiers[have] >= data.capabilities.tiers[want]
}

# describe_backend names a capability key for a person: "docker with runtime
# runsc", "e2b".
describe_backend(key) := sprintf("docker with runtime %s", [data.capabilities.backends[key].runtime]) if {
	data.capabilities.backends[key].backend == "docker"
	not data.capabilities.backends[key].variant
}

describe_backend(key) := sprintf("docker with runtime %s through the egress gateway", [d.runtime]) if {
	d := data.capabilities.backends[key]
	d.backend == "docker"
	d.variant == "gateway"
}

describe_backend(key) := key if {
	data.capabilities.backends[key].backend != "docker"
}

# backends_at_least lists, in key order, the backends whose tier satisfies want.
backends_at_least(want) := [sprintf("%s (%s)", [describe_backend(key), d.tier]) |
	some key, d in data.capabilities.backends
	satisfies(d.tier, want)
]

# ---------------------------------------------------------------------------
# Credential heuristics. They decide; they never print what they looked at.
# ---------------------------------------------------------------------------

# Words that make a variable or option name look like it holds a credential.
credential_words := {
	"KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "AUTHKEY",
	"TOKEN", "TOKENS", "AUTHTOKEN", "SECRET", "SECRETS",
	"PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE",
	"CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH",
}

# A word ending in one of these also counts (GITHUBTOKEN, DBPASSWORD).
credential_suffixes := {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "ACCESSKEY", "PRIVATEKEY"}

# Names that contain a credential word but hold none.
benign_names := {"SSH_AUTH_SOCK"}

# credential_name holds for FOO_API_KEY, githubToken, DB_PASSWORD, but not for
# KEYBOARD_LAYOUT, TOKENIZERS_PARALLELISM or SSH_AUTH_SOCK. Names are split
# into words at non-alphanumerics and camelCase humps; a PUBLIC word
# (NEXT_PUBLIC_API_KEY, SSH_PUBLIC_KEY) is not a secret.
credential_name(name) if {
	is_string(name)

	# cheap pre-filter, so ordinary names cost one regex match
	regex.match(`(?i)(key|tok|secret|pass|cred|auth)`, name)
	not upper(name) in benign_names
	words := name_words(name)
	not "PUBLIC" in words
	some w in words
	credential_word(w)
}

name_words(name) := {w |
	some w in regex.split(`[^A-Z0-9]+`, upper(regex.replace(name, `([a-z0-9])([A-Z])`, "${1}_${2}")))
	w != ""
}

credential_word(w) if w in credential_words

credential_word(w) if {
	some suffix in credential_suffixes
	endswith(w, suffix)
}

# Token formats with a recognisable shape: the patterns of the capability
# data's secret_tokens (the DSN parser detects the same list by prefix), and
# PEM private keys. Each needs at least 14 characters.
known_token_pattern := sprintf(
	`(^|[^A-Za-z0-9_])(%s)|-----BEGIN [A-Z ]*PRIVATE KEY-----`,
	[concat("|", [t.pattern | some t in data.capabilities.secret_tokens])],
)

known_token(v) if {
	is_string(v)
	count(v) >= 14
	regex.match(known_token_pattern, v)
}

# A URL carrying a password: postgres://user:pass@host/db.
url_with_password(v) if {
	is_string(v)
	contains(v, "://")
	regex.match(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@`, v)
}

# high_entropy: one unbroken run of at least 32 base64 or hex characters that
# mixes digits and letters, the shape of most API keys without a prefix.
high_entropy(v) if {
	is_string(v)
	count(v) >= 32
	regex.match(`^[A-Za-z0-9+/_-]{32,}={0,2}$`, v)
	regex.match(`[0-9]`, v)
	regex.match(`[A-Za-z]`, v)
	mixed_or_hex(v)
}

mixed_or_hex(v) if regex.match(`^[0-9a-fA-F]+$`, v)

mixed_or_hex(v) if {
	regex.match(`[a-z]`, v)
	regex.match(`[A-Z]`, v)
}

# token_like: a value that should be a secret, not an env value.
token_like(v) if known_token(v)

token_like(v) if url_with_password(v)

token_like(v) if high_entropy(v)
