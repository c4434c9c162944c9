# METADATA
# title: labels and secrets
# description: >-
#   Label keys (sandboxio owns the "sandboxio." prefix, where it records the
#   tenant and session of every sandbox), secret names, and credentials that
#   would otherwise end up in plain text in the spec or Terraform state.
#   Findings name keys and positions, never values. (Credentials in a
#   backend DSN are refused earlier, by the DSN parser: SBX-DSN-003.)
package sandboxio.labels

import data.sandboxio.lib

# Rules are written for OPA's rule index (see "Writing rules" in README.md):
# each entry gets one cheap test (a regex or a prefix) before anything else.
#
# Labels come from two maps: the template's labels and the extra labels of a
# per-tenant sandbox (input.tenant.labels). Both are user-supplied; the
# reserved labels sandboxio adds itself are not part of the input.

reserved_prefix := "sandboxio."

source_name := {"template": "the template's labels", "tenant": "the tenant sandbox's labels"}

# METADATA
# title: label under the reserved prefix
# description: >-
#   sandboxio sets the labels under "sandboxio." itself (tenant, session,
#   template) so that every sandbox and every orphan can be traced to its
#   tenant. A user label there could forge or hide that trail.
# custom:
#   id: SBX-LBL-001
#   class: ConfigurationError
#   attribute: labels
#   fix: >-
#     Rename the label to a key outside the "sandboxio." prefix (for example
#     "team" or "app.team"); tenant and session labels are added
#     automatically.
deny contains f if {
	some src in ["template", "tenant"]
	some key, _ in input[src].labels

	# lower keeps the length, and the prefix has 10 characters: shorter keys
	# (most of them) need no lower-case copy
	count(key) >= 10
	startswith(lower(key), "sandboxio.")
	f := lib.finding(rego.metadata.rule(), msg_reserved_label(src, key))
}

msg_reserved_label(src, key) := sprintf(
	"label %s in %s uses the prefix %q, which sandboxio reserves for the labels it sets itself",
	[lib.quote(key), source_name[src], reserved_prefix],
)

# METADATA
# title: malformed label key
# description: >-
#   Labels are copied to each backend's native labels, so keys must be
#   portable: 1 to 63 characters, letters, digits, ".", "_", "/" and "-",
#   starting and ending with a letter or digit.
# custom:
#   id: SBX-LBL-002
#   class: ConfigurationError
#   attribute: labels
#   fix: >-
#     Use a key of 1 to 63 letters, digits, ".", "_", "/" or "-" that starts
#     and ends with a letter or digit.
deny contains f if {
	some src in ["template", "tenant"]
	some key, _ in input[src].labels

	# the pattern also bounds the length: 1 + 61 + 1 characters at most
	not regex.match(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`, key)
	f := lib.finding(rego.metadata.rule(), msg_bad_label_key(src, key))
}

msg_bad_label_key(src, key) := sprintf("%s in %s %s", [describe_label_key(key), source_name[src], label_key_problem(key)])

label_key_pattern := `^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$`

label_key_problem(key) := "is empty" if key == ""

label_key_problem(key) := sprintf("is %d characters long (at most 63)", [count(key)]) if count(key) > 63

label_key_problem(key) := `contains characters other than letters, digits, ".", "_", "/" and "-", or does not start and end with a letter or digit` if {
	key != ""
	count(key) <= 63
	not regex.match(label_key_pattern, key)
}

describe_label_key(key) := sprintf("label key %q", [key]) if {
	key != ""
	count(key) <= 63
}

describe_label_key(key) := "a label key" if key == ""

describe_label_key(key) := "a label key" if count(key) > 63

# METADATA
# title: template name that is not a portable label value
# description: >-
#   The template name is recorded on every sandbox as the value of the
#   reserved sandboxio.template label, copied to each backend's native
#   labels, and is the template's id. It must therefore be usable as a label
#   value everywhere, as tenant and session ids are: an empty name would
#   leave the template without an id and its sandboxes without the label.
# custom:
#   id: SBX-LBL-003
#   class: ConfigurationError
#   attribute: name
#   fix: >-
#     Set name to 1 to 128 letters, digits, ".", "_" or "-", starting with a
#     letter or digit (for example "python").
deny contains f if {
	# one positive match, so a valid name costs a single regex test: empty,
	# a bad first character, a bad character anywhere, or over 128
	# characters (it is undefined, and nothing is refused, where the
	# document has no template)
	regex.match(`^$|^[^A-Za-z0-9]|[^A-Za-z0-9._-]|^.{129}`, input.template.name)
	f := lib.finding(rego.metadata.rule(), msg_bad_name(input.template.name))
}

msg_bad_name(name) := sprintf(
	"name %s; it becomes the value of the sandboxio.template label on every sandbox, which must be 1 to 128 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit",
	[name_problem(name)],
)

name_problem("") := "is empty"

name_problem(name) := sprintf("is %d characters long (at most 128)", [count(name)]) if count(name) > 128

name_problem(name) := sprintf("%s contains characters other than letters, digits, \".\", \"_\" and \"-\", or does not start with a letter or digit", [lib.quote(name)]) if {
	name != ""
	count(name) <= 128
}

# METADATA
# title: more labels than the backend keeps
# description: >-
#   Labels are stored as the backend's native labels, and some backends
#   keep only a few per sandbox (Vercel: 5 tags). sandboxio sets three
#   itself (tenant, session, template), so a template and its tenant
#   sandbox may add only what is left; one more label could not be stored,
#   and the sandbox could not be traced or listed by it.
# custom:
#   id: SBX-LBL-004
#   class: CapabilityNotSupported
#   attribute: labels
#   fix: >-
#     Keep the template's and the tenant sandbox's labels together within
#     the backend's count minus the three sandboxio sets.
deny contains f if {
	# 0 or absent (no limit) on most backends ends the rule at once
	most := input.capabilities.max_labels
	most > 0
	own := object.union(object.get(input, ["template", "labels"], {}), object.get(input, ["tenant", "labels"], {}))
	count(own) + 3 > most
	f := lib.finding_fix(rego.metadata.rule(), msg_too_many_labels(count(own), most), fix_too_many_labels(most))
}

msg_too_many_labels(n, most) := sprintf(
	"backend %s keeps at most %d labels per sandbox and sandboxio sets 3 (tenant, session, template), so %d labels of your own do not fit",
	[lib.backend_key, most, n],
)

fix_too_many_labels(most) := sprintf(
	"keep at most %d labels of your own, template and tenant sandbox together, or move the rest into env",
	[most - 3],
)

# METADATA
# title: secret name that is not an environment-variable name
# description: >-
#   secret_names lists the names of environment variables whose values are
#   supplied at run time and never stored. An entry that is not a variable
#   name is often a secret value pasted in by mistake, so the message gives
#   only its position.
# custom:
#   id: SBX-SEC-001
#   class: ConfigurationError
#   attribute: secret_names
#   fix: >-
#     List variable names only (letters, digits and "_", not starting with a
#     digit, at most 128 characters), such as OPENAI_API_KEY. If a secret
#     value was pasted here, remove it and rotate that secret.
deny contains f if {
	_ = input.template.secret_names[0]
	some i, name in input.template.secret_names

	# the pattern also bounds the length: 128 characters at most
	not regex.match(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`, name)
	f := lib.finding(rego.metadata.rule(), msg_bad_secret_name(i))
}

