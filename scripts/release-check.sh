#!/usr/bin/env bash
# `make release-check`: goreleaser check, then two snapshot releases (no
# signing, no publishing) of HEAD, each in its own fresh clone at a different
# path, and a comparison: every archive, SBOM and the checksums file must be
# byte-identical. Then the release itself is checked: every archive is in the
# checksums file and matches it, the CLI ships for every OS/arch the provider
# does, each archive has its SBOM, and the CLI built by goreleaser prints the
# commit, the snapshot version and the OPA and framework versions of go.mod.
#
# goreleaser and syft come from PATH (the Makefile puts ./bin first). Only
# committed work is checked: uncommitted changes are not in the clones.
# RELEASE_CHECK_OUT (default bin/release-check) keeps the two dist folders.
# RELEASE_CHECK_TARGETS (e.g. "linux_amd64 windows_amd64") builds only those
# targets, in both builds, instead of the release's whole OS/arch matrix: each
# target costs a cold compile of every dependency, so CI checks two (both
# archive formats) and `make release-check` alone checks all.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${RELEASE_CHECK_OUT:-$root/bin/release-check}

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "release-check: uncommitted changes are not part of this check (it builds HEAD)"
fi

echo "-- goreleaser check"
goreleaser check

rm -rf "$out"
mkdir -p "$out"
commit=$(git rev-parse HEAD)
for run in a b; do
	echo "-- snapshot release $run of $commit"
	git clone -q --no-hardlinks "$root" "$out/src-$run"
	git -C "$out/src-$run" checkout -q --detach "$commit"
	if [ -n "${RELEASE_CHECK_TARGETS:-}" ]; then
		list=$(for t in $RELEASE_CHECK_TARGETS; do printf '%s_%s, ' "$t" "$([ "${t#*_}" = arm64 ] && echo v8.0 || echo v1)"; done)
		sed -i -E "s/^    goos: .*/    targets: [${list%, }]/; /^    goarch: /d" "$out/src-$run/.goreleaser.yml"
		grep -q "^    targets: " "$out/src-$run/.goreleaser.yml" || { echo "release-check: could not narrow the targets"; exit 1; }
	fi
	start=$(date +%s)
	(cd "$out/src-$run" && goreleaser release --snapshot --clean --skip=sign,publish >"$out/goreleaser-$run.log" 2>&1) || {
		tail -50 "$out/goreleaser-$run.log"
		echo "release-check: snapshot release $run failed (log: $out/goreleaser-$run.log)"
		exit 1
	}
	echo "   $(($(date +%s) - start))s"
done

a=$out/src-a/dist b=$out/src-b/dist
shopt -s nullglob
files=()
for f in "$a"/*.zip "$a"/*.tar.gz "$a"/*.sbom.spdx.json "$a"/*_SHA256SUMS; do files+=("$(basename "$f")"); done
if [ ${#files[@]} -eq 0 ]; then
	echo "release-check: no archives in $a"
	exit 1
fi

echo "-- reproducibility: ${#files[@]} files built twice"
fail=0
for f in "${files[@]}"; do
	if [ ! -f "$b/$f" ]; then
		echo "   only in the first build: $f"
		fail=1
	elif ! cmp -s "$a/$f" "$b/$f"; then
		echo "   differs: $f ($(sha256sum <"$a/$f" | cut -c1-16) vs $(sha256sum <"$b/$f" | cut -c1-16))"
		fail=1
	fi
done
for f in "$b"/*.zip "$b"/*.tar.gz "$b"/*.sbom.spdx.json "$b"/*_SHA256SUMS; do
	[ -f "$a/$(basename "$f")" ] || { echo "   only in the second build: $(basename "$f")"; fail=1; }
done
[ $fail -eq 0 ] || { echo "release-check: the two builds of $commit differ"; exit 1; }
echo "   byte-identical"

echo "-- contents"
sums=("$a"/*_SHA256SUMS)
[ ${#sums[@]} -eq 1 ] || { echo "release-check: want one checksums file, found ${#sums[@]}"; exit 1; }
version=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' "$a/metadata.json")
[ -n "$version" ] || { echo "release-check: no version in metadata.json"; exit 1; }
# The registry manifest is uploaded under this name (release.extra_files)
# but not copied into dist.
cp "$out/src-a/terraform-registry-manifest.json" "$a/terraform-provider-sandboxio_${version}_manifest.json"
(cd "$a" && sha256sum --quiet -c "$(basename "${sums[0]}")") || { echo "release-check: the checksums file does not match the files"; exit 1; }
targets=${RELEASE_CHECK_TARGETS:-linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64 windows_arm64 freebsd_amd64 freebsd_arm64}
for target in $targets; do
	os=${target%_*} arch=${target#*_}
	{
		ext=tar.gz
		[ $os = windows ] && ext=zip
		for f in "terraform-provider-sandboxio_${version}_${os}_${arch}.zip" "sandboxio_${version}_${os}_${arch}.$ext"; do
			[ -f "$a/$f" ] || { echo "release-check: missing $f"; fail=1; continue; }
			[ -f "$a/$f.sbom.spdx.json" ] || { echo "release-check: missing the SBOM of $f"; fail=1; }
			grep -q "  $f\$" "${sums[0]}" || { echo "release-check: $f is not in the checksums file"; fail=1; }
			grep -q "  $f.sbom.spdx.json\$" "${sums[0]}" || { echo "release-check: the SBOM of $f is not in the checksums file"; fail=1; }
		done
	}
done
n=$(find "$a" -maxdepth 1 \( -name '*.zip' -o -name '*.tar.gz' \) | wc -l)
[ "$n" -eq $((2 * $(wc -w <<<"$targets"))) ] || { echo "release-check: $n archives; want a provider and a CLI archive for each of: $targets"; fail=1; }
[ $fail -eq 0 ] || exit 1
grep -q '"name":"github.com/open-policy-agent/opa"' "$a/sandboxio_${version}_linux_amd64.tar.gz.sbom.spdx.json" ||
	{ echo "release-check: the CLI's SBOM does not list OPA"; exit 1; }
echo "   $((${#files[@]} - 1)) archives and SBOMs, all in the checksums file; CLI and provider for: $targets"

echo "-- the released CLI's version"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$a/sandboxio_${version}_linux_amd64.tar.gz" -C "$tmp" sandboxio
got=$("$tmp/sandboxio" version --json)
echo "$got" | sed 's/^/   /'
want_opa=$(go list -m -f '{{.Version}}' github.com/open-policy-agent/opa)
want_fw=$(go list -m -f '{{.Version}}' github.com/hashicorp/terraform-plugin-framework)
for want in "\"version\": \"$version\"" "\"commit\": \"$commit\"" "\"opa\": \"$want_opa\"" "\"terraform_plugin_framework\": \"$want_fw\""; do
	grep -qF "$want" <<<"$got" || { echo "release-check: the released CLI's version output lacks $want"; exit 1; }
done
echo "release-check: ok"
