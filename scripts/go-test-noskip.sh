#!/usr/bin/env bash
# go test -v with the given arguments, failing when any test or subtest
# skipped, or when no test ran at all. For suites whose promise is "every
# test ran" (the Kubernetes backend's, on the cluster CI brings up): a skip
# there is a check that did not happen, so it must not pass quietly.
#
# Prints go test's per-package lines and how many tests passed; the whole
# verbose log only when something failed, with the skipped tests and their
# reasons when something skipped.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT

go test -v "$@" >"$log" 2>&1
rc=$?
grep -E '^(ok|FAIL|\?) ' "$log"
if [ "$rc" -ne 0 ]; then
	cat "$log"
	exit "$rc"
fi
passed=$(grep -cE '^ *--- PASS: ' "$log")
if grep -qE '^ *--- SKIP: ' "$log"; then
	echo "go-test-noskip: these tests skipped, and none may:"
	grep -B1 -E '^ *--- SKIP: ' "$log" | grep -v '^--$'
	exit 1
fi
if [ "$passed" -eq 0 ]; then
	echo "go-test-noskip: no test ran"
	exit 1
fi
echo "go-test-noskip: $passed tests and subtests passed, none skipped"
