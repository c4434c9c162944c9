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

# Refused at plan: learning mode is not available, and is never degraded to deny.
resource "sandboxio_network_policy" "learn" {
  egress = "learn"
}
