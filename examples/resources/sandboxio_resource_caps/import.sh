# The caps live only in state, so the import ID is the caps as JSON.
terraform import sandboxio_resource_caps.small '{"memory_mb":1024}'
