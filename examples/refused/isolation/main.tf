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

# Refused at plan: runc gives the CONTAINER tier, below the requirement.
resource "sandboxio_template" "untrusted" {
  name              = "untrusted"
  image             = "python:3.12-slim"
  runtime           = "runc"
  require_isolation = "MICROVM"
}