msg_bad_secret_name(i) := sprintf(
	"secret_names[%d] is not an environment-variable name; the entry is not repeated here in case it is a secret value",
	[i],
)

# METADATA
# title: env entry that looks like a credential
# description: >-
#   env values are written into the rendered spec and Terraform state in
#   plain text. A variable whose name suggests a credential, or whose value
#   has the shape of a token, a key or a URL with a password, belongs in
#   secret_names, whose values are supplied at run time only.
# custom:
#   id: SBX-SEC-002
#   class: SecretInEnvWarning
#   attribute: env
#   fix: >-
#     Remove the variable from env, add its name to secret_names and supply
#     its value from the environment at run time. If a real secret was in
#     env, rotate it: it has been written to the spec and state.
warn contains f if {
	some key, value in input.template.env

	# one cheap test per variable lets ordinary ones through: the name holds
	# a credential-ish word, or the value is long enough to be a token (the
	# pattern is anchored: [^\n]* runs to the first newline, the separator
	# unless the name holds one)
	regex.match(`(?is)^[^\n]*(?:key|tok|secret|pass|cred|auth|\n.{14})`, concat("\n", [key, value]))
	reason := env_secret_reason(key, value)
	f := lib.finding_fix(rego.metadata.rule(), msg_secret_in_env(key, reason), fix_secret_in_env(key))
}

msg_secret_in_env(key, reason) := sprintf(
	"env %s %s; env values are stored in plain text in the spec and Terraform state (the value is not shown)",
	[lib.quote(key), reason],
)

fix_secret_in_env(key) := sprintf(
	"move %s from env to secret_names and supply its value at run time; if a real secret was in env, rotate it",
	[lib.quote(key)],
)

env_secret_reason(key, _) := "has a name that suggests a credential" if lib.credential_name(key)

env_secret_reason(key, value) := "holds a value shaped like a credential" if {
	not lib.credential_name(key)
	lib.token_like(value)
}

# METADATA
# title: variable both in env and in secret_names
# description: >-
#   A name listed in secret_names is filled in at run time from a secret.
#   The same name in env would also store a plain-text value, and which of
#   the two wins would depend on the backend.
# custom:
#   id: SBX-SEC-003
#   class: ConfigurationError
#   attribute: env
#   fix: >-
#     Remove the variable from env and keep it in secret_names, or remove it
#     from secret_names if it is not secret.
deny contains f if {
	_ = input.template.secret_names[0]
	some name in input.template.secret_names
	_ = input.template.env[name]
	f := lib.finding(rego.metadata.rule(), msg_env_and_secret(name))
}

msg_env_and_secret(name) := sprintf(
	"%s is both an env variable and a secret name: a plain-text value would be stored beside the secret",
	[lib.quote(name)],
)
