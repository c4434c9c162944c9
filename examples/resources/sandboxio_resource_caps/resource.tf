# Raise memory; cpu, disk_mb and pids keep their modest defaults.
resource "sandboxio_resource_caps" "small" {
  memory_mb = 1024
}

resource "sandboxio_resource_caps" "builder" {
  cpu       = 2
  memory_mb = 4096
  disk_mb   = 8192
  pids      = 1024
}
