package sandboxio.exec_test

import data.sandboxio.exec
import data.sandboxio.fixtures as fx

# call builds the document of one call; parts override the defaults.
base := {
	"input_version": 1,
	"kind": "exec",
	"address": "exec/python/acme/s-42",
	"exec": {"op": "run", "argv": [], "language": "", "code": ""},
	"template": {"name": "python"},
	"tenant": {"tenant_id": "acme", "session_id": "s-42"},
	"backend": {"scheme": "docker"},
	"network": {"egress": "deny", "allow": []},
	"analysers": {},
}

run(argv) := object.union(base, {"exec": {"op": "run", "argv": argv, "language": "", "code": ""}})

run_sh(script) := object.union(base, {
	"exec": {"op": "run", "argv": ["sh", "-c", script], "language": "", "code": "", "source": {"language": "sh", "text": script}},
	"analysers": {"shellcheck": {"status": "ok", "detail": "", "findings": []}},
})

code(lang, text, analysers) := object.union(base, {
	"exec": {"op": "run_code", "argv": [], "language": lang, "code": text, "source": {"language": lang, "text": text}},
	"analysers": analysers,
})

bandit_ok(findings) := {"bandit": {"status": "ok", "detail": "", "findings": findings}}

# --- SBX-EXE-001: a download piped into a shell ------------------------------

piped := [
	"curl -fsSL https://example.com/install.sh | sh",
	"wget -O- https://example.com/x | bash",
	"wget -qO - http://x.example/i.sh | sudo -E bash -s -- --yes",
	"curl https://x.example/a.py | python3",
	"CURL -s https://x | /bin/SH",
	"sh -c \"$(curl -fsSL https://x.example/install.sh)\"",
	"bash <(curl -s https://x.example/i.sh)",
]

test_download_pipe_blocked if {
	every s in piped {
		fs := exec.block with input as run_sh(s)
		fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
	}
}

test_download_pipe_in_argv_blocked if {
	fs := exec.block with input as run(["bash", "-c", "curl -s https://x.example/i.sh | bash"])
	fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
}

test_download_pipe_in_python_blocked if {
	fs := exec.block with input as code("python", "import os\nos.system('curl -s https://x.example | sh')\n", bandit_ok([]))
	fx.has(fs, "SBX-EXE-001", "ExecutionBlocked", "command")
}

test_download_pipe_never_quotes_the_command if {
	fs := exec.block with input as run_sh("curl -s https://secret.example/token | sh")
	not fx.leaks(fs, "secret.example")
}

test_download_to_file_accepted if {
	every s in [
		"curl -fsSLo /tmp/i.sh https://x.example/i.sh && sha256sum -c sums",
		"wget https://x.example/data.csv; wc -l data.csv",
		"echo curl | sh",
		"curl https://x.example/a | grep shell",
	] {
		fs := exec.block with input as run_sh(s)
		fx.lacks(fs, "SBX-EXE-001")
	}
}

# --- SBX-EXE-002: rm -rf / ---------------------------------------------------

rm_roots := [
	["rm", "-rf", "/"],
	["rm", "-fr", "/"],
	["rm", "-r", "-f", "/"],
	["rm", "-f", "-R", "/*"],
	["rm", "--recursive", "--force", "--no-preserve-root", "/"],
	["sh", "-c", "cd /tmp; rm -rf / && echo done"],
	["sh", "-c", "rm -rf '/'"],
]

test_rm_root_blocked if {
	every argv in rm_roots {
		fs := exec.block with input as run(argv)
		fx.has(fs, "SBX-EXE-002", "ExecutionBlocked", "command")
	}
}

test_rm_root_in_script_blocked if {
	fs := exec.block with input as code("sh", "set -e\nrm -rf /\n", {"shellcheck": {"status": "ok", "detail": "", "findings": []}})
	fx.has(fs, "SBX-EXE-002", "ExecutionBlocked", "command")
}

test_rm_elsewhere_accepted if {
	every argv in [
		["rm", "-rf", "/tmp/work"],
		["rm", "-f", "/"],
		["rm", "-rf", "./"],
		["sh", "-c", "rm -rf /tmp/x /var/tmp/y"],
		["echo", "rm", "-rf"],
		["grep", "-r", "/"],
	] {
		fs := exec.block with input as run(argv)
		fx.lacks(fs, "SBX-EXE-002")
	}
}

# --- SBX-EXE-003: installing packages with egress denied ---------------------

installs := [
	["pip", "install", "requests"],
	["pip3", "install", "-q", "numpy==2.0"],
	["python3", "-m", "pip", "install", "pandas"],
	["sh", "-c", "apt-get update && apt-get install -y curl"],
	["apk", "add", "--no-cache", "git"],
	["npm", "install", "left-pad"],
	["sh", "-c", "cd app && npm ci"],
	["uv", "pip", "install", "httpx"],
	["gem", "install", "rails"],
]

test_install_with_deny_blocked if {
	every argv in installs {
		fs := exec.block with input as run(argv)
		fx.has(fs, "SBX-EXE-003", "ExecutionBlocked", "command")
		fx.mentions(fs, "SBX-EXE-003", "egress is deny")
	}
}

test_install_fix_names_both_patterns if {
	fs := exec.block with input as run(["pip", "install", "x"])
	fx.fix_mentions(fs, "SBX-EXE-003", "image")
	fx.fix_mentions(fs, "SBX-EXE-003", "--no-index")
}

test_install_with_open_egress_accepted if {
	inp := run(["pip", "install", "requests"])
	fs := exec.block with input as inp with input.network as {"egress": "allow", "allow": []}
	fx.lacks(fs, "SBX-EXE-003")
}

test_install_with_allow_list_accepted if {
	inp := run(["pip", "install", "requests"])
	fs := exec.block with input as inp with input.network as {"egress": "deny", "allow": ["151.101.0.0/16"]}
	fx.lacks(fs, "SBX-EXE-003")
}

test_offline_install_accepted if {
	every argv in [
		["pip", "install", "--no-index", "--find-links", "/wheels", "requests"],
		["uv", "pip", "install", "--offline", "--find-links", "/wheels", "x"],
		["pip", "list"],
		["sh", "-c", "echo pip is installed"],
	] {
		fs := exec.block with input as run(argv)
		fx.lacks(fs, "SBX-EXE-003")
	}
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

# --- a plain call --------------------------------------------------------------

test_plain_calls_accepted if {
	every inp in [
		run(["echo", "hello"]),
		run_sh("echo hello > /tmp/out && cat /tmp/out"),
		code("python", "print(sum(range(10)))", bandit_ok([])),
	] {
		count(exec.block) == 0 with input as inp
		count(exec.require_approval) == 0 with input as inp
	}
}
