# METADATA
# title: tenancy
# description: >-
#   Every per-tenant sandbox carries the tenant and session it belongs to as
#   the reserved labels sandboxio.tenant_id and sandboxio.session_id, copied
#   to the backend's native labels, so that no sandbox is shared across
#   tenants unnoticed and every orphan can be traced and reaped. Both ids
#   must therefore be present and safe to use as label values.
package sandboxio.tenancy

import data.sandboxio.lib

# The rules apply to the per-tenant kinds only (tenant_sandbox, spec), which
# OPA's rule index decides from input.kind without evaluating them.

id_rules := "1 to 128 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit"

# METADATA
# title: missing or malformed tenant_id
# description: >-
#   A per-tenant sandbox needs a tenant id that can be used as a label value
#   on every backend. The id is not repeated in the message.
# custom:
#   id: SBX-TEN-001
#   class: ConfigurationError
#   attribute: tenant_id
#   fix: >-
#     Set tenant_id to 1 to 128 letters, digits, ".", "_" or "-", starting
#     with a letter or digit.
deny contains f if {
	input.kind in {"tenant_sandbox", "spec"}
	not regex.match(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, object.get(input, ["tenant", "tenant_id"], ""))
	f := lib.finding(rego.metadata.rule(), sprintf("tenant_id %s: it must be %s", [id_problem("tenant_id"), id_rules]))
}

# METADATA
# title: missing or malformed session_id
# description: >-
#   A per-tenant sandbox needs a session id that can be used as a label
#   value on every backend. The id is not repeated in the message.
# custom:
#   id: SBX-TEN-002
#   class: ConfigurationError
#   attribute: session_id
#   fix: >-
#     Set session_id to 1 to 128 letters, digits, ".", "_" or "-", starting
#     with a letter or digit.
deny contains f if {
	input.kind in {"tenant_sandbox", "spec"}
	not regex.match(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, object.get(input, ["tenant", "session_id"], ""))
	f := lib.finding(rego.metadata.rule(), sprintf("session_id %s: it must be %s", [id_problem("session_id"), id_rules]))
}

# id_problem says what is wrong with input.tenant[field]. A per-tenant
# document without a tenant part is missing both ids.
id_problem(_) := "is missing (a per-tenant sandbox needs a tenant and a session)" if not input.tenant

id_problem(field) := describe_id_problem(object.get(input.tenant, field, null))

describe_id_problem(v) := "is missing" if v == null

describe_id_problem(v) := "is empty" if v == ""

describe_id_problem(v) := sprintf("is %d characters long (at most 128)", [count(v)]) if {
	is_string(v)
	count(v) > 128
}

describe_id_problem(v) := "contains characters that are not allowed or does not start with a letter or digit" if {
	is_string(v)
	v != ""
	count(v) <= 128
}
