# METADATA
# title: pre-execution hook
# description: >-
#   Every run and run_code call is decided here before anything executes, on
#   the call's document (kind exec): the command's argv or the code and its
#   language, the template, tenant and session, the sandbox's network policy
#   and the findings of the static analysers (bandit on Python, shellcheck on
#   shell). A rule's finding is in block (the call must not run) or in
#   require_approval (it runs once approved). Built-in exec rules are
#   advisory: a finding is a warning and an audit entry, and the call runs.
#   A team makes one mandatory with exec_enforcement in its policies;
#   static analysis cannot parse every generated snippet, so that is the
#   team's choice. Findings never quote the code or the command.
package sandboxio.exec

import data.sandboxio.lib

# texts are what the textual rules read: the analysed source (run_code's
# program, or the script of sh -c / python3 -c) and the argv joined by
# spaces, so that ["rm", "-rf", "/"] reads as the command line it is.
texts contains input.exec.source.text if is_string(input.exec.source.text)

texts contains concat(" ", input.exec.argv) if count(input.exec.argv) > 0

# Each argument too: the script of bash -c SCRIPT starts a command line of
# its own.
texts contains a if {
	some a in input.exec.argv
	is_string(a)
	contains(a, " ")
}

texts contains input.exec.code if {
	is_string(input.exec.code)
	input.exec.code != ""
}

shell_languages := {"sh", "bash", "dash", "ash", "ksh"}

is_shell if shell_languages[input.exec.source.language]

is_python if input.exec.source.language == "python"

# A command boundary: the start, a separator, a subshell or a quote.
start := `(^|[\s;&|(\x60'"])`

# Where a command starts: the beginning of the text or of a line, after a
# separator, in a subshell or a substitution (optionally under sudo).
command_start := `(^|[\n;&|(\x60{'"]|\$\()\s*(sudo\s+(-\S+\s+)*)?`

# A download (curl, wget, fetch) piped into a shell or an interpreter, or
# handed to one through process or command substitution.
download_pipe := concat("", [
	command_start, `(curl|wget|fetch)\b[^|;&\n]*\|\s*(sudo\s+(-\S+\s+)*)?(env\s+(\S+=\S*\s+)*)?`,
	`(/usr)?(/local)?(/bin/)?((ba|da|z|k|a)?sh|python[0-9.]*|perl|ruby|node)\b`,
])

download_subst := `((ba|da|z|k|a)?sh|python[0-9.]*)\s+(-\S+\s+)*(<\(|-c\s+["']?\$\(|["']?\$\(|<<<\s*["']?\$\()\s*(curl|wget|fetch)\b`

# METADATA
# title: a download piped into a shell
# description: >-
#   curl URL | sh (wget -O- URL | bash, sh -c "$(curl URL)", bash <(curl
#   URL)) runs whatever the server sends at that moment, unreviewed and
#   unpinned: the code that runs is not the code that was checked. Under
#   deny egress the download fails anyway; with egress open it is the
#   classic way to fetch a second stage.
# custom:
#   id: SBX-EXE-001
#   class: ExecutionBlocked
#   attribute: command
#   fix: >-
#     Download to a file, check its sha256 against a pinned value, then run
#     it; better, bake the tool into the image.
block contains f if {
	some msg in download_runs
	f := lib.finding(rego.metadata.rule(), msg)
}

download_runs contains "the call pipes a download into a shell or an interpreter" if {
	some t in texts
	regex.match(concat("", [`(?i)`, download_pipe]), t)
}

download_runs contains "the call runs a download through process or command substitution" if {
	some t in texts
	regex.match(concat("", [`(?i)`, download_subst]), t)
}

# rm with a recursive option (-r, -R, -rf, --recursive, in any order
# with others) whose operand is the root directory (/ or /*).
rm_root := concat("", [
	start, `rm\s+(-\S+\s+)*(-[A-Za-z]*[rR][A-Za-z]*|--recursive)\s+(-\S+\s+)*(--\s+)?`,
	`["']?/\*?["']?(\s|$|[;&|)])`,
])

# METADATA
# title: recursive delete of the root directory
# description: >-
#   rm -rf / (rm -r /*, rm -rf --no-preserve-root /) destroys the sandbox's
#   own filesystem, and whatever volume is mounted in it, such as the
#   tenant's storage. Generated code that does this is broken or hostile.
# custom:
#   id: SBX-EXE-002
#   class: ExecutionBlocked
#   attribute: command
#   fix: >-
#     Delete the directory the program created (rm -rf /tmp/work), never
#     the root.
block contains f if {
	some t in texts
	regex.match(rm_root, t)
	f := lib.finding(rego.metadata.rule(), "the call deletes the root directory recursively")
}

