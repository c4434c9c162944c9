# METADATA
# title: pre-execution hook
# description: >-
#   Every run and run_code call is decided here before anything executes, on
#   the call's document (kind exec): the command's argv or the code and its
#   language, the simple commands it runs (wrappers unwrapped, every shell
#   script parsed, standard input handed to a shell or an interpreter read
#   as its code), what the hook could not read, the template, tenant and
#   session, the sandbox's network policy and the findings of the static
#   analysers (bandit on Python, shellcheck on shell). A rule's finding is in block (the call must not run) or in
#   require_approval (it runs once approved). Built-in exec rules are
#   advisory: a finding is a warning and an audit entry, and the call runs.
#   A team makes one mandatory with exec_enforcement in its policies;
#   static analysis cannot parse every generated snippet, so that is the
#   team's choice. Findings never quote the code or the command.
package sandboxio.exec

import data.sandboxio.lib

# The call as the hook read it (input.exec, built by the hook in Go):
#   commands: every simple command the call runs, after its wrappers (env,
#     sudo, busybox, nice, timeout, xargs, paths) are unwrapped and every
#     shell script (sh -c, standard input, run_code, eval, here-documents)
#     is parsed: name (the command word's base name after quote removal),
#     word, literal, args, words [{value, literal, glob, clean}],
#     wrappers, pipeline, position, redirects [{op, fd, target}], and for
#     a shell or an interpreter reads {language, from (argv, stdin, file,
#     module, none, unknown), path, analysed, fed_by (the commands whose
#     output reaches its code)};
#   sources: the code found, {language, from, text};
#   unanalysed: what the hook could not read, {kind (code: code runs that
#     the hook was not given; structure: the code was read but what it runs
#     cannot be told), language, reason}.
# A rule that needs the commands reports each unanalysed item as a
# finding of its own: it never passes on a call it could not read.

structured if is_array(input.exec.commands)

commands := input.exec.commands if structured

else := []

# unread lists why the hook could not read (part of) the call.
unread contains u.reason if some u in input.exec.unanalysed

unread contains "the call's document lists no commands (it was not built by the hook)" if not structured

# unread_code lists the code that runs and was not read, by language.
unread_code contains [object.get(u, "language", ""), u.reason] if {
	some u in input.exec.unanalysed
	u.kind == "code"
}

shell_languages := {"sh", "bash", "dash", "ash", "ksh", "zsh"}

sources := input.exec.sources if is_array(input.exec.sources)

else := [input.exec.source] if is_object(input.exec.source)

else := []

is_shell if {
	some src in sources
	shell_languages[src.language]
}

is_python if {
	some src in sources
	src.language == "python"
}

# texts are the code in other languages than shell (Python, Perl, node,
# awk, ...), which the hook has no parser for: the textual patterns below
# read them for the shell commands they embed (os.system("curl ... | sh")).
# Shell is judged on its parsed commands only.
texts contains src.text if {
	some src in sources
	not shell_languages[src.language]
	is_string(src.text)
}

# A command boundary, in the texts.
start := `(^|[\s;&|(\x60'"])`

command_start := `(^|[\n;&|(\x60{'"]|\$\()\s*(sudo\s+(-\S+\s+)*)?`

download_pipe := concat("", [
	command_start, `(curl|wget|fetch)\b[^|;&\n]*\|\s*(sudo\s+(-\S+\s+)*)?(env\s+(\S+=\S*\s+)*)?`,
	`(/usr)?(/local)?(/bin/)?((ba|da|z|k|a)?sh|python[0-9.]*|perl|ruby|node)\b`,
])

download_subst := `((ba|da|z|k|a)?sh|python[0-9.]*)\s+(-\S+\s+)*(<\(|-c\s+["']?\$\(|["']?\$\(|<<<\s*["']?\$\()\s*(curl|wget|fetch)\b`

