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

# Refused at plan: E2B does not report blocked egress, so learning mode could
# record nothing there, and it is never degraded to deny. Learning works on
# docker:// with the runc runtime (see the guide "Discover an allow list").
resource "sandboxio_network_policy" "learn" {
  egress = "learn"
}
