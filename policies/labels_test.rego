package sandboxio.labels_test

import data.sandboxio.fixtures as fx
import data.sandboxio.labels

# Made-up credentials in the shapes the heuristics look for. None is real.
fake := {
	"openai": "sk-proj-Zq3vN8wLk2Xr7tY1pQ9sM4bH6",
	"github": "ghp_R7mK2pX9qL4vN8wZ3tY6bH1sJ5dF0gC2aE",
	"aws": "AKIAJ7Q2ZP4XW9M3LK6T",
	"slack": "xoxb-2048-4096-Zq3vN8wLk2Xr7tY1",
	"e2b": "e2b_7f3a9c1d5e8b2a4f6c0d9e1b3a5f7c9d",
	"dburl": "postgres://agent:hunter2hunter2@db.internal:5432/app",
	"entropy": "Zq3vN8wLk2Xr7tY1pQ9sM4bH6jD0fG5cA8eR",
	"hex": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
	"pem": "-----BEGIN OPENSSH PRIVATE KEY-----",
	"huggingface": "hf_Zq3vN8wLk2Xr7tY1pQ",
	"npm": "npm_Zq3vN8wLk2Xr7tY1pQ",
	"jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.x",
}

with_labels(src, lbls) := object.union(fx.tenant_input("docker/runc", {}), {src: {"labels": lbls}})

# --- SBX-LBL-001: reserved prefix ------------------------------------------

test_reserved_prefix_in_template_labels_refused if {
	fs := labels.deny with input as with_labels("template", {"sandboxio.tenant_id": "other"})
	fx.has(fs, "SBX-LBL-001", "ConfigurationError", "labels")
	fx.mentions(fs, "SBX-LBL-001", `"sandboxio.tenant_id"`)
	fx.mentions(fs, "SBX-LBL-001", "template")
}

test_reserved_prefix_in_tenant_labels_refused if {
	fs := labels.deny with input as with_labels("tenant", {"sandboxio.session_id": "x"})
	fx.has(fs, "SBX-LBL-001", "ConfigurationError", "labels")
	fx.mentions(fs, "SBX-LBL-001", "tenant")
}

test_reserved_prefix_any_case_refused if {
	fs := labels.deny with input as with_labels("template", {"SandboxIO.managed": "false"})
	fx.has(fs, "SBX-LBL-001", "ConfigurationError", "labels")
}

test_other_prefixes_accepted if {
	fs := labels.deny with input as with_labels("template", {"team": "agents", "app.sandboxio.io/name": "x", "sandboxio": "x", "sandboxiox.y": "z"})
	count(fs) == 0
}

# --- SBX-LBL-002: malformed label key --------------------------------------

test_malformed_label_keys_refused if {
	long := concat("", ["k" | some _ in numbers.range(1, 64)])
	every key in ["", "bad key", "-team", "team-", "team=x", "équipe", long] {
		fs := labels.deny with input as with_labels("template", {key: "v"})
		fx.has(fs, "SBX-LBL-002", "ConfigurationError", "labels")
	}
}

test_malformed_tenant_label_key_refused if {
	fs := labels.deny with input as with_labels("tenant", {"a b": "v"})
	fx.has(fs, "SBX-LBL-002", "ConfigurationError", "labels")
	fx.mentions(fs, "SBX-LBL-002", "tenant")
}

test_long_label_key_not_repeated if {
	long := concat("", ["k" | some _ in numbers.range(1, 80)])
	fs := labels.deny with input as with_labels("template", {long: "v"})
	fx.mentions(fs, "SBX-LBL-002", "80 characters")
	not fx.leaks(fs, long)
}

test_wellformed_label_keys_accepted if {
	k63 := concat("", ["k" | some _ in numbers.range(1, 63)])
	fs := labels.deny with input as with_labels("template", {"a": "1", "team": "x", "app.kubernetes.io/name": "x", "cost_center": "x", "Team-2": "x", k63: "x"})
	count(fs) == 0
}

# --- SBX-LBL-003: template name as a label value ---------------------------

with_name(name) := fx.template_with("docker/runc", {"template": {"name": name}})

test_empty_name_refused if {
	fs := labels.deny with input as with_name("")
	fx.has(fs, "SBX-LBL-003", "ConfigurationError", "name")
	fx.mentions(fs, "SBX-LBL-003", "name is empty")
	fx.mentions(fs, "SBX-LBL-003", "sandboxio.template")
	fx.fix_mentions(fs, "SBX-LBL-003", "1 to 128 letters")
}

