# METADATA
# title: brokered secrets
# description: >-
#   A brokered secret never reaches the sandbox: the sandbox holds a
#   placeholder, and a broker between it and the network writes the real
#   value into one header of requests to the secret's hosts. These rules
#   refuse what a broker could not hold to: a backend where none runs,
#   hosts it would not intercept, a header or format that would let the
#   value land elsewhere, and names that would also put it in the
#   environment. Findings name keys, hosts and headers, never a value.
package sandboxio.brokering

import data.sandboxio.lib

# Each rule starts from the template's brokered_secrets, which is empty (or
# absent) on almost every template: iterating it ends the rule at once.

# A variable name, as SBX-SEC-001 takes for secret_names.
var_name_pattern := `^[A-Za-z_][A-Za-z0-9_]{0,127}$`

# describe_name quotes a key that is a variable name; anything else may be
# a value pasted in the wrong place and is never repeated.
describe_name(name) := lib.quote(name) if regex.match(var_name_pattern, name)

describe_name(name) := "(a key that is not a variable name)" if not regex.match(var_name_pattern, name)

# METADATA
# title: brokered secrets where no broker runs
# description: >-
#   Only a broker that sits between the sandbox and the network can write a
#   credential into requests without the sandbox holding it. On a backend
#   without one, the value could only be put in the sandbox's environment,
#   which is what brokering exists to avoid, so it is refused rather than
#   degraded.
# custom:
#   id: SBX-SEC-005
#   class: CapabilityNotSupported
#   attribute: brokered_secrets
#   fix: >-
#     Open the template on a backend where a broker runs
#     (${secret_broker|or}), or, if the sandbox may hold the values, move
#     the names to secret_names.
deny contains f if {
	input.capabilities.network.secret_broker == false
	n := count(input.template.brokered_secrets)
	n > 0
	f := lib.finding(rego.metadata.rule(), msg_no_broker(n))
}

msg_no_broker(n) := sprintf(
	"backend %s runs no secret broker (%s), so %d brokered secret(s) could only reach the sandbox through its environment",
	[lib.backend_key, input.capabilities.network.secret_broker_note, n],
)

# METADATA
# title: brokered secret host that is not a domain name
# description: >-
#   The broker intercepts a secret's requests by the TLS server name the
#   sandbox asks for, so each host must be one exact domain name. An
#   address, a block, a port or a wildcard names no server the broker could
#   match, and a secret with no host could be sent nowhere.
# custom:
#   id: SBX-SEC-006
#   class: ConfigurationError
#   attribute: brokered_secrets
#   fix: >-
#     List each host as a domain name of two labels or more, without a
#     wildcard, port or scheme (for example api.openai.com).
deny contains f if {
	some name, b in input.template.brokered_secrets
	some problem in host_problems(b.hosts)
	f := lib.finding(rego.metadata.rule(), sprintf("brokered_secrets %s %s", [describe_name(name), problem]))
}

host_problems(hosts) := {"lists no hosts, so its value could be sent nowhere"} if count(hosts) == 0

host_problems(hosts) := {sprintf(
	"has hosts[%d], which is not a domain name the broker can match by TLS server name (the entry is not repeated here)",
	[i],
) |
	some i, h in hosts
	not broker_host(h)
} if count(hosts) > 0

# broker_host: a domain name without a wildcard (an allow-list domain
# entry, as lib reads it, that names one server).
broker_host(h) if {
	lib.host_kind(h) == "domain"
	not startswith(h, "*.")
}

# METADATA
# title: brokered secret host not on the allow list
# description: >-
#   The broker sits in the egress gateway, which only reaches what the
#   template's allow list holds. A host the list does not cover could never
#   be reached, and brokering must not widen the list.
# custom:
#   id: SBX-SEC-007
#   class: ConfigurationError
#   attribute: brokered_secrets
#   fix: >-
#     Add the host to network.allow, as the same name or a wildcard entry
#     above it (*.example.com covers api.example.com), or remove it from the
#     secret's hosts.
deny contains f if {
	some name, b in input.template.brokered_secrets
	some h in b.hosts
	broker_host(h)
	not on_allow_list(lower(h))
	f := lib.finding(rego.metadata.rule(), sprintf(
		"brokered_secrets %s names host %s, which network.allow does not cover: the gateway reaches only listed destinations",
		[describe_name(name), lib.quote(h)],
	))
}

on_allow_list(h) if {
	some e in input.network.allow
	lower(e) == h
}

# *.example.com covers every name strictly below example.com, as the
# gateway reads it (model.ParseEgressEntry).
on_allow_list(h) if {
	some e in input.network.allow
	startswith(e, "*.")
	endswith(h, substring(lower(e), 1, -1))
}

# METADATA
# title: brokered secret also in secret_names or env
# description: >-
#   A brokered secret's variable holds a placeholder inside the sandbox. The
#   same name in secret_names would put the real value there, and in env a
#   plain-text value, which undoes the brokering.
# custom:
#   id: SBX-SEC-008
#   class: ConfigurationError
#   attribute: brokered_secrets
#   fix: >-
#     Keep the name in brokered_secrets only: remove it from secret_names and
#     env.
deny contains f if {
	some name, _ in input.template.brokered_secrets
	some where in clashes(name)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"brokered secret %s is also in %s, which would hand the sandbox what brokering keeps from it",
		[describe_name(name), where],
	))
}

