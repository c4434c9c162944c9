# METADATA
# title: network policy
# description: >-
#   Egress modes, allow lists and what each backend can actually enforce. A
#   network policy that a backend would accept and then ignore is the most
#   dangerous failure sandboxio can have, so every such case is refused here
#   before anything is created.
package sandboxio.network

import data.sandboxio.lib

# Rules are written for OPA's rule index (see "Writing rules" in README.md):
# `_ = input.network.allow[0]` reads "the allow list is not empty" in a form
# the index decides without evaluating the rule.

# METADATA
# title: egress learning needs a backend that observes blocked egress
# description: >-
#   egress = "learn" denies all egress exactly as "deny" does, and records
#   what the sandbox tried to reach (DNS names, addresses and ports) in the
#   audit record, for `sandboxio egress report` to turn into an allow list.
#   Only a backend that observes blocked attempts can keep that record:
#   Docker with the runc runtime. Elsewhere learn is refused, never quietly
#   treated as "deny", which would leave the user believing something is
#   being recorded. A network policy with no backend is decided with the
#   template that uses it.
# custom:
#   id: SBX-NET-001
#   class: CapabilityNotSupported
#   attribute: network.egress
#   fix: >-
#     Run the learning sandbox on Docker with the runc runtime (backend
#     "docker://", runtime "runc"), then write the allow list the report
#     prints into the template on the backend that enforces it; or set egress
#     to "deny" (the default).
deny contains f if {
	input.network.egress == "learn"
	input.capabilities
	not input.capabilities.blocked_egress_reporting == true
	f := lib.finding(rego.metadata.rule(), msg_learn)
}

msg_learn := sprintf(
	`backend %s does not observe blocked egress, so egress = "learn" could record nothing there; it is refused rather than treated as "deny". Learning works on %s`,
	[lib.backend_key, lib.join_and(learn_backends)],
)

learn_backends := [lib.describe_backend(key) |
	some key, d in data.capabilities.backends
	d.blocked_egress_reporting
]

# METADATA
# title: egress learning lets nothing out
# description: >-
#   egress = "learn" is for discovering which hosts code needs. The sandbox
#   reaches nothing, exactly as under "deny": code that needs the network
#   fails there, and every attempt is recorded in the audit log. It is not a
#   mode to run a workload in.
# custom:
#   id: SBX-NET-012
#   class: EgressLearnWarning
#   attribute: network.egress
#   fix: >-
#     Run the code once with learn, print the allow list with `sandboxio
#     egress report AUDIT.jsonl`, and put it on a template whose backend
#     enforces allow lists (${allowlist}) with egress =
#     "deny".
warn contains f if {
	input.network.egress == "learn"
	f := lib.finding(rego.metadata.rule(), `egress = "learn": nothing leaves this sandbox; its attempts are only recorded, for an allow list (sandboxio egress report)`)
}

# METADATA
# title: unknown egress mode
# description: egress must be one of deny, allow or learn.
# custom:
#   id: SBX-NET-002
#   class: ConfigurationError
#   attribute: network.egress
#   fix: Set egress to "deny" (the default) or "allow".
deny contains f if {
	input.network
	not object.get(input.network, "egress", null) in {"deny", "allow", "learn"}
	f := lib.finding(rego.metadata.rule(), msg_bad_egress)
}

msg_bad_egress := sprintf(
	"egress %s is not an egress mode: use deny, allow or learn",
	[lib.quote(object.get(input.network, "egress", null))],
)

# METADATA
# title: the backend cannot enforce an egress allow list
# description: >-
#   Some backends can only block all egress: plain Docker (docker://) has no
#   per-host egress filter, gVisor's own network stack never reaches the
#   egress gateway's device, and Daytona's allow list is unverified. A
#   non-empty allow list there would be accepted and not enforced, so it is
#   refused.
# custom:
#   id: SBX-NET-003
#   class: CapabilityNotSupported
#   attribute: network.allow
#   fix: >-
#     Egress allow lists are a capability of ${allowlist} only (Kubernetes:
#     IPv4 blocks, where its network lock is proven). Move
#     the template to one of those backends, or remove allow and keep egress
#     denied: bake dependencies into the image ahead of time, or upload an
#     offline wheelhouse and install from it with the network off.
deny contains f if {
	_ = input.network.allow[0]
	input.capabilities.network.allowlist == false
	meta := rego.metadata.rule()
	f := lib.finding_fix(meta, msg_no_allowlist, fix_no_allowlist(meta))
}

