# What can Modal enforce? Reviewers read this before approving a template.
data "sandboxio_backend" "modal" {
  dsn = "modal://agents"
}

output "modal_allowlist" {
  value = data.sandboxio_backend.modal.allowlist
}

output "modal_allow_kinds" {
  value = data.sandboxio_backend.modal.allow_kinds
}
