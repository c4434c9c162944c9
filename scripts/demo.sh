#!/usr/bin/env bash
# demo.sh: the main job, end to end, on this machine (run by `make demo`,
# which builds bin/terraform-provider-sandboxio and bin/sandboxio first).
#
# 1. The local image, built without any registry (sandboxio image prepare).
# 2. terraform apply on examples/quickstart: a network policy, resource caps,
#    a template and the tenant data source; the tenant's spec is written to a
#    file with `terraform output -raw`.
# 3. sandboxio run and run-code open a sandbox for tenant acme, session s-42,
#    from that spec and its sha256, with a secret from the environment; a
#    timeout and a cap show their own exit codes; an edited spec is refused.
# 4. The audit records of all that.
# 5. An E2B template (examples/e2b) opened through the same CLI against the
#    local E2B conformance server (bin/e2bserver, the subset of E2B's API
#    the adapter uses, refereed by E2B's official SDK; its commands run in
#    a hardened local Docker sandbox), then the server stopped by its PID.
# 6. terraform plan refusing configurations the backend cannot enforce
#    (a Docker egress allow list among them), each with class, rule and fix.
# 7. terraform destroy, and a check that no sandbox container is left.
# The provider is the one just built (bin/), installed through a dev
# override; nothing is downloaded. Needs a Docker daemon (scripts/docker-up.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TERRAFORM=${TERRAFORM:-$(command -v terraform || echo /usr/local/bin/terraform)}
SANDBOXIO=${SANDBOXIO:-$root/bin/sandboxio}
E2BSERVER=${E2BSERVER:-$root/bin/e2bserver}
[ -x "$SANDBOXIO" ] || { echo "demo: $SANDBOXIO not built; run make demo" >&2; exit 1; }
[ -x "$E2BSERVER" ] || { echo "demo: $E2BSERVER not built; run make demo" >&2; exit 1; }
started=$SECONDS