# fix_no_allowlist is the annotation's fix, which speaks of a template,
# except on a sandboxio_network_policy, which is checked against its own
# backend and has no template to move. (An else, so that the finding never
# loses its fix, whatever input.kind holds.)
fix_no_allowlist(meta) := concat(" ", [
	"Egress allow lists are a capability of ${allowlist} only (Kubernetes: IPv4 blocks, where its network lock is proven).",
	`Set this policy's backend to one of those (for example "e2b://") and use it only in templates on that backend,`,
	"or remove allow and keep egress denied: bake dependencies into the image ahead of time,",
	"or upload an offline wheelhouse and install from it with the network off.",
]) if {
	input.kind == "network_policy"
} else := lib.custom(meta, "fix")

msg_no_allowlist := sprintf(
	"backend %s cannot enforce an egress allow list (%s), so the %d allow entries would be accepted and not enforced; allow lists are enforced by %s",
	[
		lib.backend_key,
		object.get(input.capabilities, ["network", "allowlist_note"], "no allow-list control"),
		count(input.network.allow), lib.join_and(allowlist_backends),
	],
)

allowlist_backends := [key |
	some key, d in data.capabilities.backends
	d.network.allowlist
]

# METADATA
# title: allow list with open egress
# description: >-
#   An allow list narrows a deny policy. With egress = "allow" everything is
#   already reachable, so the list would have no effect and suggests a
#   restriction that does not exist.
# custom:
#   id: SBX-NET-004
#   class: ConfigurationError
#   attribute: network.allow
#   fix: >-
#     Set egress to "deny" to restrict egress to the allow list, or remove
#     allow if open egress is really intended.
deny contains f if {
	input.network.egress == "allow"
	_ = input.network.allow[0]
	f := lib.finding(rego.metadata.rule(), msg_allow_with_open_egress)
}

msg_allow_with_open_egress := sprintf(
	`egress = "allow" opens all egress, so the %d allow entries would have no effect; an allow list only applies on top of egress = "deny"`,
	[count(input.network.allow)],
)

# METADATA
# title: the backend cannot enforce this kind of allow-list entry
# description: >-
#   Backends that enforce allow lists accept different kinds of entries: for
#   example Modal takes CIDR blocks only, so a domain name there would not be
#   enforced; Kubernetes routes IPv4 blocks only, so an IPv6 entry there
#   would not be either.
# custom:
#   id: SBX-NET-005
#   class: CapabilityNotSupported
#   attribute: network.allow
#   fix: >-
#     Give the entry in a form the backend accepts (resolve a domain to the
#     CIDR blocks it uses), or use a backend that accepts domain entries
#     (${domain_allowlist}).
deny contains f if {
	_ = input.network.allow[0]
	input.capabilities.network.allowlist == true
	some i, entry in input.network.allow
	kind := lib.address_kind(entry)
	not kind_taken(entry, kind)
	f := lib.finding(rego.metadata.rule(), msg_kind_not_taken(i, entry, kind_label(entry, kind)))
}

kind_taken(entry, kind) if {
	kind in input.capabilities.network.allow_kinds
	not ipv6_refused(entry)
}

# ipv6_refused: the backend routes IPv4 only (ipv4_only) and the entry is
# an IPv6 block or address.
ipv6_refused(entry) if {
	input.capabilities.network.ipv4_only == true
	contains(lib.ip_block(entry), ":")
}

kind_label(entry, kind) := concat("", [kind, " (IPv6)"]) if ipv6_refused(entry)

else := kind

msg_kind_not_taken(i, entry, kind) := sprintf(
	"allow[%d] %q is a %s entry, but backend %s accepts only %s entries in an allow list (%s)",
	[
		i, entry, kind, lib.backend_key,
		lib.join_and(input.capabilities.network.allow_kinds),
		input.capabilities.network.allowlist_note,
	],
)

