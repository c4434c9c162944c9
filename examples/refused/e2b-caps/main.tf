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

# Refused at plan: E2B fixes caps in the template, so a per-sandbox cap would be ignored.
resource "sandboxio_template" "agents" {
  name      = "agents"
  backend   = "e2b://"
  image     = "code-interpreter-v1"
  resources = { memory_mb = 4096 }
}
