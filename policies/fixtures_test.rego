# Input documents and assertions shared by the *_test.rego files. Inputs take
# their capabilities from data.capabilities.backends, so the tests exercise
# the real capability data, not a copy of it.
package sandboxio.fixtures

import data.sandboxio.brokering
import data.sandboxio.isolation
import data.sandboxio.labels
import data.sandboxio.network
import data.sandboxio.resources
import data.sandboxio.storage
import data.sandboxio.tenancy
import data.sandboxio.timeouts
import data.sandboxio.warmpool

backend_keys := {key | some key, _ in data.capabilities.backends}

backend(key) := {
	"dsn": dsn(d),
	"scheme": d.backend,
	"runtime": d.runtime,
	"key": key,
	"options": {},
} if {
	d := data.capabilities.backends[key]
}

dsn(d) := sprintf("docker://?runtime=%s", [d.runtime]) if d.backend == "docker"

dsn(d) := "modal://agents" if d.backend == "modal"

dsn(d) := "vercel://acme/agents" if d.backend == "vercel"

dsn(d) := sprintf("%s://", [d.backend]) if not d.backend in {"docker", "modal", "vercel"}

# The template of DESIGN.md, valid on every backend: no requirement, deny
# egress with no allow list, default caps, default timeouts.
base_template(key) := {
	"name": "python",
	"image": "python:3.12-slim",
	"runtime": data.capabilities.backends[key].runtime,
	"require_isolation": "",
	"timeout_seconds": 300,
	"lifetime_seconds": 300,
	"env": {"LANG": "C.UTF-8"},
	"secret_names": ["OPENAI_API_KEY"],
	"brokered_secrets": {},
	"labels": {"team": "agents"},
}

default_network := {"egress": "deny", "allow": []}

# template_input is an accepted sandboxio_template on backend key.
template_input(key) := {
	"input_version": 1,
	"kind": "template",
	"address": "sandboxio_template.python",
	"backend": backend(key),
	"capabilities": data.capabilities.backends[key],
	"template": base_template(key),
	"network": default_network,
	"resources": data.capabilities.default_caps,
}

# template_with merges patch into template_input(key) (objects merge
# recursively; arrays and scalars are replaced).
template_with(key, patch) := object.union(template_input(key), patch)

# network_input is a sandboxio_network_policy checked against backend key.
network_input(key, policy) := {
	"input_version": 1,
	"kind": "network_policy",
	"address": "sandboxio_network_policy.p",
	"backend": backend(key),
	"capabilities": data.capabilities.backends[key],
	"network": object.union(default_network, policy),
}

# network_only is a sandboxio_network_policy with no backend configured.
network_only(policy) := {
	"input_version": 1,
	"kind": "network_policy",
	"address": "sandboxio_network_policy.p",
	"network": object.union(default_network, policy),
}

# resources_input is a sandboxio_resource_caps checked against backend key.
resources_input(key, caps) := {
	"input_version": 1,
	"kind": "resource_caps",
	"address": "sandboxio_resource_caps.c",
	"backend": backend(key),
	"capabilities": data.capabilities.backends[key],
	"resources": object.union(data.capabilities.default_caps, caps),
}

# resources_only is a sandboxio_resource_caps with no backend configured.
resources_only(caps) := {
	"input_version": 1,
	"kind": "resource_caps",
	"address": "sandboxio_resource_caps.c",
	"resources": object.union(data.capabilities.default_caps, caps),
}

# tenant_input is a data.sandboxio_tenant_sandbox for tenant acme, session s-42.
tenant_input(key, tenant) := object.union(template_input(key), {
	"kind": "tenant_sandbox",
	"address": "data.sandboxio_tenant_sandbox.acme",
	"tenant": object.union({"tenant_id": "acme", "session_id": "s-42", "labels": {}}, tenant),
})

# spec_input is what the run-time helper evaluates before provisioning.
spec_input(key, tenant) := object.union(tenant_input(key, tenant), {"kind": "spec", "address": ""})

# with_caps replaces the capability descriptor of inp by caps, a synthetic
# descriptor for capabilities no real backend has.
with_caps(inp, caps) := object.union(object.remove(inp, ["capabilities"]), {"capabilities": caps})

without(inp, field) := object.remove(inp, [field])

# Every refusal and every warning of the bundle, for the current input.
all_deny := (((((((network.deny | resources.deny) | timeouts.deny) | isolation.deny) | labels.deny) | tenancy.deny) | storage.deny) | warmpool.deny) | brokering.deny

all_warn := (((network.warn | isolation.warn) | labels.warn) | timeouts.warn) | resources.warn

ids(findings) := {f.id | some f in findings}

# has: findings hold a complete finding with this id, class and attribute.
has(findings, id, class, attribute) if {
	some f in findings
	f.id == id
	f.class == class
	f.attribute == attribute
	f.msg != ""
	f.fix != ""
}

# lacks: no finding with this id.
lacks(findings, id) if not id in ids(findings)

# lacks_at: no finding with this id on this attribute.
lacks_at(findings, id, attribute) if {
	not some_at(findings, id, attribute)
}

some_at(findings, id, attribute) if {
	some f in findings
	f.id == id
	f.attribute == attribute
}

# count_of: how many findings carry this id.
count_of(findings, id) := count([f | some f in findings; f.id == id])

# mentions: some finding with this id has text in its message.
mentions(findings, id, text) if {
	some f in findings
	f.id == id
	contains(f.msg, text)
}

# fix_mentions: some finding with this id has text in its fix.
fix_mentions(findings, id, text) if {
	some f in findings
	f.id == id
	contains(f.fix, text)
}

# leaks: some finding, in any field, repeats text.
leaks(findings, text) if {
	some f in findings
	some _, v in f
	contains(v, text)
}