# METADATA
# title: allow-list entry is not an address
# description: >-
#   Every allow-list entry must be a CIDR block (10.0.0.0/8), an IP address
#   (IPv4 or IPv6) or a domain name: at least two labels of 1 to 63
#   letters, digits and inner hyphens, 253 characters at most, no trailing
#   dot, a last label that starts with a letter, and a wildcard only as one
#   leading "*." label before at least two more (*.example.com; not "*",
#   "*.com", "a.*.b.com", "*foo.com" or "**.x.com"). An IPv4 address with
#   leading zeros (010.0.0.1) is refused too: some parsers read it as
#   octal. The entry is not repeated in the message, in case it is
#   something that should not be printed (a URL with credentials); the
#   message says what is wrong with it.
# custom:
#   id: SBX-NET-006
#   class: ConfigurationError
#   attribute: network.allow
#   fix: >-
#     Write the entry as a CIDR block, an IP address or a host name: no
#     scheme, path or credentials, and a port only after a block or address
#     (198.51.100.7:443, [2001:db8::1]:443).
deny contains f if {
	_ = input.network.allow[0]
	some i, entry in input.network.allow
	not lib.address_kind(entry)
	f := lib.finding(rego.metadata.rule(), msg_not_an_address(i, entry))
}

msg_not_an_address(i, entry) := sprintf(
	"allow[%d] is neither a CIDR block, an IP address nor a domain name%s",
	[i, entry_hint(entry)],
)

# entry_hint says what is wrong with an entry without repeating it; the one
# thing it may print is the decimal reading of a dotted quad with leading
# zeros, which holds nothing but digits and dots.
entry_hint(entry) := sprintf(" (it is a %s, not a string)", [type_name(entry)]) if {
	not is_string(entry)
} else := " (it looks like a URL: give the host name only)" if {
	contains(entry, "://")
} else := " (a domain name names no port: a name is reached on 443 and 80 only)" if {
	lib.host_kind(lib.entry_parts(entry)[0]) == "domain"
} else := " (its port is not a number from 1 to 65535 without leading zeros)" if {
	lib.host_kind(lib.entry_parts(entry)[0])
} else := " (it contains a path: give the host or block only)" if {
	regex.match(`^[A-Za-z0-9.*-]+(:[0-9]+)?/[^0-9]`, entry)
} else := leading_zero_hint(entry) if {
	regex.match(`^[0-9]+(\.[0-9]+){3}(/[0-9]+)?$`, entry)
	regex.match(`(^|\.)0[0-9]`, entry)
} else := " (it looks like an IPv4 address, but an IPv4 address is four numbers from 0 to 255 and a prefix length at most 32)" if {
	regex.match(`^[0-9./]+$`, entry)
} else := " (it is empty)" if {
	entry == ""
} else := " (it looks like an IPv6 address or block, but is not a valid one)" if {
	contains(entry, ":")
} else := " (a wildcard is allowed only as one leading \"*.\" label before a domain of at least two labels, as in *.example.com)" if {
	contains(entry, "*")
} else := " (a domain name holds only letters, digits, hyphens and dots)" if {
	regex.match(`[^\p{L}\p{M}\p{N}.-]`, entry)
} else := " (it ends in a dot: leave the final dot out)" if {
	endswith(entry, ".")
} else := " (it is longer than 253 characters, the most a domain name can have)" if {
	count(entry) > 253
} else := " (a label is empty or longer than 63 characters)" if {
	some label in split(entry, ".")
	not count(label) in numbers.range(1, 63)
} else := " (a domain name needs at least two labels, as in pypi.org)" if {
	not contains(entry, ".")
} else := " (a label starts or ends with a hyphen)" if {
	regex.match(`(^|\.)-|-($|\.)`, entry)
} else := " (its last label starts with a digit, which no top-level domain does)"

# The last hint is the one failure left: a name of letters, digits, hyphens
# and dots, in labels of 1 to 63 characters that neither start nor end with
# a hyphen, fails the domain pattern only when its last label starts with a
# digit.

