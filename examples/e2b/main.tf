# An E2B template: egress denied but for an allow list (an E2B capability
# the Docker backend does not have), caps left to the E2B template, and the
# spec of one tenant's sandbox, which `sandboxio run --spec` opens on E2B.
# `make demo` applies it and opens the spec against the local E2B
# conformance server (E2B_API_URL and E2B_SANDBOX_URL point at it); with a
# real E2B_API_KEY and no URL override it opens on E2B itself.
terraform {
  required_providers {
    sandboxio = {
      source = "sandboxio/sandboxio"
    }
  }
}

provider "sandboxio" {
  default_backend = "e2b://"
}

variable "template" {
  description = "the E2B template ID or alias (the local server serves \"base\")"
  type        = string
  default     = "base"
}

resource "sandboxio_network_policy" "pypi_only" {
  egress = "deny"
  allow  = ["pypi.org", "*.pythonhosted.org"]
}

resource "sandboxio_template" "agents" {
  name             = "e2b-agents"
  image            = var.template
  network          = sandboxio_network_policy.pypi_only.policy
  timeout_seconds  = 30
  lifetime_seconds = 120
  env              = { LANG = "C.UTF-8" }
  labels           = { team = "e2b-demo" }
}

data "sandboxio_tenant_sandbox" "acme" {
  template_spec = sandboxio_template.agents.spec
  tenant_id     = "acme"
  session_id    = "s-e2b"
}

output "isolation_tier" {
  value = sandboxio_template.agents.isolation_tier
}

# terraform output -raw tenant_spec > spec.json
output "tenant_spec" {
  value = data.sandboxio_tenant_sandbox.acme.spec
}

output "tenant_spec_sha256" {
  value = data.sandboxio_tenant_sandbox.acme.spec_sha256
}
