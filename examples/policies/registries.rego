# METADATA
# title: approved image registries
# description: >-
#   Docker sandboxes start only from images the platform team mirrors and
#   scans. An image pulled from anywhere else has not been scanned, and its
#   tag can change under the template without review.
package team.registries

import data.sandboxio.lib

# The registries (host, or host/path prefix) the platform team mirrors and
# scans. An image matches when it starts with one of these and a slash.
approved := {"registry.internal.example", "ghcr.io/acme-platform"}

# METADATA
# title: image from a registry that is not approved
# description: >-
#   The image of a Docker template must come from a registry the platform
#   team mirrors and scans (see approved). Docker Hub short names such as
#   python:3.12-slim come from Docker Hub and are refused. Soft-mandatory:
#   a dated waiver can cover a template while its image moves.
# custom:
#   id: TEAM-IMG-001
#   class: ConfigurationError
#   attribute: image
#   severity: high
#   enforcement: soft-mandatory
#   fix: >-
#     Push the image to registry.internal.example (or ghcr.io/acme-platform)
#     and reference it there; while it moves, add a waiver with a reason and
#     an expiry date.
deny contains f if {
	input.backend.scheme == "docker"
	not approved_image(input.template.image)
	f := lib.finding(rego.metadata.rule(), msg_unapproved)
}

msg_unapproved := sprintf(
	"image %s is not from an approved registry (%s)",
	[lib.quote(input.template.image), concat(", ", sort(approved))],
)

approved_image(image) if {
	some registry in approved
	startswith(image, concat("", [registry, "/"]))
}

# METADATA
# title: image not pinned by digest
# description: >-
#   A tag can be moved to other content after review; a digest cannot.
#   Advisory: pinning is recommended, not required.
# custom:
#   id: TEAM-IMG-002
#   class: UnpinnedImageWarning
#   attribute: image
#   severity: low
#   enforcement: advisory
#   fix: Reference the image by digest (name@sha256:...).
warn contains f if {
	input.backend.scheme == "docker"
	approved_image(input.template.image)
	not contains(input.template.image, "@sha256:")
	f := lib.finding(rego.metadata.rule(), sprintf("image %s is referenced by tag, not by digest", [lib.quote(input.template.image)]))
}
