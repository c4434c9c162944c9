#!/usr/bin/env bash
# Benchmark: `sandboxio policy check` against `conftest test` with an
# equivalent policy (the same sandboxio bundle behind a Rego adapter that
# builds the same input documents), on the same generated plan, in the same
# run. Prints the median wall time and peak RSS of each and their ratios.
#
#   scripts/bench-policy-check.sh            # 1000 resources, 5 runs each
#   N=5000 RUNS=9 scripts/bench-policy-check.sh
#   CONFTEST=/path/to/conftest scripts/bench-policy-check.sh   # skip the install
#
# Needs go, terraform (the plan is a real `terraform show -json` of a real
# plan, through dev_overrides) and GNU time (/usr/bin/time). conftest
# v0.71.1 is installed into a temporary GOBIN unless CONFTEST is set.
set -euo pipefail

N=${N:-1000}
RUNS=${RUNS:-5}
CONFTEST_VERSION=v0.71.1
root=$(cd "$(dirname "$0")/.." && pwd)
terraform=${TERRAFORM:-$(command -v terraform || echo /usr/local/bin/terraform)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"

echo "== building sandboxio and the provider"
go build -trimpath -o "$work/bin/sandboxio" ./cmd/sandboxio
go build -trimpath -o "$work/provider/terraform-provider-sandboxio" .
conftest=${CONFTEST:-}
if [[ -z "$conftest" ]]; then
	echo "== installing conftest $CONFTEST_VERSION into a temporary GOBIN"
	GOBIN="$work/gobin" GOTOOLCHAIN=local CGO_ENABLED=1 GOFLAGS='' go install "github.com/open-policy-agent/conftest@$CONFTEST_VERSION"
	conftest="$work/gobin/conftest"
fi
echo "conftest $CONFTEST_VERSION: $conftest"

echo "== generating a $N-resource configuration and its plan"
mkdir -p "$work/tf"
cat >"$work/tfrc" <<RC
provider_installation {
  dev_overrides {
    "sandboxio/sandboxio" = "$work/provider"
  }
  direct {}
}
RC
{
	cat <<'TF'
terraform {
  required_providers {
    sandboxio = { source = "sandboxio/sandboxio" }
  }
}

provider "sandboxio" {
  default_backend = "docker://"
}
TF
	# Per 10 resources: 6 templates on four backends (one with open egress,
	# which warns), 2 network policies and 2 sets of caps. Every template
	# must plan: the comparison reads the plan the provider wrote, so a
	# template the policy refuses (Vercel's default 512 MB, SBX-RES-007)
	# would stop the benchmark. The sixth template is a plain Docker one.
	for ((i = 0; i < N / 10; i++)); do
		cat <<TF
resource "sandboxio_template" "py_$i" {
  name              = "py-$i"
  image             = "python:3.12-slim"
  runtime           = "runsc"
  require_isolation = "GVISOR"
  timeout_seconds   = 120
  lifetime_seconds  = 600
  env               = { LANG = "C.UTF-8", APP_MODE = "batch" }
  secret_names      = ["OPENAI_API_KEY"]
  labels            = { team = "agents", idx = "$i" }
  resources         = { memory_mb = 1024 }
}
resource "sandboxio_template" "e2b_$i" {
  name    = "e2b-$i"
  backend = "e2b://"
  image   = "base"
  network = { allow = ["pypi.org", "10.0.0.0/8"] }
}
resource "sandboxio_template" "modal_$i" {
  name      = "modal-$i"
  backend   = "modal://agents"
  image     = "python:3.12"
  network   = { allow = ["10.1.0.0/16"] }
  resources = { cpu = 2, memory_mb = 2048 }
}
resource "sandboxio_template" "vercel_$i" {
  name             = "vercel-$i"
  backend          = "vercel://acme/agents"
  image            = "node22"
  lifetime_seconds = 900
  resources        = { cpu = 1, memory_mb = 2048 }
}
resource "sandboxio_template" "open_$i" {
  name    = "open-$i"
  image   = "python:3.12-slim"
  network = { egress = "allow" }
}
resource "sandboxio_template" "plain_$i" {
  name  = "plain-$i"
  image = "python:3.12-slim"
}
resource "sandboxio_network_policy" "deny_$i" {}
resource "sandboxio_network_policy" "pypi_$i" {
  backend = "e2b://"
  allow   = ["pypi.org", "files.pythonhosted.org"]
}
resource "sandboxio_resource_caps" "small_$i" {
  memory_mb = 1024
}
resource "sandboxio_resource_caps" "big_$i" {
  cpu       = 4
  memory_mb = 8192
  pids      = 512
}
TF
	done
} >"$work/tf/main.tf"
(
	cd "$work/tf"
	export TF_CLI_CONFIG_FILE="$work/tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
	"$terraform" plan -input=false -out=tfplan >/dev/null
	"$terraform" show -json tfplan >"$work/plan.json"
)
# The provider refuses at plan what the rules refuse, so a plan it wrote
# holds warnings only. To time refusals too, give every tenth Docker
# template an egress allow list in the plan JSON (SBX-NET-003), as a plan
# written without the provider's checks would hold.
python3 - "$work/plan.json" <<'PY'
import json, sys
path = sys.argv[1]
plan = json.load(open(path))
n = 0
for rc in plan["resource_changes"]:
    if rc["type"] == "sandboxio_template" and rc["address"].startswith("sandboxio_template.py_"):
        if int(rc["address"].rsplit("_", 1)[1]) % 10 == 0:
            rc["change"]["after"]["network"]["allow"] = ["151.101.0.0/16"]
            n += 1
json.dump(plan, open(path, "w"))
print(f"refusals injected: {n}")
PY
echo "plan.json: $(wc -c <"$work/plan.json") bytes"

# The conftest policy: the bundle's rules (tests excluded), the adapter, and
# the capability data at data.capabilities.
mkdir -p "$work/conftest/policy" "$work/conftest/data/capabilities"
for f in policies/*.rego; do
	[[ "$f" == *_test.rego ]] || cp "$f" "$work/conftest/policy/"
done
cp scripts/bench-policy-check/conftest.rego "$work/conftest/policy/adapter.rego"
cp policies/capabilities/data.json "$work/conftest/data/capabilities/data.json"

sandboxio_cmd=("$work/bin/sandboxio" policy check --format json "$work/plan.json")
conftest_cmd=("$conftest" test --no-color --output json --policy "$work/conftest/policy" --data "$work/conftest/data" --namespace main "$work/plan.json")

echo "== equivalence: both tools must report the same findings"
"${sandboxio_cmd[@]}" >"$work/sandboxio.json" || true
"${conftest_cmd[@]}" >"$work/conftest.json" || true
counts=$(python3 - "$work/sandboxio.json" "$work/conftest.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
sd = sorted(f"{r['address']} {f['rule']}" for r in s["resources"] for f in r["findings"] if f["outcome"] == "fail")
sw = sorted(f"{r['address']} {f['rule']}" for r in s["resources"] for f in r["findings"] if f["outcome"] == "warn")
def ids(kind):
    out = []
    for r in c:
        for x in r.get(kind) or []:
            addr, rest = x["msg"].split(": ", 1)
            out.append(addr + " " + rest.split(" ", 1)[0])
    return sorted(out)
cd, cw = ids("failures"), ids("warnings")
print(f"sandboxio: {len(s['resources'])} resources, {len(sd)} refusals, {len(sw)} warnings; conftest: {len(cd)} refusals, {len(cw)} warnings")
if (sd, sw) != (cd, cw):
    print("MISMATCH: the two tools do not report the same findings", file=sys.stderr)
    sys.exit(1)
PY
)
echo "$counts"

# measure CMD...: prints "seconds maxrss_kb" of one run.
measure() {
	/usr/bin/time -f '%e %M' -o "$work/time" "$@" >/dev/null 2>&1 || true
	tail -n 1 "$work/time"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

bench() { # name cmd...
	local name=$1
	shift
	: >"$work/$name.t"
	: >"$work/$name.m"
	for ((r = 0; r < RUNS; r++)); do
		read -r s kb < <(measure "$@")
		echo "$s" >>"$work/$name.t"
		echo "$kb" >>"$work/$name.m"
	done
	echo "$(median <"$work/$name.t") $(median <"$work/$name.m")"
}

echo "== timing $RUNS runs each (median wall time, median peak RSS)"
read -r st sm < <(bench sandboxio "${sandboxio_cmd[@]}")
read -r s1t s1m < <(GOMAXPROCS=1 bench sandboxio1 "${sandboxio_cmd[@]}")
read -r ct cm < <(bench conftest "${conftest_cmd[@]}")
printf '%-34s %9s %12s\n' "" "time (s)" "peak RSS (MB)"
printf '%-34s %9.3f %12.1f\n' "sandboxio policy check" "$st" "$(echo "$sm / 1024" | bc -l)"
printf '%-34s %9.3f %12.1f\n' "sandboxio policy check, GOMAXPROCS=1" "$s1t" "$(echo "$s1m / 1024" | bc -l)"
printf '%-34s %9.3f %12.1f\n' "conftest test $CONFTEST_VERSION" "$ct" "$(echo "$cm / 1024" | bc -l)"
printf 'ratios (conftest / sandboxio): time %.1fx (%.1fx on one CPU), peak memory %.1fx\n' \
	"$(echo "$ct / $st" | bc -l)" "$(echo "$ct / $s1t" | bc -l)" "$(echo "$cm / $sm" | bc -l)"