# Commands that fetch from the network.
downloaders := {
	"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request", "lwp-download", "get",
	"lynx", "links", "elinks", "w3m", "nc", "ncat", "netcat", "socat", "tftp", "ftp",
}

download(c) if downloaders[lower(c.name)]

# downloaded_files are the files a download of the call writes: curl -o F,
# wget -O F, > F, curl -O and wget's default (the URL's last segment), and
# a later stage of its pipeline (tee F, > F).
downloaded_files contains f if {
	some c in commands
	download(c)
	some rd in c.redirects
	rd.op in {">", ">>", ">|", "&>", "&>>"}
	object.get(rd, "fd", "") in {"", "1"}
	f := rd.target.value
}

downloaded_files contains f if {
	some c in commands
	download(c)
	some i, a in c.args
	output_option(lower(c.name), a)
	f := c.args[i + 1]
}

# -o F, -sSLo F, --output F (curl), -O F, -qO F, --output-document F (wget).
output_option(_, a) if regex.match(`^(-[A-Za-z]*o|--output)$`, a)

output_option("wget", a) if regex.match(`^(-[A-Za-z]*O|--output-document)$`, a)

downloaded_files contains f if {
	some c in commands
	download(c)
	some a in c.args
	m := regex.find_all_string_submatch_n(`^(--output=|--output-document=|-o)(.+)$`, a, 1)
	count(m) > 0
	f := m[0][2]
}

downloaded_files contains f if {
	some c in commands
	download(c)
	remote_name(c)
	some a in c.args
	regex.match(`^[A-Za-z][A-Za-z0-9+.-]*://`, a)
	f := regex.replace(regex.replace(a, `[?#].*$`, ""), `^.*/`, "")
	f != ""
}

downloaded_files contains f if {
	some i in downloads
	d := commands[i]
	d.stages > 1
	p := d.pipeline

	# A comprehension OPA indexes by p: a long script is not read in
	# quadratic time.
	later := [c | some c in commands; c.pipeline == p]
	some c in later
	c.position > d.position
	some f in stage_writes(c)
}

# downloads are the indices of the download commands.
downloads contains i if {
	some i, c in commands
	download(c)
}

stage_writes(c) := {a | lower(c.name) == "tee"; some a in c.args; not startswith(a, "-")} | {rd.target.value |
	some rd in c.redirects
	rd.op in {">", ">>", ">|", "&>", "&>>"}
}

# curl -O (--remote-name), and wget without -O, save to the URL's name.
remote_name(c) if {
	lower(c.name) == "curl"
	some a in c.args
	regex.match(`^(-[A-Za-z]*O[A-Za-z]*|--remote-name|--remote-name-all)$`, a)
}

remote_name(c) if {
	lower(c.name) == "wget"
	not wget_output(c)
}

wget_output(c) if {
	some a in c.args
	regex.match(`^(-[A-Za-z]*O.*|--output-document.*)$`, a)
}

same_file(a, b) if trim_prefix(a, "./") == trim_prefix(b, "./")

# METADATA
# title: a download piped into a shell
# description: >-
#   curl URL | sh (wget -O- URL | bash, sh -c "$(curl URL)", bash <(curl
#   URL), curl -o f URL; sh f) runs whatever the server sends at that
#   moment, unreviewed and unpinned: the code that runs is not the code
#   that was checked. Under deny egress the download fails anyway; with
#   egress open it is the classic way to fetch a second stage. Read on
#   the parsed shell script, whatever the quoting (w""get, "sh"), the
#   wrappers (env, sudo, busybox, absolute paths) or the interpreter the
#   download goes to (sh, bash, python, perl, xargs sh -c). A call the
#   hook could not read (a script file, a computed command name, a
#   wrapper it does not unwrap, code from a pipe) is reported as such:
#   such a download cannot be ruled out.
# custom:
#   id: SBX-EXE-001
#   class: ExecutionBlocked
#   attribute: command
#   fix: >-
#     Download to a file, check its sha256 against a pinned value, then run
#     it in a later call; better, bake the tool into the image. For a call
#     the hook could not read, pass the code itself (sh -c SCRIPT, run_code,
#     or standard input to a shell) rather than a file, a wrapper or a
#     computed command.
block contains f if {
	some msg in download_runs
	f := lib.finding(rego.metadata.rule(), msg)
}

