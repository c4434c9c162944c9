# Deny all egress: the default, and what most sandboxes want.
resource "sandboxio_network_policy" "offline" {}

# Deny all but a few destinations, on a backend that enforces allow lists (see
# `allow` below); on one that does not, this plan is refused (CapabilityNotSupported).
resource "sandboxio_network_policy" "pypi_only" {
  backend = "e2b://"
  egress  = "deny"
  allow   = ["pypi.org", "files.pythonhosted.org"]
}
