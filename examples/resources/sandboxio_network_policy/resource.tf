# Deny all egress: the default, and what most sandboxes want.
resource "sandboxio_network_policy" "offline" {}

# Deny all but a few destinations. Allow lists are an E2B, Modal and Vercel
# capability; on Docker or Daytona this plan is refused (CapabilityNotSupported).
resource "sandboxio_network_policy" "pypi_only" {
  backend = "e2b://"
  egress  = "deny"
  allow   = ["pypi.org", "files.pythonhosted.org"]
}