download_runs contains "the call pipes a download into a shell or an interpreter" if {
	some r in commands
	r.reads.from == "stdin"
	some i in r.reads.fed_by
	download(commands[i])
}

download_runs contains "the call runs a download through process or command substitution" if {
	some r in commands
	r.reads.from != "stdin"
	some i in r.reads.fed_by
	download(commands[i])
}

download_runs contains "the call runs a file it downloads" if {
	some f in downloaded_files
	some r in commands
	r.reads.from == "file"
	same_file(r.reads.path, f)
}

download_runs contains "the call runs a file it downloads" if {
	some f in downloaded_files
	some c in commands
	contains(c.word, "/")
	same_file(c.word, f)
}

download_runs contains "the call pipes a download into a shell or an interpreter" if {
	some t in texts
	regex.match(concat("", [`(?i)`, download_pipe]), t)
}

download_runs contains "the call runs a download through process or command substitution" if {
	some t in texts
	regex.match(concat("", [`(?i)`, download_subst]), t)
}

download_runs contains sprintf("the hook could not analyse the call (%s), so a download run as code cannot be ruled out", [why]) if {
	some why in unread
}

# rm's options (before --) and operands.
rm_options(c) := [w |
	some i, w in c.words
	rm_option_at(c, i)
]

rm_operands(c) := [w |
	some i, w in c.words
	not rm_option_at(c, i)
	not dashdash_at(c, i)
]

rm_option_at(c, i) if {
	startswith(c.words[i].value, "-")
	not plain_dash(c.words[i])
	not after_dashdash(c, i)
}

# A literal "-" is an operand; a computed word that starts with - may be
# an option.
plain_dash(w) if {
	w.value in {"-", "--"}
	w.literal
}

dashdash_at(c, i) if {
	c.words[i].value == "--"
	c.words[i].literal
	not after_dashdash(c, i)
}

after_dashdash(c, i) if {
	some j, w in c.words
	j < i
	w.value == "--"
	w.literal
}

# -r, -R in any cluster (-rf, -fR), --recursive and its abbreviations
# (--recur), which GNU rm accepts; options after operands count too.
rm_recursive(c) if {
	some w in rm_options(c)
	regex.match(`^-[A-Za-z]*[rR]`, w.value)
}

rm_recursive(c) if {
	some w in rm_options(c)
	count(w.value) >= 3
	startswith("--recursive", w.value)
}

rms contains c if {
	some c in commands
	lower(c.name) == "rm"
}

# The root: /, //, /., /tmp/.. (cleaned to /), and a pattern of its entries
# (/*, /.?*), quoted or not.
root_like(w) if {
	w.literal
	w.clean == "/"
}

root_like(w) if {
	w.literal
	regex.match(`^/+[^/]*[*?\[][^/]*/*$`, w.value)
}

# METADATA
# title: recursive delete of the root directory
# description: >-
#   rm -rf / (rm -r /*, rm -rf //, rm --recursive --force
#   --no-preserve-root /) destroys the sandbox's own filesystem, and
#   whatever volume is mounted in it, such as the tenant's storage.
#   Generated code that does this is broken or hostile. Read on the parsed
#   commands, whatever the quoting, wrappers and option clusters; a
#   recursive rm whose operand is computed when the call runs, or a call
#   the hook could not read, is reported as such.
# custom:
#   id: SBX-EXE-002
#   class: ExecutionBlocked
#   attribute: command
#   fix: >-
#     Delete the directory the program created, named literally (rm -rf
#     /tmp/work), never the root.
block contains f if {
	some msg in rm_root
	f := lib.finding(rego.metadata.rule(), msg)
}

