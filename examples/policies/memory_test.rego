package team.memory_test

import data.team.memory

template(labels, memory_mb) := {
	"input_version": 1,
	"kind": "template",
	"address": "",
	"backend": {"dsn": "docker://", "scheme": "docker", "runtime": "runc", "key": "docker/runc", "options": {}},
	"template": {
		"name": "python", "image": "registry.internal.example/python:3.12", "runtime": "", "require_isolation": "",
		"timeout_seconds": 300, "lifetime_seconds": 300, "env": {}, "secret_names": [], "labels": labels,
	},
	"network": {"egress": "deny", "allow": []},
	"resources": {"cpu": 1, "memory_mb": memory_mb, "disk_mb": 1024, "pids": 256},
}

ids(fs) := {f.id | some f in fs}

test_over_team_ceiling_refused if {
	fs := memory.deny with input as template({"team": "agents"}, 4096)
	ids(fs) == {"TEAM-MEM-001"}
	some f in fs
	f.attribute == "resources.memory_mb"
	contains(f.msg, "2048 MiB")
	contains(f.msg, `team "agents"`)
}

test_at_team_ceiling_accepted if {
	count(memory.deny) == 0 with input as template({"team": "agents"}, 2048)
	count(memory.deny) == 0 with input as template({"team": "data"}, 8192)
}

test_unknown_team_gets_default_ceiling if {
	ids(memory.deny) == {"TEAM-MEM-001"} with input as template({"team": "marketing"}, 2048)
	count(memory.deny) == 0 with input as template({"team": "marketing"}, 1024)
}

test_no_team_label_default_ceiling_and_warning if {
	fs := memory.deny with input as template({}, 2048)
	some f in fs
	contains(f.msg, "without a team label")
	ids(memory.warn) == {"TEAM-MEM-002"} with input as template({}, 512)
}

test_team_label_not_warned if {
	count(memory.warn) == 0 with input as template({"team": "ci"}, 512)
}

test_caps_resource_alone_not_concerned if {
	# sandboxio_resource_caps has no labels: the template that uses the caps is checked.
	count(memory.deny) == 0 with input as {"input_version": 1, "kind": "resource_caps", "address": "", "resources": {"cpu": 1, "memory_mb": 65536, "disk_mb": 1024, "pids": 256}}
}

test_per_tenant_spec_checked_too if {
	inp := template({"team": "agents"}, 4096)
	ids(memory.deny) == {"TEAM-MEM-001"} with input as inp with input.kind as "tenant_sandbox"
}
