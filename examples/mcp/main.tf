# MCP recipe: the sandbox an agent host reaches through `sandboxio mcp`.
# One template for the agents, offline and capped; one tenant session's spec,
# which `sandboxio mcp` opens and serves to the host for that session only.
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

resource "sandboxio_network_policy" "offline" {} # egress = "deny"

resource "sandboxio_resource_caps" "agent" {
  memory_mb = 256
  disk_mb   = 256
  pids      = 128
}

resource "sandboxio_template" "agent" {
  name             = "mcp-agent"
  image            = "sandboxio/busybox:local" # `sandboxio image prepare` builds it, no registry needed
  network          = sandboxio_network_policy.offline.policy
  resources        = sandboxio_resource_caps.agent.caps
  timeout_seconds  = 30                # each tool call
  lifetime_seconds = 900               # the whole MCP session
  secret_names     = ["CRM_API_TOKEN"] # injected into the sandbox's commands, never into a tool result
  labels           = { team = "agents" }
}

variable "tenant" {
  type    = string
  default = "acme"
}

variable "session" {
  type    = string
  default = "mcp-1"
}

variable "labels" {
  description = "extra labels of the tenant's sandbox (e.g. a cost centre)"
  type        = map(string)
  default     = {}
}

data "sandboxio_tenant_sandbox" "agent" {
  template_spec = sandboxio_template.agent.spec
  tenant_id     = var.tenant
  session_id    = var.session
  extra_labels  = var.labels
}

# terraform output -raw tenant_spec > spec.json
output "tenant_spec" {
  value = data.sandboxio_tenant_sandbox.agent.spec
}

output "tenant_spec_sha256" {
  value = data.sandboxio_tenant_sandbox.agent.spec_sha256
}