rm_root contains "the call deletes the root directory recursively" if {
	some c in rms
	rm_recursive(c)
	some w in rm_operands(c)
	root_like(w)
}

rm_root contains "the hook could not analyse the call (an operand of a recursive rm is computed when the call runs), so a recursive delete of the root directory cannot be ruled out" if {
	some c in rms
	rm_recursive(c)
	some w in rm_operands(c)
	not w.literal
}

rm_root contains "the hook could not analyse the call (rm takes arguments xargs reads), so a recursive delete of the root directory cannot be ruled out" if {
	some c in rms
	c.args_from_stdin
}

rm_root contains "the hook could not analyse the call (an option of rm is computed when the call runs), so a recursive delete of the root directory cannot be ruled out" if {
	some c in rms
	some w in rm_options(c)
	not w.literal
	some o in rm_operands(c)
	root_like(o)
}

rm_root contains "the call deletes the root directory recursively" if {
	some t in texts
	regex.match(concat("", [start, `rm\s+(-\S+\s+)*(-[A-Za-z]*[rR][A-Za-z]*|--recursive)\s+(-\S+\s+)*(--\s+)?["']?/\*?["']?(\s|$|[;&|)])`]), t)
}

rm_root contains sprintf("the hook could not analyse the call (%s), so a recursive delete of the root directory cannot be ruled out", [why]) if {
	some why in unread
}

# Package installs that download, by command and subcommand.
first_operand(c) := [a | some a in c.args; not startswith(a, "-")][0]

installs if {
	some c in commands
	installer(c)
	not offline(c)
}

offline(c) if {
	some a in c.args
	a in {"--no-index", "--offline"}
}

installer(c) if {
	regex.match(`^pip[0-9.]*$`, lower(c.name))
	some a in c.args
	a in {"install", "download"}
}

installer(c) if {
	c.reads.from == "module"
	regex.match(`^pip[0-9.]*$`, c.reads.path)
	some a in c.args
	a in {"install", "download"}
}

installer(c) if {
	lower(c.name) == "uv"
	first_operand(c) in {"add", "sync", "pip", "tool", "run"}
	some a in c.args
	a in {"add", "sync", "install", "--with"}
}

installer(c) if lower(c.name) in {"uvx", "cpanm", "cpan"}

installer(c) if {
	lower(c.name) == "pipx"
	first_operand(c) in {"install", "run", "inject"}
}

installer(c) if {
	lower(c.name) in {"apt-get", "apt", "aptitude", "dnf", "yum", "microdnf", "zypper", "brew", "conda", "mamba", "micromamba"}
	some a in c.args
	a in {"install", "in", "reinstall", "create"}
}

installer(c) if {
	lower(c.name) == "apk"
	some a in c.args
	a == "add"
}

installer(c) if {
	lower(c.name) == "pacman"
	some a in c.args
	regex.match(`^-S`, a)
}

installer(c) if {
	lower(c.name) in {"npm", "pnpm", "bun"}
	first_operand(c) in {"install", "i", "ci", "add", "install-test", "it"}
}

installer(c) if {
	lower(c.name) == "yarn"
	first_operand(c) in {"add", "install"}
}

installer(c) if {
	lower(c.name) in {"gem", "cargo", "bundle", "deno"}
	first_operand(c) == "install"
}

installer(c) if {
	lower(c.name) == "composer"
	first_operand(c) in {"install", "require", "update"}
}

installer(c) if {
	lower(c.name) == "go"
	first_operand(c) in {"install", "get"}
}

# The textual patterns, for the code in other languages.
text_installers := [
	`(pip[0-9.]*|uv\s+pip|python[0-9.]*\s+-m\s+pip)\s+install\b`,
	`(apt-get|apt|aptitude|dnf|yum|microdnf)\s+(-\S+\s+)*install\b`,
	`apk\s+(-\S+\s+)*add\b`,
	`(npm|pnpm)\s+(-\S+\s+)*(install|i|ci|add)\b`,
	`yarn\s+(add|install)\b`,
	`gem\s+install\b`,
	`cargo\s+install\b`,
	`go\s+(install|get)\s`,
]

