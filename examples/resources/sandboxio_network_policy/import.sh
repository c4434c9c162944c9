# The policy lives only in state, so the import ID is the policy as JSON.
terraform import sandboxio_network_policy.offline '{"egress":"deny","allow":[]}'
