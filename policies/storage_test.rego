package sandboxio.storage_test

import data.sandboxio.fixtures as fx
import data.sandboxio.storage

volume := {"name": "datasets", "mount_path": "/data"}

with_volume(key, v) := fx.template_with(key, {"template": {"volume": v}})

scoped_keys := {key | some key, d in data.capabilities.backends; d.tenant_storage}

# --- SBX-VOL-001: a volume where it cannot be scoped per tenant ------------

test_volume_accepted_on_modal if {
	fs := storage.deny with input as with_volume("modal", volume)
	count(fs) == 0
	fs2 := storage.deny with input as fx.tenant_input("modal", {}) with input.template.volume as volume
	count(fs2) == 0
}

test_volume_refused_where_not_scoped if {
	every key in fx.backend_keys - scoped_keys {
		fs := storage.deny with input as with_volume(key, volume)
		fx.has(fs, "SBX-VOL-001", "CapabilityNotSupported", "volume")
		fx.mentions(fs, "SBX-VOL-001", key)
	}
}

test_volume_refused_on_docker_e2b_vercel_daytona if {
	every key in {"docker/runc", "docker/runsc", "e2b", "vercel", "daytona"} {
		fs := storage.deny with input as with_volume(key, volume)
		fx.has(fs, "SBX-VOL-001", "CapabilityNotSupported", "volume")
	}
}

test_only_modal_scopes_storage if {
	scoped_keys == {"modal"}
}

test_volume_refused_in_spec_without_capabilities if {
	fs := storage.deny with input as object.remove(with_volume("modal", volume), ["capabilities"])
	fx.has(fs, "SBX-VOL-001", "CapabilityNotSupported", "volume")
}

test_no_volume_no_finding if {
	every key in fx.backend_keys {
		count(storage.deny) == 0 with input as fx.template_input(key)
	}
}

# --- SBX-VOL-002: the volume name -------------------------------------------

test_bad_names_refused if {
	every name in ["", "-x", ".x", "a/b", "a b", "x0123456789012345678901234567890123456789", 7] {
		fs := storage.deny with input as with_volume("modal", {"name": name, "mount_path": "/data"})
		fx.has(fs, "SBX-VOL-002", "ConfigurationError", "volume.name")
	}
}

test_good_names_accepted if {
	every name in ["d", "datasets", "team_a.v2-x", "x012345678901234567890123456789012345"] {
		fs := storage.deny with input as with_volume("modal", {"name": name, "mount_path": "/data"})
		fx.lacks(fs, "SBX-VOL-002")
	}
}

test_missing_name_refused if {
	fs := storage.deny with input as with_volume("modal", {"mount_path": "/data"})
	fx.has(fs, "SBX-VOL-002", "ConfigurationError", "volume.name")
}

# --- SBX-VOL-003: the mount path --------------------------------------------

test_bad_mount_paths_refused if {
	every p in ["", "/", "data", "/data/", "//data", "/data/../etc", "/./data", "/a b", "/proc", "/sys/fs", "/dev/shm", null] {
		fs := storage.deny with input as with_volume("modal", {"name": "d", "mount_path": p})
		fx.has(fs, "SBX-VOL-003", "ConfigurationError", "volume.mount_path")
	}
}

test_reserved_mount_path_named if {
	fs := storage.deny with input as with_volume("modal", {"name": "d", "mount_path": "/proc/x"})
	fx.mentions(fs, "SBX-VOL-003", "/proc")
}

test_good_mount_paths_accepted if {
	every p in ["/data", "/mnt/team_a/v1.2", "/workspace/data-set", "/procedures"] {
		fs := storage.deny with input as with_volume("modal", {"name": "d", "mount_path": p})
		fx.lacks(fs, "SBX-VOL-003")
	}
}
