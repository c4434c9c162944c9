# Whole-bundle cases: what a complete, correct configuration looks like on
# every backend, and the examples of DESIGN.md.
package sandboxio.bundle_test

import data.sandboxio.fixtures as fx

# The base template is accepted on every backend, Daytona included since its
# memory cap is known to bound swap (SBX-RES-006 no longer refuses it).
test_base_template_accepted_on_every_backend if {
	every key in fx.backend_keys {
		# Vercel sizes sandboxes in vCPUs of 2048 MB: the default 512 MB is
		# not a size it takes (SBX-RES-007).
		# Kubernetes cannot deny egress yet (SBX-NET-008): the default deny
		# is refused there.
		expected := ({id | data.capabilities.backends[key].network.deny == false; id := "SBX-NET-008"} | {id | data.capabilities.backends[key].caps.memory_bounds_swap == false; id := "SBX-RES-006"}) | {id |
			per := data.capabilities.backends[key].caps.vcpu_memory_mb
			data.capabilities.default_caps.memory_mb != data.capabilities.default_caps.cpu * per
			id := "SBX-RES-007"
		}
		fx.ids(fx.all_deny) == expected with input as fx.template_input(key)
		fx.ids(fx.all_deny) == expected with input as fx.tenant_input(key, {})
		fx.ids(fx.all_deny) == expected with input as fx.spec_input(key, {})
	}
}

# Warnings: an unverified tier (Daytona), a lifetime the backend enforces
# only as an idle limit (Daytona), and default caps the backend cannot set
# per sandbox (Modal, Vercel, Daytona, Kubernetes).
test_base_template_warns_only_on_unverified_tier_idle_lifetime_and_unapplied_caps if {
	every key in fx.backend_keys {
		ws := fx.all_warn with input as fx.template_input(key)
		d := data.capabilities.backends[key]
		unapplied := {id | d.caps.mode == "per_sandbox"; count(d.caps.settable) < 4; id := "SBX-RES-009"}
		expected := ({id | d.tier == "UNKNOWN"; id := "SBX-ISO-004"} | {id | d.lifetime_enforcement == "idle"; id := "SBX-TMO-005"}) | unapplied
		fx.ids(ws) == expected
	}
	fx.ids(fx.all_warn) == {"SBX-ISO-004", "SBX-TMO-005", "SBX-RES-009"} with input as fx.template_input("daytona")
	fx.ids(fx.all_warn) == set() with input as fx.template_input("docker/runc")
}

test_network_policy_and_caps_alone_accepted if {
	count(fx.all_deny) == 0 with input as fx.network_only({"allow": ["151.101.0.0/16"]})
	count(fx.all_deny) == 0 with input as fx.resources_only({"memory_mb": 1024})
	count(fx.all_warn) == 0 with input as fx.resources_only({"memory_mb": 1024})
}

# DESIGN.md: the pypi_only policy is refused on Docker ...
test_design_pypi_only_refused_on_docker if {
	fs := fx.all_deny with input as fx.network_input("docker/runc", {"egress": "deny", "allow": ["151.101.0.0/16"]})
	fx.ids(fs) == {"SBX-NET-003"}
}

# ... and the python template of DESIGN.md is accepted on docker/runsc once
# the allow list is gone.
test_design_python_template_on_runsc if {
	inp := fx.template_with("docker/runsc", {
		"backend": {"dsn": "docker://"},
		"template": {
			"runtime": "runsc", "require_isolation": "GVISOR",
			"timeout_seconds": 120, "lifetime_seconds": 600,
			"env": {"LANG": "C.UTF-8"}, "secret_names": ["OPENAI_API_KEY"], "labels": {"team": "agents"},
		},
		"resources": {"memory_mb": 1024},
	})
	count(fx.all_deny) == 0 with input as inp
	count(fx.all_warn) == 0 with input as inp
	fs := fx.all_deny with input as inp with input.network.allow as ["151.101.0.0/16"]
	fx.ids(fs) == {"SBX-NET-003"}
}

# Every finding of every rule is complete, whatever fired it.
test_findings_complete if {
	inp := fx.template_with("modal", {
		"template": {
			"require_isolation": "MICROVM", "runtime": "runc", "timeout_seconds": 0,
			"lifetime_seconds": 999999, "labels": {"sandboxio.x": "1", "bad key": "2"},
			"secret_names": ["bad name", "LANG"], "env": {"GITHUB_TOKEN": "x"},
		},
		"network": {"egress": "learn", "allow": ["pypi.org", "http://x"]},
		"resources": {"pids": 0, "disk_mb": 4096},
	})
	fs := fx.all_deny | fx.all_warn with input as inp
	count(fs) >= 10
	every f in fs {
		regex.match(`^SBX-[A-Z]{3}-[0-9]{3}$`, f.id)
		f.class != ""
		f.attribute != ""
		f.msg != ""
		f.fix != ""
	}
}