test_malformed_names_refused if {
	every name in ["my template", "-python", ".python", "_python", "python!", "py\nthon", "équipe", "a/b", "team=x"] {
		fs := labels.deny with input as with_name(name)
		fx.has(fs, "SBX-LBL-003", "ConfigurationError", "name")
		fx.mentions(fs, "SBX-LBL-003", "contains characters other than")
	}
}

test_malformed_name_quoted if {
	fs := labels.deny with input as with_name("my template")
	fx.mentions(fs, "SBX-LBL-003", `name "my template" contains`)
}

test_long_name_refused_by_length if {
	long := concat("", ["n" | some _ in numbers.range(1, 129)])
	fs := labels.deny with input as with_name(long)
	fx.has(fs, "SBX-LBL-003", "ConfigurationError", "name")
	fx.mentions(fs, "SBX-LBL-003", "is 129 characters long (at most 128)")
	not fx.leaks(fs, long)
}

test_names_accepted if {
	longest := concat("", ["n" | some _ in numbers.range(1, 128)])
	every name in ["python", "p", "7", "py-3.12_slim", "Python.Agents", longest] {
		fs := labels.deny with input as with_name(name)
		fx.lacks(fs, "SBX-LBL-003")
	}
}

test_name_checked_at_run_time_too if {
	every inp in [fx.tenant_input("docker/runc", {}), fx.spec_input("docker/runc", {})] {
		fs := labels.deny with input as object.union(inp, {"template": {"name": ""}})
		fx.has(fs, "SBX-LBL-003", "ConfigurationError", "name")
	}
}

test_name_not_judged_without_template if {
	fs_network := labels.deny with input as fx.network_input("docker/runc", {})
	fx.lacks(fs_network, "SBX-LBL-003")
	fs_caps := labels.deny with input as fx.resources_only({})
	fx.lacks(fs_caps, "SBX-LBL-003")
}

# --- SBX-SEC-001: secret names ---------------------------------------------

test_secret_value_as_name_refused_without_repeating_it if {
	fs := labels.deny with input as fx.template_with("e2b", {"template": {"secret_names": ["OPENAI_API_KEY", fake.openai]}})
	fx.has(fs, "SBX-SEC-001", "ConfigurationError", "secret_names")
	fx.mentions(fs, "SBX-SEC-001", "secret_names[1]")
	fx.count_of(fs, "SBX-SEC-001") == 1
	not fx.leaks(fs, fake.openai)
	not fx.leaks(fs, "Zq3vN8")
}

test_malformed_secret_names_refused if {
	long := concat("", ["A" | some _ in numbers.range(1, 129)])
	every name in ["1PASSWORD", "MY-TOKEN", "MY TOKEN", "", long] {
		fs := labels.deny with input as fx.template_with("e2b", {"template": {"secret_names": [name]}})
		fx.has(fs, "SBX-SEC-001", "ConfigurationError", "secret_names")
	}
}

test_secret_names_accepted if {
	a128 := concat("", ["A" | some _ in numbers.range(1, 128)])
	fs := labels.deny with input as fx.template_with("e2b", {"template": {"secret_names": ["OPENAI_API_KEY", "_PRIVATE", "db_password", "X1", a128]}})
	count(fs) == 0
}

# --- SBX-SEC-002: credential in env ----------------------------------------

test_credential_named_env_warned if {
	every key in ["OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "apiKey", "githubToken", "PGPASSWD", "SERVICE_CREDENTIALS", "HF_AUTH", "x-api-key"] {
		ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {key: "placeholder"}}})
		fx.has(ws, "SBX-SEC-002", "SecretInEnvWarning", "env")
		fx.mentions(ws, "SBX-SEC-002", sprintf("%q", [key]))
		fx.fix_mentions(ws, "SBX-SEC-002", "secret_names")
	}
}

test_credential_shaped_value_warned_without_repeating_it if {
	every _, value in fake {
		ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {"SETTING": value}}})
		fx.has(ws, "SBX-SEC-002", "SecretInEnvWarning", "env")
		fx.mentions(ws, "SBX-SEC-002", `"SETTING"`)
		fx.mentions(ws, "SBX-SEC-002", "value")
		not fx.leaks(ws, value)
	}
}