work=$(mktemp -d)
e2b_pid=
# stop_e2b stops the local E2B server this script started, by its PID (it
# kills the sandboxes it holds on SIGTERM), and waits for it.
stop_e2b() {
	if [ -n "$e2b_pid" ]; then
		kill -TERM "$e2b_pid" 2>/dev/null || true
		wait "$e2b_pid" 2>/dev/null || true
		e2b_pid=
	fi
}
cleanup() {
	stop_e2b
	for d in quickstart e2b; do
		if [ -f "$work/$d/terraform.tfstate" ]; then
			(cd "$work/$d" && "$TERRAFORM" destroy -auto-approve -no-color >/dev/null 2>&1) || true
		fi
	done
	rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "sandboxio/sandboxio" = "$root/bin"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE=$work/terraformrc
export CHECKPOINT_DISABLE=1
export TF_IN_AUTOMATION=1

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say() { printf '$ %s\n' "$*"; }
# dev_overrides makes terraform print a warning block on every command; it
# says nothing about sandboxio, so the demo drops it (the block ends with the
# word "releases." on a line of its own or after "published").
tf() { "$TERRAFORM" "$@" -no-color 2>&1 | awk '/Warning: Provider development overrides are in effect/{skip=1} skip&&/releases\.$/{skip=0;next} !skip'; }
# expect CODE CMD...: runs CMD, which must exit with CODE.
expect() {
	local want=$1 code=0
	shift
	"$@" || code=$?
	if [ "$code" != "$want" ]; then
		echo "demo: '$*' exited $code, want $want" >&2
		exit 1
	fi
	echo "(exit code $code)"
}

step "prepare the sandbox image locally (no registry)"
say "sandboxio image prepare"
"$SANDBOXIO" image prepare

cp -r examples/quickstart "$work/quickstart"
step "terraform apply examples/quickstart"
(cd "$work/quickstart" && tf apply -auto-approve)
spec_sha=$(cd "$work/quickstart" && "$TERRAFORM" output -raw tenant_spec_sha256 2>/dev/null)
(cd "$work/quickstart" && "$TERRAFORM" output -raw tenant_spec 2>/dev/null) >"$work/spec.json"
[ -n "$spec_sha" ] && [ -s "$work/spec.json" ] || { echo "demo: no tenant spec output" >&2; exit 1; }
echo "tenant spec written to spec.json (sha256 $spec_sha):"
cat "$work/spec.json"
echo

# The secret the template names; the CLI reads it from its environment and
# never prints, logs or stores it.
DEMO_API_KEY="demo-key-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
export DEMO_API_KEY
run=("$SANDBOXIO" run --spec "$work/spec.json" --spec-sha256 "$spec_sha" --tenant acme --session s-42 --audit "$work/audit.jsonl")

step "open a sandbox for tenant acme, session s-42, and run a command in it"
say "sandboxio run --spec spec.json --spec-sha256 $spec_sha --tenant acme --session s-42 --timeout 30s --audit audit.jsonl -- sh -c '...'"
# shellcheck disable=SC2016 # expanded inside the sandbox
expect 0 "${run[@]}" --timeout 30s -- sh -c '
echo "hello from sandbox $(hostname) as $(id -un)"
echo "network interfaces: $(awk -F: "NR>2{print \$1}" /proc/net/dev | tr -d " " | tr "\n" " ")(egress denied)"
echo "root filesystem: $(touch /x 2>/dev/null && echo writable || echo read-only); /work holds $(df -m /work | awk "NR==2{print \$2}") MB"
echo "DEMO_API_KEY is set: $([ -n "$DEMO_API_KEY" ] && echo yes); echoed back it reads: $DEMO_API_KEY"'

step "run code in a sandbox (run-code)"
cat >"$work/hello.sh" <<'CODE'
n=0
for f in /proc/[0-9]*; do n=$((n+1)); done
echo "code ran with LANG=$LANG; $n processes visible; cap: $(cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || echo '?') pids"
exit 3
CODE
say "sandboxio run-code --spec spec.json --tenant acme --session s-42 --lang sh hello.sh"
expect 3 "$SANDBOXIO" run-code --spec "$work/spec.json" --spec-sha256 "$spec_sha" --tenant acme --session s-42 --audit "$work/audit.jsonl" --lang sh "$work/hello.sh"

step "a command past its timeout is killed: ExecutionTimeout, exit 67"
say "sandboxio run ... --timeout 2s -- sleep 60"
expect 67 "${run[@]}" --quiet --timeout 2s -- sleep 60

step "a write past the disk cap: ResourceLimitExceeded(disk), exit 68"
say "sandboxio run ... -- dd if=/dev/zero of=/tmp/fill bs=1M count=1024"
expect 68 "${run[@]}" --quiet -- dd if=/dev/zero of=/tmp/fill bs=1M count=1024

step "egress is denied, and every attempt is seen: refused at once and counted in the audit record"
say "sandboxio run ... -- sh -c 'nslookup pypi.org; nc -w 2 1.1.1.1 22'"
# shellcheck disable=SC2016 # expanded inside the sandbox
expect 0 "${run[@]}" --timeout 30s -- sh -c '
nslookup pypi.org >/dev/null 2>&1 || echo "nslookup pypi.org: refused"
nc -w 2 1.1.1.1 22 </dev/null 2>/dev/null || echo "connect 1.1.1.1:22: refused"'
say "sandboxio egress report audit.jsonl"
expect 0 "$SANDBOXIO" egress report "$work/audit.jsonl"
if ! grep -qF '"kind":"dns","name":"pypi.org"' "$work/audit.jsonl"; then
	echo "demo: no blocked attempt to pypi.org in the audit records" >&2
	exit 1
fi

step "an edited spec is refused before anything is provisioned: exit 64"
sed 's/"memory_mb":256/"memory_mb":8192/' "$work/spec.json" >"$work/edited.json"
say "sandboxio run --spec edited.json --spec-sha256 $spec_sha ..."
expect 64 "$SANDBOXIO" run --spec "$work/edited.json" --spec-sha256 "$spec_sha" --tenant acme --session s-42 --audit "$work/audit.jsonl" -- true
say "sandboxio run --spec spec.json --tenant globex --session s-42 ...   (another tenant)"
expect 64 "$SANDBOXIO" run --spec "$work/spec.json" --spec-sha256 "$spec_sha" --tenant globex --session s-42 --audit "$work/audit.jsonl" -- true

step "the audit records (one JSON line per event; no secret value)"
if grep -qF "$DEMO_API_KEY" "$work/audit.jsonl"; then
	echo "demo: the secret is in the audit log" >&2
	exit 1
fi
if command -v jq >/dev/null 2>&1; then
	jq -c '{event, op, sandbox: (.sandbox_id // "" | .[0:12]), tenant_id, session_id, tier, network: .network.egress,
		exit_code, blocked_egress, ms: (.duration_ms | floor), error_class, limit, rule}
		| with_entries(select(.value != null and .value != ""))' "$work/audit.jsonl"
	echo "one full record:"
	jq . <(head -n 1 "$work/audit.jsonl")
	echo "a blocked attempt in a record:"
	jq -c 'select(.blocked_egress > 0) | {event, op, blocked_egress, blocked_egress_destinations}' "$work/audit.jsonl" | head -n 1
else
	cat "$work/audit.jsonl"
fi