# leading_zero_hint: 010.0.0.1 is 10.0.0.1 to some parsers and 8.0.0.1 to
# others (octal), so it is refused; the hint gives the decimal reading.
leading_zero_hint(entry) := sprintf(" (a number with a leading zero is octal to some parsers: if decimal was meant, write %s)", [decimal]) if {
	decimal := lib.canonical_entry(regex.replace(entry, `(^|[./])0+([0-9])`, "${1}${2}"))
} else := " (a number with a leading zero is octal to some parsers; write each number in decimal without leading zeros)"

# METADATA
# title: open egress
# description: >-
#   egress = "allow" lets sandboxed code reach any host, which is what
#   exfiltration needs. It is an explicit opt-in and always reported.
# custom:
#   id: SBX-NET-007
#   class: OpenEgressWarning
#   attribute: network.egress
#   fix: >-
#     Keep egress = "deny" (the default) and list the hosts the code needs in
#     allow on a backend that enforces allow lists, or bring dependencies in
#     ahead of time; use "allow" for trusted code only.
warn contains f if {
	input.network.egress == "allow"
	f := lib.finding(rego.metadata.rule(), `egress = "allow": code in this sandbox can reach any host on the internet`)
}

# METADATA
# title: the backend cannot deny egress
# description: >-
#   Denying egress is the default, so a backend that cannot block outbound
#   traffic would silently run every sandbox with open egress. Refused.
# custom:
#   id: SBX-NET-008
#   class: CapabilityNotSupported
#   attribute: network.egress
#   fix: >-
#     Use a backend that blocks egress (every built-in backend does;
#     Kubernetes where its network lock is proven on the cluster), or set
#     egress = "allow" explicitly if open egress is acceptable for this code.
deny contains f if {
	input.network.egress == "deny"
	input.capabilities.network.deny == false
	f := lib.finding(rego.metadata.rule(), msg_cannot_deny)
}

msg_cannot_deny := sprintf("backend %s cannot block egress, so a deny policy would not be enforced", [lib.backend_key])

# entries_checked: the blocks of an allow list are parsed and judged
# (SBX-NET-009, SBX-NET-011) unless the backend cannot enforce a list at
# all. There SBX-NET-003 refuses the whole list, whose fix is to remove it or
# move the template, so judging its entries would add nothing to act on, and
# would make every such refusal pay for parsing them. Written as `not ... ==
# false`, so that an input without capability data is still judged.
entries_checked if not input.capabilities.network.allowlist == false

# allow_blocks maps each CIDR or IP entry of the allow list to its canonical
# block (lib.ip_block), parsed once for SBX-NET-009 and SBX-NET-011.
allow_blocks := {entry: block |
	some entry in input.network.allow
	block := lib.ip_block(entry)
}

# METADATA
# title: allow list that opens all egress
# description: >-
#   An allow list whose entries together hold every address of a family
#   (0.0.0.0/0 or ::/0, but also 0.0.0.0/1 with 128.0.0.0/1, or ::/1 with
#   8000::/1, or an IPv6 block holding all IPv4-mapped addresses,
#   ::ffff:0:0/96) is open egress disguised as a restriction: it would bypass
#   the explicit opt-in and the warning that egress = "allow" carries. The
#   entries are parsed and merged, never compared as text. Refused whatever
#   the egress mode, except "allow", where SBX-NET-004 refuses any list, and
#   except on a backend that cannot enforce a list at all, where SBX-NET-003
#   refuses the whole list.
# custom:
#   id: SBX-NET-009
#   class: ConfigurationError
#   attribute: network.allow
#   fix: >-
#     List only the blocks the code needs. Open egress is egress = "allow"
#     with no allow list: explicit, and always warned (SBX-NET-007).
deny contains f if {
	_ = input.network.allow[0]
	not input.network.egress == "allow"
	entries_checked
	families := lib.open_block_families(allow_blocks)
	count(families) > 0
	allow := input.network.allow
	f := lib.finding(rego.metadata.rule(), msg_open_list(allow, families))
}

msg_open_list(allow, families) := sprintf(
	`%s, so this allow list is open egress in disguise; open egress is egress = "allow", explicit and warned`,
	[concat("; ", [open_family_reason(allow, fam) | some fam in sort(families)])],
)

