# METADATA
# title: the team's pre-execution rules
# description: >-
#   Run-time decisions on each run and run_code call (an exec package: its
#   name ends in .exec). The METADATA below makes two built-in exec rules,
#   advisory by default, hard-mandatory for this team: a download piped into
#   a shell and rm -rf / are blocked outright. TEAM-EXE-001 adds the team's
#   own rule.
# custom:
#   exec_enforcement:
#     SBX-EXE-001: hard-mandatory
#     SBX-EXE-002: hard-mandatory
package team.exec

import data.sandboxio.lib

# Texts a reverse shell shows in: bash's /dev/tcp redirection, or a netcat
# that executes a program for its peer.
reverse_shell := `(/dev/(tcp|udp)/[^ ]+/[0-9]+|\b(nc|ncat|netcat)\b[^|;&]*\s-(e|c)\s)`

texts contains input.exec.source.text if is_string(input.exec.source.text)

texts contains concat(" ", input.exec.argv) if count(input.exec.argv) > 0

# METADATA
# title: a reverse shell
# description: >-
#   A shell connected to a remote host hands the sandbox to whoever listens
#   there. Soft-mandatory: a red-team exercise can waive it for its own
#   tenant (address exec/TEMPLATE/TENANT/SESSION) until a date.
# custom:
#   id: TEAM-EXE-001
#   class: ExecutionBlocked
#   attribute: command
#   severity: critical
#   enforcement: soft-mandatory
#   fix: >-
#     Do not open shells to remote hosts from a sandbox; for an approved
#     exercise, add a waiver for the tenant with an expiry.
block contains f if {
	some t in texts
	regex.match(reverse_shell, t)
	f := lib.finding(rego.metadata.rule(), "the call opens a shell to a remote host")
}
