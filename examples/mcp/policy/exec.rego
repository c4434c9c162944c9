# The agents team's exec policy: the built-in pre-execution rules, advisory
# by default, made mandatory for the code agents send through
# `sandboxio mcp --policy examples/mcp/policy`. A download piped into a
# shell, rm -rf / and package installs without egress are blocked
# (ExecutionBlocked); Python with a high-severity bandit finding and shell
# with shellcheck errors need approval (ApprovalRequired) unless the server
# was started with --approve RULE, or a person approves through the host
# (--approve-by-elicitation).

# METADATA
# custom:
#   exec_enforcement:
#     SBX-EXE-001: hard-mandatory
#     SBX-EXE-002: hard-mandatory
#     SBX-EXE-003: hard-mandatory
#     SBX-EXE-004: soft-mandatory
#     SBX-EXE-005: soft-mandatory
package agents.exec
