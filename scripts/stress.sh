#!/usr/bin/env bash
# make stress: the Docker, CLI and limit tests, ROUNDS times (10 by default),
# while two busy loops keep both cores of the machine busy; TestFiftyTenants
# (50 tenants opened, run and closed at once) runs in every round. A test
# that fails under load is a defect, in the test or in the design. Prints
# the runs and the failures; exits 1 when any round of any package failed.
# Not part of .ci/run: it takes long.
#
#   make stress                       # 10 rounds, after installing what the tests need
#   scripts/stress.sh                 # the same, when make referee-deps analysers has run
#   ROUNDS=3 make stress
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

ROUNDS=${ROUNDS:-10}
PKGS=(./internal/backends/docker/ ./sandbox/ ./cmd/sandboxio/)
logs=${STRESS_LOGS:-$(mktemp -d)}
mkdir -p "$logs"

busy=()
for _ in 1 2; do
	sh -c 'while :; do :; done' >/dev/null 2>&1 &
	busy+=($!)
done
stop_busy() { kill "${busy[@]}" 2>/dev/null || true; }
trap stop_busy EXIT
echo "== stress: ${#PKGS[@]} packages x $ROUNDS rounds, 2 busy loops (pids ${busy[*]}); logs in $logs"

export SANDBOXIO_REQUIRE_DOCKER=1 SANDBOXIO_STRESS=1 TF_ACC=1 CHECKPOINT_DISABLE=1
declare -A runs fails
failed_tests=()
start=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
	for pkg in "${PKGS[@]}"; do
		name=$(basename "$pkg")
		log="$logs/$name-$r.log"
		t0=$(date +%s)
		if go test -count=1 -timeout 30m -v "$pkg" >"$log" 2>&1; then
			result=ok
		else
			result=FAIL
			fails[$name]=$((${fails[$name]:-0} + 1))
			while read -r t; do failed_tests+=("round $r: $t"); done < <(grep -E '^\s*--- FAIL' "$log" | sed -E 's/^\s*--- FAIL: //')
		fi
		runs[$name]=$((${runs[$name]:-0} + 1))
		echo "round $r $name: $result ($(($(date +%s) - t0)) s)"
	done
done

echo "== stress results ($(($(date +%s) - start)) s)"
total=0
for pkg in "${PKGS[@]}"; do
	name=$(basename "$pkg")
	echo "$name: ${runs[$name]} runs, ${fails[$name]:-0} failed"
	total=$((total + ${fails[$name]:-0}))
done
if ((${#failed_tests[@]} > 0)); then
	echo "failed tests:"
	printf '  %s\n' "${failed_tests[@]}"
fi
((total == 0))
