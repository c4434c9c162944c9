# Quickstart: an offline, capped sandbox template on the local Docker daemon.
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
  pids      = 128
}

resource "sandboxio_template" "busybox" {
  name             = "quickstart"
  image            = "sandboxio/busybox:local"
  network          = sandboxio_network_policy.offline.policy
  resources        = sandboxio_resource_caps.small.caps
  timeout_seconds  = 30
  lifetime_seconds = 120
  env              = { LANG = "C.UTF-8" }
  labels           = { team = "quickstart" }
}

output "isolation_tier" {
  value = sandboxio_template.busybox.isolation_tier
}

output "spec_sha256" {
  value = sandboxio_template.busybox.spec_sha256
}