# open_family_reason names the entries that open a family: those that do it
# alone, or else every entry of the family, which together do.
open_family_reason(allow, fam) := sprintf("every %s address is admitted by %s%s", [fam, lib.join_and(alone), mapped_note(allow, fam)]) if {
	alone := [sprintf("allow[%d] %q", [i, e]) | some i, e in allow; lib.covers_alone(e, fam)]
	count(alone) > 0
} else := sprintf(
	"every %s address is admitted by %s together (they merge to %s)%s",
	[fam, lib.join_and(family_entries(allow, fam)), lib.whole_family[fam], mapped_note(allow, fam)],
)

family_entries(allow, fam) := [sprintf("allow[%d] %q", [i, e]) |
	some i, e in allow
	lib.block_family(lib.ip_block(e)) == fam
]

mapped_note(allow, "IPv4") := " (an IPv6 block that holds ::ffff:0:0/96 holds every IPv4-mapped address, and so every IPv4 address)" if {
	some e in allow
	lib.holds_mapped(lib.ip_block(e))
} else := ""

mapped_note(_, "IPv6") := ""

# METADATA
# title: allow-list address not written in canonical form
# description: >-
#   A CIDR block or IP address in an allow list must be written the one way
#   it prints: the network address with its host bits zero (10.0.0.0/8, not
#   10.1.2.3/8, which admits all of 10.0.0.0/8 while reading like one
#   host), a prefix length without leading zeros (/8, not /08 or /00), IPv6
#   in lowercase with zeros compressed (2001:db8::/32), and an IPv4 block in
#   IPv4 notation rather than IPv4-mapped IPv6. A form that reads as
#   something narrower than what it admits, or that the backend may parse
#   differently, is refused with the form to write. Not checked on a backend
#   that cannot enforce a list at all, where SBX-NET-003 refuses the whole
#   list.
# custom:
#   id: SBX-NET-011
#   class: ConfigurationError
#   attribute: network.allow
#   fix: >-
#     Write the entry in canonical form: network address with host bits zero,
#     prefix length without leading zeros, IPv6 in lowercase with zeros
#     compressed, IPv4 in IPv4 notation.
deny contains f if {
	_ = input.network.allow[0]
	entries_checked
	some i, entry in input.network.allow
	canonical := lib.canonical_form(entry, allow_blocks[entry])
	canonical != entry
	meta := rego.metadata.rule()
	f := lib.finding_fix(meta, msg_noncanonical(i, entry, canonical), fix_noncanonical(meta, i, canonical))
}

msg_noncanonical(i, entry, canonical) := sprintf(
	"allow[%d] %q is not in canonical form: %s; it admits %s",
	[i, entry, noncanonical_reason(entry, canonical), lib.ip_block(entry)],
)

fix_noncanonical(meta, i, canonical) := sprintf("Write allow[%d] as %q. %s", [i, canonical, lib.custom(meta, "fix")])

# noncanonical_reason names the first difference found.
noncanonical_reason(entry, canonical) := "its prefix length has a leading zero" if {
	regex.match(`/0[0-9]`, entry)
} else := "it is an IPv4 address written as IPv4-mapped IPv6" if {
	contains(entry, ":")
	not contains(canonical, ":")
} else := "its host bits are not zero, so it reads like one address but admits the whole block" if {
	contains(entry, "/")
	address := split(entry, "/")[0]
	lib.canonical_entry(address) != split(canonical, "/")[0]
} else := "IPv6 is written in lowercase, without leading zeros in a group, with the longest run of zero groups as ::"

# METADATA
# title: open egress on a backend that cannot give it
# description: >-
#   Some backends cannot give a sandbox an open network. Docker daemons
#   register the runsc runtime with --network=none, so a runsc container has
#   no network to open: a bridge network cannot be given to it. The egress
#   gateway forwards listed destinations only, so it has no open mode.
#   egress = "allow" there would be accepted and not honoured, so it is
#   refused.
# custom:
#   id: SBX-NET-010
#   class: CapabilityNotSupported
#   attribute: network.egress
#   fix: >-
#     Use the runc runtime without the egress gateway (docker://) for a
#     sandbox that needs open egress, or keep egress = "deny" (the default)
#     on this backend, with an allow list where it enforces one.
deny contains f if {
	input.network.egress == "allow"
	input.capabilities.network.open_egress == false
	f := lib.finding(rego.metadata.rule(), msg_no_open_egress)
}