# Package installs that download: pip (and uv pip, python -m pip), apt,
# apk, npm, yarn, pnpm, gem, cargo, go install.
installers := [
	`(pip[0-9.]*|uv\s+pip|python[0-9.]*\s+-m\s+pip)\s+install\b`,
	`(apt-get|apt|aptitude|dnf|yum|microdnf)\s+(-\S+\s+)*install\b`,
	`apk\s+(-\S+\s+)*add\b`,
	`(npm|pnpm)\s+(-\S+\s+)*(install|i|ci|add)\b`,
	`yarn\s+(add|install)\b`,
	`gem\s+install\b`,
	`cargo\s+install\b`,
	`go\s+(install|get)\s`,
]

# Installs that need no network: from local files only.
offline := `(--no-index|--offline|--find-links[= ]+/)`

installs if {
	some t in texts
	some pattern in installers
	regex.match(concat("", [start, pattern]), t)
	not regex.match(offline, t)
}

# METADATA
# title: installing packages with egress denied
# description: >-
#   The sandbox's egress is deny with no allow list, so it has no network
#   (on Docker, network mode none): pip install, apt-get install, npm
#   install and the like cannot reach their index, and the call can only
#   fail, or hang until its timeout. The policy deliberately has no
#   "install, then lock down" window: Docker cannot change a running
#   container's network, and a policy that changes over a sandbox's life
#   would make the audit record ambiguous.
# custom:
#   id: SBX-EXE-003
#   class: ExecutionBlocked
#   attribute: command
#   fix: >-
#     Bake the dependencies into the image (the primary pattern), or upload
#     wheels and install them offline (pip install --no-index --find-links
#     /wheels); or give the template an egress allow list on a backend that
#     enforces one (E2B, Modal, Vercel, Kubernetes).
block contains f if {
	input.network.egress == "deny"
	count(object.get(input.network, "allow", [])) == 0
	installs
	f := lib.finding(rego.metadata.rule(), "the call installs packages, but the sandbox's egress is deny: with no network the download cannot succeed")
}

# bandit_high lists the high-severity bandit findings by ID.
bandit_high := sort({x.id |
	some x in input.analysers.bandit.findings
	x.severity == "high"
})

# METADATA
# title: a high-severity bandit finding in Python code
# description: >-
#   bandit found a high-severity issue in the Python code about to run
#   (subprocess with shell=True, exec of a download, a disabled TLS check,
#   ...). When bandit did not analyse the code (not installed, timed out,
#   could not parse it) the rule cannot show that there is none, so it
#   reports that instead of passing: a rule never passes on an analysis that
#   did not happen.
# custom:
#   id: SBX-EXE-004
#   class: ApprovalRequired
#   attribute: code
#   fix: >-
#     Have a person review the call and approve it (the CLI's --approve
#     SBX-EXE-004, the Go API's Approver), or change the code so that bandit
#     finds no high-severity issue.
require_approval contains f if {
	is_python
	some msg in bandit_messages
	f := lib.finding(rego.metadata.rule(), msg)
}

bandit_messages contains sprintf("bandit reports high-severity issues: %s", [concat(", ", bandit_high)]) if {
	count(bandit_high) > 0
}

bandit_messages contains sprintf("bandit did not analyse the Python code (%s), so a high-severity issue cannot be ruled out", [status_of("bandit")]) if {
	not analysed("bandit")
}

analysed(tool) if input.analysers[tool].status == "ok"

status_of(tool) := s if {
	s := input.analysers[tool].status
	is_string(s)
} else := "not run"

# shellcheck_errors lists the error-level shellcheck findings by ID.
shellcheck_errors := sort({x.id |
	some x in input.analysers.shellcheck.findings
	x.severity == "error"
})

# METADATA
# title: a shell script shellcheck reports errors in
# description: >-
#   shellcheck reports an error-level issue: most often the script does not
#   parse (SC1xxx), which also means that the textual rules above may not
#   read it the way the shell will. When shellcheck did not analyse the
#   script (not installed, timed out) the rule reports that instead of
#   passing.
# custom:
#   id: SBX-EXE-005
#   class: ApprovalRequired
#   attribute: code
#   fix: >-
#     Fix the script so that shellcheck reports no error, or have a person
#     review and approve the call (--approve SBX-EXE-005).
require_approval contains f if {
	is_shell
	some msg in shellcheck_messages
	f := lib.finding(rego.metadata.rule(), msg)
}

shellcheck_messages contains sprintf("shellcheck reports errors: %s", [concat(", ", shellcheck_errors)]) if {
	count(shellcheck_errors) > 0
}

shellcheck_messages contains sprintf("shellcheck did not analyse the script (%s), so the script may not read as these rules read it", [status_of("shellcheck")]) if {
	not analysed("shellcheck")
}
