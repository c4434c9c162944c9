package team.registries_test

import data.team.registries

# A Docker template as the provider builds it (the input document is
# described in docs/guides/policy-input.md).
template(image) := {
	"input_version": 1,
	"kind": "template",
	"address": "",
	"backend": {"dsn": "docker://", "scheme": "docker", "runtime": "runc", "key": "docker/runc", "options": {}},
	"template": {
		"name": "python", "image": image, "runtime": "", "require_isolation": "",
		"timeout_seconds": 300, "lifetime_seconds": 300, "env": {}, "secret_names": [], "labels": {"team": "agents"},
	},
	"network": {"egress": "deny", "allow": []},
	"resources": {"cpu": 1, "memory_mb": 512, "disk_mb": 1024, "pids": 256},
}

ids(fs) := {f.id | some f in fs}

pinned := "registry.internal.example/python@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

test_docker_hub_image_refused if {
	fs := registries.deny with input as template("python:3.12-slim")
	ids(fs) == {"TEAM-IMG-001"}
	some f in fs
	f.class == "ConfigurationError"
	f.attribute == "image"
	contains(f.msg, "python:3.12-slim")
}

test_lookalike_registry_refused if {
	# A host that merely starts with an approved name is another registry.
	fs := registries.deny with input as template("registry.internal.example.evil.io/python:3.12")
	ids(fs) == {"TEAM-IMG-001"}
}

test_approved_registries_accepted if {
	every image in [pinned, "ghcr.io/acme-platform/tools/python:3.12"] {
		count(registries.deny) == 0 with input as template(image)
	}
}

test_other_backends_not_concerned if {
	# An E2B "image" is a template name, not a registry reference.
	inp := template("base")
	count(registries.deny) == 0 with input as inp with input.backend as {"dsn": "e2b://", "scheme": "e2b", "runtime": "", "key": "e2b", "options": {}}
}

test_network_policy_not_concerned if {
	count(registries.deny) == 0 with input as {"input_version": 1, "kind": "network_policy", "address": "", "network": {"egress": "deny", "allow": []}}
}

test_tag_warned if {
	ws := registries.warn with input as template("registry.internal.example/python:3.12")
	ids(ws) == {"TEAM-IMG-002"}
}

test_digest_not_warned if {
	count(registries.warn) == 0 with input as template(pinned)
}

test_unapproved_image_not_warned_twice if {
	# The refusal says what to do; the advisory would only repeat it.
	count(registries.warn) == 0 with input as template("python:3.12-slim")
}
