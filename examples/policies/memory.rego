# METADATA
# title: memory ceiling per team
# description: >-
#   Each team's sandboxes get at most the memory its budget allows. The team
#   is the template's "team" label; templates without one get the default
#   ceiling.
package team.memory

import data.sandboxio.lib

# Memory ceilings in MiB per value of the "team" label.
ceilings := {"agents": 2048, "data": 8192, "ci": 1024}

default_ceiling := 1024

team := object.get(input.template.labels, "team", "")

ceiling := object.get(ceilings, team, default_ceiling)

# METADATA
# title: memory above the team's ceiling
# description: >-
#   A template's memory_mb may not exceed the ceiling of its team (its "team"
#   label), or the default ceiling without one. Hard-mandatory: the ceiling
#   is a budget, raised by changing ceilings in this policy, not by a waiver.
# custom:
#   id: TEAM-MEM-001
#   class: ConfigurationError
#   attribute: resources.memory_mb
#   severity: medium
#   enforcement: hard-mandatory
#   fix: >-
#     Lower resources.memory_mb to the team's ceiling, or ask the platform
#     team to raise the ceiling in the memory policy.
deny contains f if {
	input.template
	input.resources.memory_mb > ceiling
	f := lib.finding(rego.metadata.rule(), msg_over)
}

msg_over := sprintf("memory_mb %d is above the ceiling of %d MiB for %s", [input.resources.memory_mb, ceiling, team_name])

team_name := sprintf("team %s", [lib.quote(team)]) if team != ""

team_name := "templates without a team label" if team == ""

# METADATA
# title: template without a team label
# description: >-
#   Without a "team" label a template gets the default memory ceiling and
#   its sandboxes cannot be traced to a budget.
# custom:
#   id: TEAM-MEM-002
#   class: MissingTeamLabelWarning
#   attribute: labels
#   severity: low
#   enforcement: advisory
#   fix: Add labels = { team = "..." } to the template.
warn contains f if {
	input.kind == "template"
	team == ""
	f := lib.finding(rego.metadata.rule(), sprintf("the template has no team label, so the default ceiling of %d MiB applies", [default_ceiling]))
}