clashes(name) := {"secret_names" | name in input.template.secret_names} | {"env" | _ = input.template.env[name]}

# METADATA
# title: brokered secret header that cannot carry it
# description: >-
#   The value goes into one request header. The header must be a field
#   name (an RFC 7230 token), and not one that frames the message, picks the
#   destination or is consumed by the next hop (Host, Content-Length,
#   Transfer-Encoding, Connection and the like, listed with why in the
#   capability data's broker_forbidden_headers): a value written there
#   could be smuggled, sent elsewhere or dropped.
# custom:
#   id: SBX-SEC-009
#   class: ConfigurationError
#   attribute: brokered_secrets
#   fix: >-
#     Set header to the field the host reads the credential from, such as
#     Authorization or X-Api-Key: letters, digits and !#$%&'*+-.^_`|~, at
#     most 256 characters.
deny contains f if {
	some name, b in input.template.brokered_secrets
	problem := header_problem(b.header)
	f := lib.finding(rego.metadata.rule(), sprintf("brokered_secrets %s has a header that %s", [describe_name(name), problem]))
}

header_token := "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$"

header_problem(h) := "is empty" if h == ""

header_problem(h) := "is not an HTTP field name of at most 256 characters (the header is not repeated here)" if {
	h != ""
	not regex.match(header_token, h)
}

header_problem(h) := sprintf("is %s: it %s", [lib.quote(h), why]) if {
	regex.match(header_token, h)
	why := data.capabilities.broker_forbidden_headers[lower(h)]
}

# METADATA
# title: brokered secret format that does not hold it once
# description: >-
#   The header's value is the format with its one %s replaced by the
#   secret. Without %s the value is never sent; with two, or with another
#   %, what is sent is ambiguous; a line break or other control character
#   would end the header and start one the sandbox chose.
# custom:
#   id: SBX-SEC-010
#   class: ConfigurationError
#   attribute: brokered_secrets
#   fix: >-
#     Set format to text with exactly one %s and no other %, on one line,
#     at most 1024 characters (for example "Bearer %s"), or leave it out for
#     the value alone.
deny contains f if {
	some name, b in input.template.brokered_secrets
	b.format != "%s"
	some problem in format_problems(b.format)
	f := lib.finding(rego.metadata.rule(), sprintf("brokered_secrets %s has a format that %s", [describe_name(name), problem]))
}

format_problems(s) := {msg |
	some check, msg in format_checks
	format_fails(check, s)
}

format_checks := {
	"no_value": "holds no %s, so the value would never be sent",
	"twice": "holds %s more than once",
	"percent": "holds a % other than its %s",
	"control": "holds a line break or another control character, which could end the header and start another",
	"long": "is longer than 1024 characters",
}

format_fails("no_value", s) if not contains(s, "%s")

format_fails("twice", s) if count(indexof_n(s, "%s")) > 1

format_fails("percent", s) if count(indexof_n(s, "%")) > count(indexof_n(s, "%s"))

format_fails("control", s) if regex.match(`[\x00-\x08\x0a-\x1f\x7f]`, s)

format_fails("long", s) if count(s) > 1024

# METADATA
# title: brokered secret name that is not an environment-variable name
# description: >-
#   A brokered secret is keyed by the variable that holds its placeholder
#   inside the sandbox and its value in the caller's environment. A key
#   that is not a variable name is often a value pasted by mistake, so the
#   message gives only its position.
# custom:
#   id: SBX-SEC-011
#   class: ConfigurationError
#   attribute: brokered_secrets
#   fix: >-
#     Key each brokered secret by a variable name (letters, digits and "_",
#     not starting with a digit, at most 128 characters), such as
#     OPENAI_API_KEY. If a secret value was pasted here, remove it and
#     rotate that secret.
deny contains f if {
	some name, _ in input.template.brokered_secrets
	not regex.match(var_name_pattern, name)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"brokered_secrets key number %d (in key order) is not an environment-variable name; it is not repeated here in case it is a secret value",
		[key_position(name)],
	))
}

key_position(name) := i + 1 if {
	some i, k in sort(object.keys(input.template.brokered_secrets))
	k == name
}

# METADATA
# title: brokered secrets in a template that keeps a warm pool
# description: >-
#   A warm sandbox and its egress gateway are made before any open, when no
#   secret value exists yet, and a claim hands that sandbox over as it is.
#   Its broker would hold no value to write, so a template with brokered
#   secrets keeps no warm pool.
# custom:
#   id: SBX-SEC-012
#   class: CapabilityNotSupported
#   attribute: warm_pool
#   fix: >-
#     Remove warm_pool from the template (each open then makes its sandbox
#     and its broker cold), or keep the pool on a template without
#     brokered secrets.
deny contains f if {
	n := count(input.template.brokered_secrets)
	n > 0
	input.template.warm_pool
	f := lib.finding(rego.metadata.rule(), sprintf(
		"the template keeps a warm pool and has %d brokered secret(s): a warm sandbox is made before any value exists, so its broker would hold none",
		[n],
	))
}