msg_no_open_egress := sprintf(
	`backend %s cannot give a sandbox open egress (its network control is %s), so egress = "allow" would not be honoured; open egress is given by %s`,
	[
		lib.backend_key,
		object.get(input.capabilities, ["network", "deny_control"], "no network control"),
		lib.join_and(open_egress_backends),
	],
)

open_egress_backends := [lib.describe_backend(key) |
	some key, d in data.capabilities.backends
	d.network.open_egress
]

# METADATA
# title: the backend cannot limit an allow-list entry to one port
# description: >-
#   A CIDR or IP entry may name one port (198.51.100.7:443,
#   198.51.100.0/24:443, [2001:db8::/32]:443), which limits it to that
#   port. Only a backend that filters by port can enforce that:
#   elsewhere the block would be reachable on every port, which is more than
#   the entry says. Refused there, never widened.
# custom:
#   id: SBX-NET-013
#   class: CapabilityNotSupported
#   attribute: network.allow
#   fix: >-
#     Remove the port from the entry, which then admits every port of the
#     block, or use a backend that filters by port (${allow_ports}).
deny contains f if {
	_ = input.network.allow[0]
	input.capabilities.network.allowlist == true
	not input.capabilities.network.allow_ports == true
	some i, entry in input.network.allow
	lib.address_kind(entry)
	port := lib.entry_port(entry)
	port != ""
	f := lib.finding(rego.metadata.rule(), sprintf(
		"allow[%d] %q limits its block to port %s, but backend %s cannot filter by port (%s)",
		[i, entry, port, lib.backend_key, input.capabilities.network.allowlist_note],
	))
}

# METADATA
# title: allow-list entry that no sandbox may reach
# description: >-
#   Some destinations are never reachable from a sandbox, whatever its allow
#   list says: loopback, link-local addresses and the cloud metadata
#   services that answer there, the unspecified and multicast ranges, and
#   names such as localhost. An entry that lies wholly inside one of them
#   could only be an attempt to reach the host or its credentials, or a
#   mistake; either way it would never work, so it is refused instead of
#   being accepted and silently ignored. A wider block that merely overlaps
#   one (0.0.0.0/1 holds 127.0.0.0/8) is accepted: the part it may not
#   reach stays unreachable. The list is never_egress in the capability
#   data, which the egress gateway enforces at run time too, together with
#   the host's own addresses and networks.
# custom:
#   id: SBX-NET-014
#   class: ConfigurationError
#   attribute: network.allow
#   fix: >-
#     Remove the entry. A sandbox cannot be given the host, loopback or a
#     metadata service; a service the code needs belongs on an address of
#     its own, listed explicitly.
deny contains f if {
	_ = input.network.allow[0]
	entries_checked
	some i, entry in input.network.allow
	why := never_reason(entry)
	f := lib.finding(rego.metadata.rule(), sprintf("allow[%d] %q is %s, which no sandbox may reach", [i, entry, why]))
}

never := data.capabilities.never_egress

# never_reason says why an entry may never be reached; undefined for an
# entry that may.
never_reason(entry) := sprintf("inside %s (%s)", [block, never.blocks[block]]) if {
	b := lib.ip_block(entry)
	some block in sort(object.keys(never.blocks))
	lib.block_family(block) == lib.block_family(b)
	net.cidr_contains(block, b)
} else := sprintf("%s", [never.names[name]]) if {
	name := never_name(entry)
	never.names[name]
} else := sprintf("one of %s", [never.suffixes[suffix]]) if {
	name := never_name(entry)
	some suffix, _ in never.suffixes
	name_under(name, suffix)
}

# never_name is a domain entry's name in lowercase, without its wildcard.
never_name(entry) := lower(trim_prefix(entry, "*.")) if lib.address_kind(entry) == "domain"

name_under(name, suffix) if name == suffix

name_under(name, suffix) if endswith(name, concat("", [".", suffix]))
