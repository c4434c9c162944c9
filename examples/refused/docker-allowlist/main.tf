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

# Refused at plan: Docker cannot filter egress per destination.
resource "sandboxio_network_policy" "pypi_only" {
  allow = ["151.101.0.0/16"]
}
