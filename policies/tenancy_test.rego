package sandboxio.tenancy_test

import data.sandboxio.fixtures as fx
import data.sandboxio.tenancy

long_id := concat("", ["t" | some _ in numbers.range(1, 129)])

bad_ids := ["", "-acme", ".hidden", "acme corp", "acme/prod", "../etc", "ácme", long_id]

good_ids := ["acme", "a", "ACME-prod_2.eu", "0", concat("", ["t" | some _ in numbers.range(1, 128)])]

# --- SBX-TEN-001: tenant_id ------------------------------------------------

test_bad_tenant_id_refused if {
	every id in bad_ids {
		fs := tenancy.deny with input as fx.tenant_input("e2b", {"tenant_id": id})
		fx.has(fs, "SBX-TEN-001", "ConfigurationError", "tenant_id")
		fx.lacks(fs, "SBX-TEN-002")
	}
}

test_bad_tenant_id_not_repeated if {
	fs := tenancy.deny with input as fx.tenant_input("e2b", {"tenant_id": "acme corp"})
	not fx.leaks(fs, "acme corp")
	fs2 := tenancy.deny with input as fx.tenant_input("e2b", {"tenant_id": long_id})
	fx.mentions(fs2, "SBX-TEN-001", "129 characters")
	not fx.leaks(fs2, long_id)
}

test_missing_tenant_id_refused if {
	inp := fx.tenant_input("e2b", {})
	fs := tenancy.deny with input as inp with input.tenant as object.remove(inp.tenant, ["tenant_id"])
	fx.has(fs, "SBX-TEN-001", "ConfigurationError", "tenant_id")
	fx.mentions(fs, "SBX-TEN-001", "missing")
}

test_missing_tenant_part_refused if {
	every kind in ["tenant_sandbox", "spec"] {
		inp := fx.without(fx.tenant_input("docker/runc", {}), "tenant")
		fs := tenancy.deny with input as inp with input.kind as kind
		fx.has(fs, "SBX-TEN-001", "ConfigurationError", "tenant_id")
		fx.has(fs, "SBX-TEN-002", "ConfigurationError", "session_id")
	}
}

test_good_tenant_ids_accepted if {
	every id in good_ids {
		fs := tenancy.deny with input as fx.tenant_input("e2b", {"tenant_id": id})
		count(fs) == 0
	}
}

test_template_needs_no_tenant if {
	every key in fx.backend_keys {
		fs := tenancy.deny with input as fx.template_input(key)
		count(fs) == 0
	}
}

# --- SBX-TEN-002: session_id -----------------------------------------------

test_bad_session_id_refused if {
	every id in bad_ids {
		fs := tenancy.deny with input as fx.spec_input("vercel", {"session_id": id})
		fx.has(fs, "SBX-TEN-002", "ConfigurationError", "session_id")
		fx.lacks(fs, "SBX-TEN-001")
	}
}

test_good_session_ids_accepted if {
	every id in good_ids {
		fs := tenancy.deny with input as fx.spec_input("vercel", {"session_id": id})
		count(fs) == 0
	}
}
