provider "sandboxio" {
  # Backend used by resources that name none. Credentials never go here:
  # each backend reads them from its environment variables.
  default_backend = "docker://"

  # The team's own Rego policies, evaluated beside the embedded bundle.
  # policy_paths = ["./policies"]
}
