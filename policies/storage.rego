# METADATA
# title: storage
# description: >-
#   A template may name a persistent volume. Its files outlive every
#   sandbox, so it is accepted only where the backend can give each tenant a
#   volume of its own (tenant_storage in the capability data): a volume that
#   two tenants mount is a channel between them. The name and mount path must
#   be ones every such backend takes.
package sandboxio.storage

import data.sandboxio.lib

# METADATA
# title: volume on a backend that cannot scope storage per tenant
# description: >-
#   The backend would mount the same volume into every tenant's sandbox (or
#   has no volumes at all), so one tenant could read and change another's
#   files. ${no_tenant_storage} are refused; ${tenant_storage} mounts a
#   volume of the tenant's own.
# custom:
#   id: SBX-VOL-001
#   class: CapabilityNotSupported
#   attribute: volume
#   fix: >-
#     Remove volume from the template, or use a backend that scopes volumes
#     per tenant (modal://APP).
deny contains f if {
	input.template.volume
	not input.capabilities.tenant_storage
	f := lib.finding(rego.metadata.rule(), msg_unscoped)
}

msg_unscoped := sprintf(
	"backend %s cannot give each tenant a volume of its own: every tenant's sandboxes would share the files of volume %q",
	[object.get(input, ["backend", "key"], "(none)"), object.get(input.template.volume, "name", "")],
)

# METADATA
# title: malformed volume name
# description: >-
#   The backend names each tenant's volume after this name plus a digest of
#   the tenant id, within the 63 characters Modal allows an object name.
# custom:
#   id: SBX-VOL-002
#   class: ConfigurationError
#   attribute: volume.name
#   fix: >-
#     Set volume.name to 1 to 38 letters, digits, ".", "_" or "-", starting
#     with a letter or digit.
deny contains f if {
	v := input.template.volume
	not valid_name(object.get(v, "name", ""))
	f := lib.finding(rego.metadata.rule(), "volume.name is missing, longer than 38 characters or holds characters a volume name cannot")
}

valid_name(n) if {
	is_string(n)
	regex.match(`^[A-Za-z0-9][A-Za-z0-9._-]{0,37}$`, n)
}

# METADATA
# title: malformed or reserved volume mount path
# description: >-
#   The volume is mounted at a clean absolute path; the root and the
#   kernel's filesystems (/proc, /sys, /dev) are refused, as a mount there
#   would hide or replace what the sandbox needs.
# custom:
#   id: SBX-VOL-003
#   class: ConfigurationError
#   attribute: volume.mount_path
#   fix: >-
#     Set volume.mount_path to an absolute path such as /data: segments of
#     letters, digits, ".", "_" or "-" not starting with a dot, at most 255
#     characters, not / and not under /proc, /sys or /dev.
deny contains f if {
	v := input.template.volume
	not valid_mount(object.get(v, "mount_path", ""))
	f := lib.finding(rego.metadata.rule(), msg_mount(object.get(v, "mount_path", "")))
}

valid_mount(p) if {
	is_string(p)
	count(p) <= 255
	regex.match(`^(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$`, p)
	not split(p, "/")[1] in {"proc", "sys", "dev"}
}

msg_mount(p) := sprintf("volume.mount_path %q is under %s, which a volume may not hide", [p, concat("", ["/", split(p, "/")[1]])]) if {
	is_string(p)
	split(p, "/")[1] in {"proc", "sys", "dev"}
} else := "volume.mount_path is not a clean absolute path other than / (segments of letters, digits, \".\", \"_\" or \"-\", none starting with a dot)"
