package sandboxio.warmpool_test

import data.sandboxio.fixtures as fx
import data.sandboxio.warmpool

pool := {"size": 4, "max_idle_seconds": 600}

with_pool(key, p) := fx.template_with(key, {"template": {"warm_pool": p}})

pool_keys := {key | some key, d in data.capabilities.backends; d.warm_pool}

# --- SBX-WRM-001: a pool where the backend cannot keep one -----------------

test_pool_accepted_on_docker_runc if {
	count(warmpool.deny) == 0 with input as with_pool("docker/runc", pool)
	count(warmpool.deny) == 0 with input as fx.spec_input("docker/runc", {}) with input.template.warm_pool as pool
}

test_pool_refused_where_unsupported if {
	every key in fx.backend_keys - pool_keys {
		fs := warmpool.deny with input as with_pool(key, pool)
		fx.has(fs, "SBX-WRM-001", "CapabilityNotSupported", "warm_pool")
		fx.mentions(fs, "SBX-WRM-001", key)
	}
}

test_pool_refused_on_the_cloud_backends_and_runsc if {
	every key in {"docker/runsc", "e2b", "modal", "vercel", "daytona"} {
		fs := warmpool.deny with input as with_pool(key, pool)
		fx.has(fs, "SBX-WRM-001", "CapabilityNotSupported", "warm_pool")
	}
}

test_only_docker_runc_and_kubernetes_keep_pools if {
	pool_keys == {"docker/runc", "kubernetes"}
}

test_pool_accepted_on_kubernetes if {
	count(warmpool.deny) == 0 with input as with_pool("kubernetes", pool)
}

test_pool_refused_without_capabilities if {
	fs := warmpool.deny with input as object.remove(with_pool("docker/runc", pool), ["capabilities"])
	fx.has(fs, "SBX-WRM-001", "CapabilityNotSupported", "warm_pool")
}

test_no_pool_no_finding if {
	every key in fx.backend_keys {
		count(warmpool.deny) == 0 with input as fx.template_input(key)
	}
}

# --- SBX-WRM-002: the size ---------------------------------------------------

test_bad_sizes_refused if {
	every size in [0, -1, 65, 1.5, "4", null] {
		fs := warmpool.deny with input as with_pool("docker/runc", {"size": size, "max_idle_seconds": 600})
		fx.has(fs, "SBX-WRM-002", "ConfigurationError", "warm_pool.size")
	}
	fs := warmpool.deny with input as with_pool("docker/runc", {"max_idle_seconds": 600})
	fx.has(fs, "SBX-WRM-002", "ConfigurationError", "warm_pool.size")
}

test_good_sizes_accepted if {
	every size in [1, 4, 64] {
		fs := warmpool.deny with input as with_pool("docker/runc", {"size": size, "max_idle_seconds": 600})
		fx.lacks(fs, "SBX-WRM-002")
	}
}

# --- SBX-WRM-003: the idle time ----------------------------------------------

test_bad_idle_refused if {
	every idle in [0, -5, 9, 2592001, 10.5, null] {
		fs := warmpool.deny with input as with_pool("docker/runc", {"size": 1, "max_idle_seconds": idle})
		fx.has(fs, "SBX-WRM-003", "ConfigurationError", "warm_pool.max_idle_seconds")
	}
}

test_good_idle_accepted if {
	every idle in [10, 600, 2592000] {
		fs := warmpool.deny with input as with_pool("docker/runc", {"size": 1, "max_idle_seconds": idle})
		fx.lacks(fs, "SBX-WRM-003")
	}
}
