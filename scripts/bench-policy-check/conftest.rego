# The conftest side of scripts/bench-policy-check.sh: the sandboxio bundle
# (copied beside this file, tests excluded) evaluated by conftest on the same
# plan JSON. This adapter builds, in Rego, the input document that
# `sandboxio policy check` builds in Go for each resource, and runs every
# built-in package's deny and warn rules on it, so both tools apply the same
# rules to the same documents. It covers what the benchmark plan holds:
# DSNs without query options and fully known values.
package main

default_backend := object.get(input, ["configuration", "provider_config", "sandboxio", "expressions", "default_backend", "constant_value"], "")

resources contains r if {
	some rc in input.resource_changes
	rc.mode == "managed"
	rc.type in {"sandboxio_template", "sandboxio_network_policy", "sandboxio_resource_caps"}
	rc.change.actions != ["delete"]
	r := {"address": rc.address, "type": rc.type, "after": rc.change.after}
}

or_default(x, d) := d if x == null

or_default(x, d) := x if x != null

backend(dsn, runtime) := b if {
	scheme := lower(split(dsn, "://")[0])
	scheme == "docker"
	rt := or_default(runtime, "runc")
	b := {"dsn": dsn, "scheme": scheme, "runtime": rt, "key": concat("/", ["docker", rt]), "options": {}}
}

backend(dsn, _) := b if {
	scheme := lower(split(dsn, "://")[0])
	scheme != "docker"
	b := {"dsn": dsn, "scheme": scheme, "runtime": "", "key": scheme, "options": {}}
}

with_backend(doc, dsn, runtime) := object.union(doc, {"backend": b, "capabilities": data.capabilities.backends[b.key]}) if {
	dsn != ""
	b := backend(dsn, runtime)
}

with_backend(doc, "", _) := doc

document(r) := with_backend(doc, r.after.backend, r.after.runtime) if {
	r.type == "sandboxio_template"
	a := r.after
	doc := {
		"input_version": 1, "kind": "template", "address": r.address,
		"template": {
			"name": a.name, "image": a.image, "runtime": or_default(a.runtime, ""),
			"require_isolation": or_default(a.require_isolation, ""),
			"timeout_seconds": a.timeout_seconds, "lifetime_seconds": a.lifetime_seconds,
			"env": or_default(a.env, {}), "secret_names": or_default(a.secret_names, []), "labels": or_default(a.labels, {}),
		},
		"network": {"egress": a.network.egress, "allow": a.network.allow},
		"resources": a.resources,
	}
}

document(r) := with_backend(doc, or_default(r.after.backend, default_backend), null) if {
	r.type == "sandboxio_network_policy"
	doc := {"input_version": 1, "kind": "network_policy", "address": r.address,
		"network": {"egress": r.after.egress, "allow": r.after.allow}}
}

document(r) := with_backend(doc, or_default(r.after.backend, default_backend), null) if {
	r.type == "sandboxio_resource_caps"
	a := r.after
	doc := {"input_version": 1, "kind": "resource_caps", "address": r.address,
		"resources": {"cpu": a.cpu, "memory_mb": a.memory_mb, "disk_mb": a.disk_mb, "pids": a.pids}}
}

# Every built-in package's deny and warn rules, as the engine queries them.
findings(doc) := {"deny": d, "warn": w} if {
	d := {f | some f in data.sandboxio[_].deny} with input as doc
	w := {f | some f in data.sandboxio[_].warn} with input as doc
}

results[r.address] := findings(document(r)) if some r in resources

deny contains msg if {
	some addr, fs in results
	some f in fs.deny
	msg := sprintf("%s: %s %s", [addr, f.id, f.msg])
}

warn contains msg if {
	some addr, fs in results
	some f in fs.warn
	msg := sprintf("%s: %s %s", [addr, f.id, f.msg])
}
