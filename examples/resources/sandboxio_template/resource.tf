resource "sandboxio_network_policy" "offline" {}

resource "sandboxio_resource_caps" "small" {
  memory_mb = 1024
}

# A gVisor sandbox on the local Docker daemon, with no network at all.
resource "sandboxio_template" "python" {
  name              = "python"
  backend           = "docker://"
  image             = "python:3.12-slim"
  runtime           = "runsc"
  require_isolation = "GVISOR"
  network           = sandboxio_network_policy.offline.policy
  resources         = sandboxio_resource_caps.small.caps
  timeout_seconds   = 120
  lifetime_seconds  = 600
  env               = { LANG = "C.UTF-8" }
  secret_names      = ["OPENAI_API_KEY"]
  labels            = { team = "agents" }
}

# Untrusted multi-tenant code: a microVM backend with an egress allow list.
resource "sandboxio_template" "agents" {
  name              = "agents"
  backend           = "e2b://"
  image             = "code-interpreter-v1"
  require_isolation = "MICROVM"
  network           = { allow = ["pypi.org"] }
}
