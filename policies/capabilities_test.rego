# The shape of capabilities/data.json that the rules rely on. Several rules
# test a descriptor field for an exact value (allowlist == false, deny ==
# false, mode == "template") so that OPA's rule index can skip them; that is
# only safe while every descriptor carries every field with the right type,
# which these tests (and internal/backends/capabilities_test.go) guarantee.
package sandboxio.capabilities_test

backends := data.capabilities.backends

test_tiers_ranked_from_unknown if {
	data.capabilities.tiers == {"UNKNOWN": 0, "CONTAINER": 1, "GVISOR": 2, "MICROVM": 3}
}

# SBX-RES-001 lets caps equal to the defaults through without testing each
# cap, which is only right while the defaults are positive.
test_default_caps_positive if {
	every cap in ["cpu", "memory_mb", "disk_mb", "pids"] {
		data.capabilities.default_caps[cap] > 0
	}
	count(data.capabilities.default_caps) == 4
}

# SBX-RES-001 lets caps equal to the defaults through without testing each
# cap, which is only right while the defaults lie within the bounds; its
# messages rely on 0 < min < max for every cap.
test_cap_bounds_hold_the_defaults if {
	count(data.capabilities.cap_bounds) == 4
	every cap in ["cpu", "memory_mb", "disk_mb", "pids"] {
		b := data.capabilities.cap_bounds[cap]
		is_number(b.min)
		is_number(b.max)
		b.min > 0
		b.min < b.max
		b.min <= data.capabilities.default_caps[cap]
		data.capabilities.default_caps[cap] <= b.max
	}
}

# The ceiling of SBX-TMO-001/006 leaves room for the default timeouts and is
# never below a backend's own maximum lifetime (SBX-TMO-003), nor a backend's
# process ceiling above the pids bound (SBX-RES-005).
test_timeout_ceiling_above_backend_maximums if {
	is_number(data.capabilities.max_timeout_seconds)
	data.capabilities.max_timeout_seconds >= 300
	every d in backends {
		d.max_lifetime_seconds <= data.capabilities.max_timeout_seconds
		d.caps.max_pids <= data.capabilities.cap_bounds.pids.max
	}
}

test_descriptors_complete if {
	count(backends) > 0
	every key, d in backends {
		d.key == key
		is_string(d.backend)
		is_string(d.runtime)
		data.capabilities.tiers[d.tier]
		is_boolean(d.network.deny)
		is_boolean(d.network.open_egress)
		is_boolean(d.network.allowlist)
		is_array(d.network.allow_kinds)
		is_string(d.network.allowlist_note)
		is_boolean(d.network.secret_broker)
		is_string(d.network.secret_broker_note)
		d.network.secret_broker_note != ""
		d.caps.mode in {"per_sandbox", "template"}
		is_array(d.caps.settable)
		is_boolean(d.caps.memory_bounds_swap)
		is_boolean(d.caps.pids_ceiling)
		is_number(d.caps.max_pids)
		is_boolean(d.native_labels)
		is_boolean(d.tenant_storage)
		is_boolean(d.warm_pool)
		is_number(d.max_lifetime_seconds)
		d.max_lifetime_seconds >= 0
		d.lifetime_enforcement in {"absolute", "idle"}
		object.get(d.caps, "unit_mb", 0) >= 0
	}
}

test_allow_kinds_consistent if {
	every d in backends {
		every kind in d.network.allow_kinds {
			kind in {"cidr", "ip", "domain"}
		}

		# a backend without an allow list takes no kind of entry, and one
		# with an allow list takes at least one
		takes_kinds := count(d.network.allow_kinds) > 0
		d.network.allowlist == takes_kinds
	}
}

# Every backend gives open egress but Docker with runsc, which daemons
# register with --network=none (SBX-NET-010).
# Open egress everywhere but runsc and the egress gateway, which forwards
# listed destinations only.
test_open_egress_everywhere_but_runsc if {
	{key | some key, d in backends; d.network.open_egress == false} == {"docker/runsc"} | gateway_keys
}

gateway_keys := {key | some key, d in backends; d.variant == "gateway"}

test_gateway_on_every_docker_runtime if {
	gateway_keys == {concat("", [k, "+gateway"]) | some k, d in backends; d.backend == "docker"; not d.variant}
}

test_settable_caps_known if {
	every d in backends {
		every cap in d.caps.settable {
			cap in {"cpu", "memory_mb", "disk_mb", "pids"}
		}
	}
}

# Keys are docker/<runtime> for Docker (docker/<runtime>+<variant> through a
# DSN variant such as the egress gateway) and the scheme for everything else.
test_keys_follow_backend_and_runtime if {
	every key, d in backends {
		key_ok(key, d)
	}
}

key_ok(key, d) if {
	d.backend == "docker"
	not d.variant
	key == concat("/", ["docker", d.runtime])
}

key_ok(key, d) if {
	d.backend == "docker"
	key == concat("", ["docker/", d.runtime, "+", d.variant])
}

key_ok(key, d) if {
	d.backend != "docker"
	key == d.backend
	d.runtime == ""
}

# A broker runs only in the egress gateway on runc, the one variant that
# sees the sandbox's traffic and enforces names (SBX-SEC-005), and it
# brokers only to hosts on a domain allow list (SBX-SEC-007).
test_secret_broker_only_in_the_gateway_on_runc if {
	{key | some key, d in backends; d.network.secret_broker} == {"docker/runc+gateway"}
	every d in backends {
		d.network.secret_broker == false
	} with data.capabilities.backends as object.remove(backends, ["docker/runc+gateway"])
	"domain" in backends["docker/runc+gateway"].network.allow_kinds
}

# The headers a broker never writes are keyed in lowercase (SBX-SEC-009
# compares lower(header)), each with a reason.
test_broker_forbidden_headers_lowercase_with_reasons if {
	count(data.capabilities.broker_forbidden_headers) > 0
	every h, why in data.capabilities.broker_forbidden_headers {
		h == lower(h)
		is_string(why)
		why != ""
	}
	every h in ["host", "content-length", "transfer-encoding", "connection"] {
		data.capabilities.broker_forbidden_headers[h]
	}
}