# Hugging Face, npm and JWT shapes are warned (they were known to the DSN
# parser only); words that merely start like them are not.
test_new_token_prefixes_warned if {
	every value in [fake.huggingface, fake.npm, fake.jwt] {
		ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {"SETTING": value}}})
		fx.has(ws, "SBX-SEC-002", "SecretInEnvWarning", "env")
	}
}

test_new_token_prefixes_ordinary_words_not_warned if {
	every value in ["hf_transfer", "npm_config_cache", "eyJ"] {
		ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {"SETTING": value}}})
		fx.count_of(ws, "SBX-SEC-002") == 0
	}
}

test_token_inside_a_value_warned if {
	ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {"HEADER": concat(" ", ["Bearer", fake.openai])}}})
	fx.has(ws, "SBX-SEC-002", "SecretInEnvWarning", "env")
}

test_long_env_key_not_repeated if {
	long := concat("", [concat("", ["X" | some _ in numbers.range(1, 70)]), "_TOKEN"])
	ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {long: "v"}}})
	fx.has(ws, "SBX-SEC-002", "SecretInEnvWarning", "env")
	fx.mentions(ws, "SBX-SEC-002", "76 characters")
	not fx.leaks(ws, long)
}

test_one_warning_per_key if {
	ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": {"GITHUB_TOKEN": fake.github}}})
	fx.count_of(ws, "SBX-SEC-002") == 1
}

test_ordinary_env_not_warned if {
	env := {
		"LANG": "C.UTF-8",
		"KEYBOARD_LAYOUT": "us",
		"TOKENIZERS_PARALLELISM": "false",
		"SSH_AUTH_SOCK": "/run/ssh-agent.sock",
		"NEXT_PUBLIC_API_KEY": "pk_public",
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"PYTHONPATH": "/workspace/src:/workspace/lib",
		"PIP_INDEX_URL": "https://pypi.org/simple",
		"MONKEY": "1",
		"AUTHOR": "agents team",
		"PASSAGE_COUNT": "3",
		"HOME": "/home/sandbox",
		"DESCRIPTION": "a fairly long value with spaces that is certainly not a token at all",
		"DIGITS": "12345678901234567890123456789012345",
	}
	ws := labels.warn with input as fx.template_with("docker/runc", {"template": {"env": env}})
	count(ws) == 0
}

# --- SBX-SEC-003: name in env and secret_names -----------------------------

test_name_in_env_and_secrets_refused if {
	inp := fx.template_with("modal", {"template": {"env": {"OPENAI_API_KEY": "x"}, "secret_names": ["OPENAI_API_KEY"]}})
	fs := labels.deny with input as inp
	fx.has(fs, "SBX-SEC-003", "ConfigurationError", "env")
	fx.mentions(fs, "SBX-SEC-003", `"OPENAI_API_KEY"`)
}

test_name_in_empty_env_value_refused if {
	inp := fx.template_with("modal", {"template": {"env": {"TOKEN": ""}, "secret_names": ["TOKEN"]}})
	fx.has(labels.deny, "SBX-SEC-003", "ConfigurationError", "env") with input as inp
}

test_disjoint_env_and_secrets_accepted if {
	fs := labels.deny with input as fx.template_with("modal", {"template": {"env": {"LANG": "C"}, "secret_names": ["OPENAI_API_KEY"]}})
	count(fs) == 0
}

# --- SBX-LBL-004: more labels than the backend keeps (Vercel: 5 tags) ------

test_labels_within_vercel_tags_accepted if {
	fs := labels.deny with input as fx.tenant_input("vercel", {"labels": {"team": "a"}}) with input.template.labels as {"app": "x"}
	fx.lacks(fs, "SBX-LBL-004")
}

test_labels_beyond_vercel_tags_refused if {
	fs := labels.deny with input as fx.template_with("vercel", {"template": {"labels": {"a": "1", "b": "2", "c": "3"}}})
	fx.has(fs, "SBX-LBL-004", "CapabilityNotSupported", "labels")
	fx.fix_mentions(fs, "SBX-LBL-004", "at most 2 labels of your own")
	fs2 := labels.deny with input as fx.tenant_input("vercel", {"labels": {"team": "a", "run": "b"}}) with input.template.labels as {"app": "x"}
	fx.has(fs2, "SBX-LBL-004", "CapabilityNotSupported", "labels")
}

test_label_count_unlimited_elsewhere if {
	fs := labels.deny with input as fx.template_with("docker/runc", {"template": {"labels": {"a": "1", "b": "2", "c": "3", "d": "4"}}})
	fx.lacks(fs, "SBX-LBL-004")
}