installs if {
	some t in texts
	some pattern in text_installers
	regex.match(concat("", [start, pattern]), t)
	not regex.match(`(--no-index|--offline)`, t)
}

egress_denied if {
	input.network.egress == "deny"
	count(object.get(input.network, "allow", [])) == 0
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
#   would make the audit record ambiguous. Read on the parsed commands; a
#   call the hook could not read is reported as such.
# custom:
#   id: SBX-EXE-003
#   class: ExecutionBlocked
#   attribute: command
#   fix: >-
#     Bake the dependencies into the image (the primary pattern), or upload
#     wheels and install them offline (pip install --no-index --find-links
#     /wheels); or give the template an egress allow list on a backend that
#     enforces one (${allowlist}).
block contains f if {
	egress_denied
	some msg in install_findings
	f := lib.finding(rego.metadata.rule(), msg)
}

install_findings contains "the call installs packages, but the sandbox's egress is deny: with no network the download cannot succeed" if installs

install_findings contains sprintf("the hook could not analyse the call (%s), so a package install cannot be ruled out, and the sandbox's egress is deny", [why]) if {
	some why in unread
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
#   could not parse it), or when Python code runs that the hook was not
#   given (python3 job.py, python3 -m mod, python reading a pipe, a file run
#   by its path), the rule cannot show that there is none, so it reports
#   that instead of passing: a rule never passes on an analysis that did not
#   happen.
# custom:
#   id: SBX-EXE-004
#   class: ApprovalRequired
#   attribute: code
#   fix: >-
#     Have a person review the call and approve it (the CLI's --approve
#     SBX-EXE-004, the Go API's Approver), or change the code so that bandit
#     finds no high-severity issue.
require_approval contains f if {
	some msg in bandit_messages
	f := lib.finding(rego.metadata.rule(), msg)
}

bandit_messages contains sprintf("bandit reports high-severity issues: %s", [concat(", ", bandit_high)]) if {
	is_python
	count(bandit_high) > 0
}

bandit_messages contains sprintf("bandit did not analyse the Python code (%s), so a high-severity issue cannot be ruled out", [status_of("bandit")]) if {
	is_python
	not analysed("bandit")
}

# Python code the hook was not given (a script file, a module, a pipe), or
# code of a language it cannot tell (a file run by its path).
bandit_messages contains sprintf("the hook could not analyse the call (%s), so a high-severity issue in Python code cannot be ruled out", [why]) if {
	some [lang, why] in unread_code
	lang in {"python", ""}
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
#   script (not installed, timed out), or when shell code runs that the
#   hook was not given (sh job.sh, . ./lib.sh, sh reading a pipe, a file
#   run by its path), the rule reports that instead of passing.
# custom:
#   id: SBX-EXE-005
#   class: ApprovalRequired
#   attribute: code
#   fix: >-
#     Fix the script so that shellcheck reports no error, or have a person
#     review and approve the call (--approve SBX-EXE-005).
require_approval contains f if {
	some msg in shellcheck_messages
	f := lib.finding(rego.metadata.rule(), msg)
}

shellcheck_messages contains sprintf("shellcheck reports errors: %s", [concat(", ", shellcheck_errors)]) if {
	is_shell
	count(shellcheck_errors) > 0
}

shellcheck_messages contains sprintf("shellcheck did not analyse the script (%s), so the script may not read as these rules read it", [status_of("shellcheck")]) if {
	is_shell
	not analysed("shellcheck")
}

# Shell code the hook was not given (a script file, a pipe, a sourced
# file), or code of a language it cannot tell.
shellcheck_messages contains sprintf("the hook could not analyse the call (%s), so shellcheck could not check the script that runs", [why]) if {
	some [lang, why] in unread_code
	lang in (shell_languages | {""})
}
