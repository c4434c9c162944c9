# Quickstart: an offline, capped sandbox template on the local Docker daemon,
# and the spec of one tenant's sandbox, which `sandboxio run` opens.
terraform {
  required_providers {
    sandboxio = {
      source = "sandboxio/sandboxio"
    }
  }
}

provider "sandboxio" {
  default_backend = "docker://"
}

resource "sandboxio_network_policy" "offline" {}

resource "sandboxio_resource_caps" "small" {
  memory_mb = 256
  disk_mb   = 256
  pids      = 128
}

resource "sandboxio_template" "busybox" {
  name             = "quickstart"
  image            = "sandboxio/busybox:local" # `sandboxio image prepare` builds it, no registry needed
  network          = sandboxio_network_policy.offline.policy
  resources        = sandboxio_resource_caps.small.caps
  timeout_seconds  = 30
  lifetime_seconds = 120
  env              = { LANG = "C.UTF-8" }
  secret_names     = ["DEMO_API_KEY"] # the value comes from the caller's environment at run time, never from Terraform
  labels           = { team = "quickstart" }
}

# One tenant's sandbox: the template's spec with the tenant and session ids
# and the reserved sandboxio.tenant_id / sandboxio.session_id labels.
data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.busybox.spec
  tenant_id     = "acme"
  session_id    = "s-42"
  extra_labels  = { purpose = "demo" }
}

output "isolation_tier" {
  value = sandboxio_template.busybox.isolation_tier
}

output "spec_sha256" {
  value = sandboxio_template.busybox.spec_sha256
}

# terraform output -raw tenant_spec > spec.json
output "tenant_spec" {
  value = data.sandboxio_tenant_sandbox.acme.spec
}

output "tenant_spec_sha256" {
  value = data.sandboxio_tenant_sandbox.acme.spec_sha256
}
