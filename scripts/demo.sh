#!/usr/bin/env bash
# demo.sh: the main job, end to end, on this machine (run by `make demo`).
#
# 1. terraform apply on examples/quickstart: a network policy, resource caps and
#    a template, every computed value known at plan.
# 2. terraform plan refusing configurations the backend cannot enforce, each
#    with its error class, rule and fix.
# 3. terraform destroy.
# The provider is the one just built (bin/), installed through a dev override;
# nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TERRAFORM=${TERRAFORM:-$(command -v terraform || echo /usr/local/bin/terraform)}

work=$(mktemp -d)
cleanup() {
	if [ -f "$work/quickstart/terraform.tfstate" ]; then
		(cd "$work/quickstart" && "$TERRAFORM" destroy -auto-approve -no-color >/dev/null 2>&1) || true
	fi
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
# dev_overrides makes terraform print a warning block on every command; it
# says nothing about sandboxio, so the demo drops it.
tf() { "$TERRAFORM" "$@" -no-color 2>&1 | awk '/Warning: Provider development overrides are in effect/{skip=1} skip&&/published releases\./{skip=0;next} !skip'; }

cp -r examples/quickstart "$work/quickstart"
step "terraform apply examples/quickstart"
(cd "$work/quickstart" && tf apply -auto-approve)
spec=$(cd "$work/quickstart" && "$TERRAFORM" output -raw spec_sha256 2>/dev/null)
[ -n "$spec" ] || { echo "demo: no spec_sha256 output" >&2; exit 1; }

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

step "done: quickstart applied and destroyed (spec sha256 $spec); $refused configurations refused at plan"