step "an E2B template, opened against the local E2B server"
# A key made up for the demo: the server accepts only it, and the CLI sends
# it as E2B's X-API-Key; it must appear in no output or audit record.
E2B_API_KEY="e2b_demo_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
export E2B_API_KEY
say "e2bserver -url-file e2b.url &   (E2B's REST API and envd; commands run in a hardened local Docker sandbox)"
"$E2BSERVER" -url-file "$work/e2b.url" >"$work/e2bserver.log" 2>&1 &
e2b_pid=$!
for _ in $(seq 1 600); do
	[ -s "$work/e2b.url" ] && break
	kill -0 "$e2b_pid" 2>/dev/null || { cat "$work/e2bserver.log" >&2; echo "demo: the E2B server exited" >&2; exit 1; }
	sleep 0.1
done
[ -s "$work/e2b.url" ] || { echo "demo: the E2B server did not start within 60s" >&2; exit 1; }
E2B_API_URL=$(cat "$work/e2b.url")
E2B_SANDBOX_URL=$E2B_API_URL
export E2B_API_URL E2B_SANDBOX_URL
echo "local E2B server at $E2B_API_URL (pid $e2b_pid); E2B_API_URL and E2B_SANDBOX_URL point at it"

cp -r examples/e2b "$work/e2b"
say "terraform apply examples/e2b   (backend e2b://, template \"base\", egress deny but pypi.org)"
(cd "$work/e2b" && tf apply -auto-approve)
e2b_sha=$(cd "$work/e2b" && "$TERRAFORM" output -raw tenant_spec_sha256 2>/dev/null)
(cd "$work/e2b" && "$TERRAFORM" output -raw tenant_spec 2>/dev/null) >"$work/e2b-spec.json"
[ -n "$e2b_sha" ] && [ -s "$work/e2b-spec.json" ] || { echo "demo: no E2B tenant spec output" >&2; exit 1; }
say "sandboxio run --spec e2b-spec.json --spec-sha256 $e2b_sha --tenant acme --session s-e2b --audit e2b-audit.jsonl -- sh -c '...'"
# shellcheck disable=SC2016 # expanded inside the sandbox
expect 0 "$SANDBOXIO" run --spec "$work/e2b-spec.json" --spec-sha256 "$e2b_sha" --tenant acme --session s-e2b \
	--audit "$work/e2b-audit.jsonl" --timeout 30s -- sh -c '
echo "hello from an E2B sandbox (host $(hostname)) as $(id -un), LANG=$LANG"
echo "network interfaces: $(ls /sys/class/net | tr "\n" " ")(the local server runs an allow list as no network at all)"'
say "the audit records name E2B's sandbox ID; blocked_egress stays null (E2B does not report it)"
if grep -qF "$E2B_API_KEY" "$work/e2b-audit.jsonl"; then
	echo "demo: the E2B API key is in the audit log" >&2
	exit 1
fi
if command -v jq >/dev/null 2>&1; then
	jq -c '{event, backend, sandbox_id, tier, network: .network, blocked_egress, exit_code}
		| with_entries(select(.key == "blocked_egress" or (.value != null and .value != "")))' "$work/e2b-audit.jsonl"
else
	cat "$work/e2b-audit.jsonl"
fi
(cd "$work/e2b" && tf destroy -auto-approve >/dev/null)
rm -f "$work/e2b/terraform.tfstate"
say "kill -TERM $e2b_pid   (the server kills any sandbox it still holds)"
stop_e2b
unset E2B_API_KEY E2B_API_URL E2B_SANDBOX_URL

refused=0
for dir in examples/refused/*/; do
	name=$(basename "$dir")
	step "terraform plan examples/refused/$name (must be refused)"
	cp -r "$dir" "$work/$name"
	if (cd "$work/$name" && tf plan -input=false); then
		echo "demo: examples/refused/$name was accepted; it must be refused" >&2
		exit 1
	fi
	refused=$((refused + 1))
done

step "terraform destroy examples/quickstart"
(cd "$work/quickstart" && tf destroy -auto-approve)
rm -f "$work/quickstart/terraform.tfstate"

step "nothing left behind"
say "sandboxio reap --label sandboxio.template=quickstart"
"$SANDBOXIO" reap --label sandboxio.template=quickstart
say "docker ps -a --filter label=sandboxio.managed --filter label=sandboxio.template=quickstart"
left=$(docker ps -a --filter label=sandboxio.managed --filter label=sandboxio.template=quickstart --format '{{.ID}} {{.Names}} {{.Status}}')
if [ -n "$left" ]; then
	echo "demo: sandbox containers left behind:" >&2
	echo "$left" >&2
	exit 1
fi
echo "no sandboxio container of the demo is left"

step "done in $((SECONDS - started))s: quickstart applied and destroyed, sandboxes opened for tenant acme (Docker and the local E2B server) and removed, $refused configurations refused at plan"
