# METADATA
# title: labels and secrets
# description: >-
#   Label keys (sandboxio owns the "sandboxio." prefix, where it records the
#   tenant and session of every sandbox), secret names, and credentials that
#   would otherwise end up in plain text in the spec, the DSN or Terraform
#   state. Findings name keys and positions, never values.
package sandboxio.labels

import data.sandboxio.lib

reserved_prefix := "sandboxio."

# The label maps a document can carry: the template's labels and the extra
# labels of a per-tenant sandbox. Both are user-supplied; the reserved
# labels sandboxio adds itself are not part of the input.
label_sources := ["template", "tenant"]

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
	some src in label_sources
	some key, _ in input[src].labels
	is_string(key)
	startswith(lower(key), reserved_prefix)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"label %s in %s uses the prefix %q, which sandboxio reserves for the labels it sets itself",
		[describe_key(key), source_name[src], reserved_prefix],
	))
}

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
	some src in label_sources
	some key, _ in input[src].labels
	problem := label_key_problem(key)
	f := lib.finding(rego.metadata.rule(), sprintf("%s in %s %s", [describe_label_key(key), source_name[src], problem]))
}

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

describe_key(key) := sprintf("%q", [key]) if count(key) <= 63

describe_key(key) := sprintf("(a key of %d characters)", [count(key)]) if count(key) > 63

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
	some i, name in input.template.secret_names
	not env_name(name)
	f := lib.finding(rego.metadata.rule(), sprintf(
		"secret_names[%d] is not an environment-variable name; the entry is not repeated here in case it is a secret value",
		[i],
	))
}

env_name(name) if {
	is_string(name)
	count(name) <= 128
	regex.match(`^[A-Za-z_][A-Za-z0-9_]*$`, name)
}

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
	reason := env_secret_reason(key, value)
	f := lib.finding_fix(
		rego.metadata.rule(),
		sprintf("env %s %s; env values are stored in plain text in the spec and Terraform state (the value is not shown)", [describe_key(key), reason]),
		sprintf("move %s from env to secret_names and supply its value at run time; if a real secret was in env, rotate it", [describe_key(key)]),
	)
}

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
	env := input.template.env
	some name in input.template.secret_names
	is_string(name)
	object.get(env, name, null) != null
	f := lib.finding(rego.metadata.rule(), sprintf(
		"%s is both an env variable and a secret name: a plain-text value would be stored beside the secret",
		[describe_key(name)],
	))
}

# METADATA
# title: credential in the backend DSN
# description: >-
#   Backend credentials come from environment variables only. A DSN is
#   stored in configuration and state and shows up in logs, so a password,
#   a token or a credential-named option in it is refused. The message names
#   the option, never its value.
# custom:
#   id: SBX-SEC-004
#   class: ConfigurationError
#   attribute: backend
#   fix: >-
#     Remove the credential from the DSN and set it in the environment
#     variable the backend reads; rotate it, since it has been written down.
deny contains f if {
	input.backend
	some problem in dsn_problems
	f := lib.finding(rego.metadata.rule(), sprintf(
		"the backend DSN %s; credentials must come from environment variables, never from a DSN",
		[problem],
	))
}

dsn_problems contains sprintf("has a query option %s whose name suggests a credential", [describe_key(key)]) if {
	some key, _ in input.backend.options
	lib.credential_name(key)
}

dsn_problems contains sprintf("has a query option %s whose value looks like a credential", [describe_key(key)]) if {
	some key, value in input.backend.options
	not lib.credential_name(key)
	dsn_secret_value(value)
}

dsn_problems contains "carries a password (user:password@host)" if {
	regex.match(`^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#@]*@`, input.backend.dsn)
}

dsn_problems contains "contains a value shaped like a credential" if {
	dsn := input.backend.dsn
	is_string(dsn)
	lib.known_token(split(dsn, "?")[0])
}

dsn_secret_value(v) if lib.known_token(v)

dsn_secret_value(v) if lib.url_with_password(v)
